package rulefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
)

// ParseEnvoy reads a configuration file of envoyproxy/ratelimit, in YAML
// or JSON, and returns it as a validated set of Weir rules (SPEC §3.1,
// "Migration"):
//
//	domain: messaging
//	descriptors:
//	  - key: message_type
//	    value: marketing
//	    descriptors:
//	      - key: to_number
//	        rate_limit: {unit: day, requests_per_unit: 5}
//
// Every descriptor with a rate_limit becomes one rule, made from the
// descriptors on the way to it from the top: a descriptor with a value
// becomes the condition key = value, one without (or with the value "*")
// the key dimension key, so that each value is counted on its own. The
// example gives the rule "message_type_marketing.to_number": requests with
// message_type "marketing" and a to_number, 5 a day for each to_number.
//
// The limit is requests_per_unit per unit (second, minute, hour, day, week;
// month is 30 days and year 365), with FixedWindow, the algorithm of
// envoyproxy/ratelimit; unlimited makes an Unlimited rule and shadow_mode
// a Shadow one. The rule id is rate_limit.name when given, else the
// descriptors' key_value pairs joined by "." as envoyproxy/ratelimit names
// their statistics, in either case with characters a rule id cannot hold
// replaced by '_' and made unique. detailed_metric, which is about
// statistics, is accepted and ignored.
//
// A descriptor with a value takes precedence over a sibling without one
// (or with "*") for that value, as in envoyproxy/ratelimit: the rules
// below the one without get an allow override for each such value.
//
// Some of the format has no Weir equivalent and is refused: replaces,
// values with a prefix wildcard ("foo*"), a key repeated on one path, a
// requests_per_unit of 0. docs/rules.md describes the conversion and how
// Weir's matching differs.
//
// Errors are those of Parse for malformed documents; any other problem
// gives a *rule.ValidationError listing every problem with the path of
// the descriptor, e.g. descriptors[0].descriptors[1].rate_limit.unit.
func ParseEnvoy(data []byte) (rule.Set, error) {
	j, err := toJSON(data)
	if err != nil {
		return rule.Set{}, err
	}
	return parseEnvoyJSON(j)
}

// isEnvoy reports whether the JSON document j looks like a configuration
// of envoyproxy/ratelimit: an object with descriptors and no rules.
func isEnvoy(j []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(j, &top) != nil {
		return false
	}
	_, descriptors := top["descriptors"]
	_, rules := top["rules"]
	return descriptors && !rules
}

// envoyUnits are the seconds of envoyproxy/ratelimit's units, as its
// config loader reads them (in any case).
var envoyUnits = map[string]int64{
	"second": 1,
	"minute": 60,
	"hour":   3600,
	"day":    86400,
	"week":   7 * 86400,
	"month":  30 * 86400,
	"year":   365 * 86400,
}

const (
	maxEnvoyDepth  = 64   // descriptors nested deeper are refused
	maxEnvoyErrors = 1000 // as rule.ValidationError
	maxRuleID      = 128
	maxDescription = 4096
)

// envoyNode is one descriptor of the configuration.
type envoyNode struct {
	path     string // descriptors[0].descriptors[1]
	key      string
	value    string // "" when absent
	limit    *envoyLimit
	shadow   bool
	children []*envoyNode
}

// anyValue reports whether n stands for every value of its key.
func (n *envoyNode) anyValue() bool { return n.value == "" || n.value == "*" }

// envoyLimit is a descriptor's rate_limit.
type envoyLimit struct {
	perUnit   int64
	window    int64 // seconds
	unlimited bool
	name      string
}

// envoyConverter collects the problems of one configuration.
type envoyConverter struct {
	errs    []rule.FieldError
	omitted int
}

func (c *envoyConverter) add(path, format string, args ...any) {
	if len(c.errs) >= maxEnvoyErrors {
		c.omitted++
		return
	}
	c.errs = append(c.errs, rule.FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
}

func (c *envoyConverter) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return &rule.ValidationError{Errors: c.errs, Omitted: c.omitted}
}

func parseEnvoyJSON(j []byte) (rule.Set, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	doc, err := readJSON(dec)
	if err != nil {
		return rule.Set{}, fmt.Errorf("%w: %v", rule.ErrSyntax, err)
	}
	var c envoyConverter
	domain, nodes := c.root(doc)
	if c.check(nodes, nil); len(c.errs) > 0 {
		return rule.Set{}, c.err()
	}
	s, origins := convertEnvoy(domain, nodes)
	if err := s.Validate(); err != nil {
		var ve *rule.ValidationError
		if !errors.As(err, &ve) {
			return rule.Set{}, err
		}
		for _, fe := range ve.Errors {
			c.addRuleError(fe, s.Rules, origins)
		}
		c.omitted += ve.Omitted
		return rule.Set{}, c.err()
	}
	return s, nil
}

// addRuleError reports a problem that validation found in a converted
// rule at the descriptor the rule came from.
func (c *envoyConverter) addRuleError(fe rule.FieldError, rules []rule.Rule, origins []string) {
	var i int
	if _, err := fmt.Sscanf(fe.Path, "rules[%d]", &i); err != nil || i < 0 || i >= len(rules) {
		c.add(fe.Path, "%s", fe.Reason)
		return
	}
	field := strings.TrimPrefix(fe.Path[strings.IndexByte(fe.Path, ']')+1:], ".")
	c.add(origins[i], "as Weir rule %q: %s: %s", rules[i].ID, field, fe.Reason)
}

// root decodes the top of the document.
func (c *envoyConverter) root(v any) (domain string, nodes []*envoyNode) {
	o, ok := v.(*jsonObject)
	if !ok {
		c.add("", "want an object with domain and descriptors, got %s", describeJSON(v))
		return "", nil
	}
	c.dups("", o)
	hasDomain := false
	for _, k := range fieldOrder(o, "domain", "descriptors") {
		switch v := o.vals[k]; k {
		case "domain":
			hasDomain = true
			if s, ok := c.string("domain", v); ok {
				if s == "" {
					c.add("domain", "required")
				}
				domain = s
			}
		case "descriptors":
			nodes = c.descriptors("descriptors", v, 1)
		default:
			c.add(k, "unknown field (want domain or descriptors)")
		}
	}
	if !hasDomain {
		c.add("domain", "required")
	}
	return domain, nodes
}

// descriptors decodes the list of descriptors at path, at the given depth.
func (c *envoyConverter) descriptors(path string, v any, depth int) []*envoyNode {
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		c.add(path, "want a list of descriptors, got %s", describeJSON(v))
		return nil
	}
	if depth > maxEnvoyDepth {
		c.add(path, "descriptors nested more than %d deep", maxEnvoyDepth)
		return nil
	}
	var nodes []*envoyNode
	for i, e := range l {
		if n := c.descriptor(fmt.Sprintf("%s[%d]", path, i), e, depth); n != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// descriptor decodes one descriptor, or reports why it cannot.
func (c *envoyConverter) descriptor(path string, v any, depth int) *envoyNode {
	o, ok := v.(*jsonObject)
	if !ok {
		c.add(path, "want a descriptor (an object with a key), got %s", describeJSON(v))
		return nil
	}
	c.dups(path, o)
	n := &envoyNode{path: path}
	hasKey := false
	for _, k := range fieldOrder(o, "key", "value", "rate_limit", "shadow_mode", "detailed_metric", "descriptors") {
		p := path + "." + k
		switch v := o.vals[k]; k {
		case "key":
			hasKey = true
			if s, ok := c.string(p, v); ok {
				if s == "" {
					c.add(p, "empty")
				}
				n.key = s
			}
		case "value":
			if v != nil { // null: no value, as in envoyproxy/ratelimit
				n.value, _ = c.string(p, v)
			}
		case "rate_limit":
			if v != nil { // null: no rate limit
				n.limit = c.rateLimit(p, v)
			}
		case "descriptors":
			n.children = c.descriptors(p, v, depth+1)
		case "shadow_mode":
			n.shadow, _ = c.bool(p, v)
		case "detailed_metric":
			c.bool(p, v) // statistics only: nothing to convert
		default:
			c.add(p, "unknown field (want key, value, rate_limit, descriptors, shadow_mode or detailed_metric)")
		}
	}
	if !hasKey {
		c.add(path+".key", "required")
	}
	return n
}

// rateLimit decodes a descriptor's rate_limit at path.
func (c *envoyConverter) rateLimit(path string, v any) *envoyLimit {
	o, ok := v.(*jsonObject)
	if !ok {
		c.add(path, "want an object with unit and requests_per_unit, got %s", describeJSON(v))
		return nil
	}
	c.dups(path, o)
	l := &envoyLimit{}
	unit, hasUnit, hasPerUnit, unitOK, perUnitOK := "", false, false, true, true
	for _, k := range fieldOrder(o, "unit", "requests_per_unit", "unlimited", "name", "replaces") {
		p := path + "." + k
		switch v := o.vals[k]; k {
		case "unit":
			hasUnit = true
			if unit, unitOK = c.string(p, v); unitOK {
				w, known := envoyUnits[strings.ToLower(unit)]
				if !known {
					c.add(p, "unknown unit %q (want second, minute, hour, day, week, month or year)", unit)
					unitOK = false
				}
				l.window = w
			}
		case "requests_per_unit":
			hasPerUnit = true
			l.perUnit, perUnitOK = c.int(p, v)
		case "unlimited":
			l.unlimited, _ = c.bool(p, v)
		case "name":
			if v != nil {
				l.name, _ = c.string(p, v)
			}
		case "replaces":
			c.add(p, "not supported: Weir applies every rule a request matches, and no rule replaces another; "+
				"narrow the rules' conditions instead, or give the keys concerned an override")
		default:
			c.add(p, "unknown field (want unit, requests_per_unit, unlimited, name or replaces)")
		}
	}
	switch {
	case l.unlimited && hasUnit && unitOK:
		c.add(path+".unit", "must be absent when unlimited is true")
	case l.unlimited:
		// requests_per_unit means nothing; envoyproxy/ratelimit ignores it.
	case !hasUnit:
		c.add(path+".unit", "required (want second, minute, hour, day, week, month or year)")
	}
	switch {
	case l.unlimited || !perUnitOK:
	case !hasPerUnit || l.perUnit == 0:
		c.add(path+".requests_per_unit", "want a limit from 1 to %d; Weir has no limit of 0 (which rejects every request): "+
			"remove the rate_limit, or deny the keys with an override of a Weir rule", int64(algorithm.MaxLimit))
	case l.perUnit < 0 || l.perUnit > algorithm.MaxLimit:
		c.add(path+".requests_per_unit", "%d is out of range [1, %d]", l.perUnit, int64(algorithm.MaxLimit))
	}
	return l
}

// check reports what a well-formed configuration cannot express in Weir:
// repeated descriptors, prefix wildcards and keys repeated on one path.
// outer are the keys of the descriptors enclosing nodes.
func (c *envoyConverter) check(nodes []*envoyNode, outer []*envoyNode) {
	seen := map[[2]string]*envoyNode{}
	for _, n := range nodes {
		if n.key == "" {
			continue // reported
		}
		if strings.HasSuffix(n.value, "*") && n.value != "*" {
			c.add(n.path+".value", "%q is a prefix wildcard, which Weir's conditions cannot express (they take an exact value, or \"*\" for any)", n.value)
		}
		sel := [2]string{n.key, n.value}
		if n.anyValue() {
			sel[1] = "*"
		}
		if first, dup := seen[sel]; dup {
			switch {
			case n.value == first.value && n.value == "":
				c.add(n.path, "repeats %s (key %q, no value)", first.path, n.key)
			case n.value == first.value:
				c.add(n.path, "repeats %s (key %q, value %q)", first.path, n.key, n.value)
			default:
				c.add(n.path, "selects every value of %q, as %s does", n.key, first.path)
			}
		} else {
			seen[sel] = n
		}
		if i := slices.IndexFunc(outer, func(o *envoyNode) bool { return o.key == n.key }); i >= 0 {
			c.add(n.path+".key", "%q is also the key of the enclosing %s; a Weir request has one value for each attribute", n.key, outer[i].path)
			continue
		}
		c.check(n.children, append(outer, n))
	}
}

// envoyPath is what the descriptors from the top down to one carry.
type envoyPath struct {
	conds    map[string]string
	dims     []string
	excluded [][2]string // (key, value) pairs the rules must let through
	names    []string    // key or key_value of each descriptor
	desc     []string    // key or key=value of each descriptor
}

// convertEnvoy turns checked descriptors into rules, and returns with them
// the path of the descriptor each rule comes from.
func convertEnvoy(domain string, nodes []*envoyNode) (rule.Set, []string) {
	s := rule.Set{Domain: domain, Rules: []rule.Rule{}}
	var origins []string
	var named []bool
	var walk func(nodes []*envoyNode, p envoyPath)
	walk = func(nodes []*envoyNode, p envoyPath) {
		// The values given to a key at this level: a request with one
		// of them is the business of that descriptor, not of a sibling
		// that takes any value.
		specific := map[string][]string{}
		for _, n := range nodes {
			if !n.anyValue() {
				specific[n.key] = append(specific[n.key], n.value)
			}
		}
		for _, n := range nodes {
			q := envoyPath{
				conds:    maps.Clone(p.conds),
				dims:     slices.Clone(p.dims),
				excluded: slices.Clone(p.excluded),
				names:    slices.Clone(p.names),
				desc:     slices.Clone(p.desc),
			}
			if n.anyValue() {
				q.dims = append(q.dims, n.key)
				for _, v := range specific[n.key] {
					q.excluded = append(q.excluded, [2]string{n.key, v})
				}
				q.names = append(q.names, n.key)
				q.desc = append(q.desc, n.key)
			} else {
				if q.conds == nil {
					q.conds = map[string]string{}
				}
				q.conds[n.key] = n.value
				q.names = append(q.names, n.key+"_"+n.value)
				q.desc = append(q.desc, n.key+"="+n.value)
			}
			if n.limit != nil {
				s.Rules = append(s.Rules, envoyRule(domain, n, q))
				origins = append(origins, n.path)
				named = append(named, n.limit.name != "")
			}
			walk(n.children, q)
		}
	}
	walk(nodes, envoyPath{})
	assignIDs(s.Rules, named)
	return s, origins
}

// envoyRule returns the rule of descriptor n, whose path is p. Its ID is
// the name it wants, which assignIDs makes valid and unique.
func envoyRule(domain string, n *envoyNode, p envoyPath) rule.Rule {
	r := rule.Rule{
		ID:          strings.Join(p.names, "."),
		Domain:      domain,
		Description: "from envoyproxy/ratelimit: " + strings.Join(p.desc, ", "),
		Conditions:  p.conds,
		Algorithm:   algorithm.FixedWindow,
		Shadow:      n.shadow,
		Enabled:     true,
	}
	if len(r.Description) > maxDescription {
		r.Description = "from envoyproxy/ratelimit: " + n.path
	}
	if len(p.dims) > 0 {
		r.KeyType = p.dims
	}
	if n.limit.name != "" {
		r.ID = n.limit.name
	}
	if n.limit.unlimited {
		r.Unlimited = true
	} else {
		r.Limit, r.WindowSeconds = n.limit.perUnit, n.limit.window
	}
	for _, kv := range p.excluded {
		v := kv[1]
		if kv[0] == rule.DimensionIP {
			// Overrides of "ip" must be canonical addresses.
			if a, err := netip.ParseAddr(v); err == nil {
				v = a.String()
			}
		}
		r.Overrides = append(r.Overrides, rule.Override{Match: map[string]string{kv[0]: v}, Action: rule.ActionAllow})
	}
	r.SetDefaults()
	return r
}

// assignIDs makes the ids the rules want valid and unique: characters a
// rule id cannot hold become '_', an id too long is cut and given a hash
// of the whole, and one already taken gets "-2", "-3", ... Rules named by
// rate_limit.name (named[i]) are served first, then the others, each in
// document order.
func assignIDs(rules []rule.Rule, named []bool) {
	taken := map[string]bool{}
	for _, first := range []bool{true, false} {
		for i := range rules {
			if named[i] == first {
				rules[i].ID = uniqueID(sanitizeID(rules[i].ID), taken)
			}
		}
	}
}

// sanitizeID turns s into a valid rule id.
func sanitizeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isIDChar(c) {
			b[i] = '_'
		}
	}
	id := strings.TrimLeft(string(b), "_-.")
	if id == "" {
		id = "descriptor"
	}
	if len(id) > maxRuleID {
		h := fnv.New64a()
		io.WriteString(h, s)
		id = fmt.Sprintf("%s-%016x", id[:maxRuleID-17], h.Sum64())
	}
	return id
}

// uniqueID returns id, or id with a suffix "-2", "-3", ... if id is taken,
// and marks the result taken.
func uniqueID(id string, taken map[string]bool) string {
	got := id
	for n := 2; taken[got]; n++ {
		suffix := "-" + strconv.Itoa(n)
		got = id[:min(len(id), maxRuleID-len(suffix))] + suffix
	}
	taken[got] = true
	return got
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// fieldOrder returns the fields of o in the order problems are reported:
// the known ones present, in the given order, then the others. (YAML
// documents reach here as JSON with their fields sorted.)
func fieldOrder(o *jsonObject, known ...string) []string {
	keys := make([]string, 0, len(o.keys))
	for _, k := range known {
		if _, ok := o.vals[k]; ok {
			keys = append(keys, k)
		}
	}
	for _, k := range o.keys {
		if !slices.Contains(known, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// dups reports the fields of o that appear more than once (JSON input;
// YAML's are refused by the YAML parser).
func (c *envoyConverter) dups(path string, o *jsonObject) {
	for _, k := range o.dups {
		c.add(joinPath(path, k), "repeated field")
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (c *envoyConverter) string(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		hint := ""
		if _, num := v.(json.Number); num {
			hint = " (quote it)"
		} else if _, b := v.(bool); b {
			hint = ` (quote it: YAML reads yes, no, on, off, true and false unquoted as booleans)`
		}
		c.add(path, "want a string, got %s%s", describeJSON(v), hint)
	}
	return s, ok
}

func (c *envoyConverter) bool(path string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		c.add(path, "want true or false, got %s", describeJSON(v))
	}
	return b, ok
}

func (c *envoyConverter) int(path string, v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		c.add(path, "want an integer, got %s", describeJSON(v))
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		c.add(path, "want an integer, got %s", n)
		return 0, false
	}
	return int64(f), true
}

// describeJSON names a decoded JSON value for an error message.
func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "a list"
	case *jsonObject:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonObject is a decoded JSON object that keeps the order of its fields
// and the names that appeared more than once.
type jsonObject struct {
	keys []string
	vals map[string]any
	dups []string
}

// readJSON reads one JSON value from dec into *jsonObject, []any, string,
// json.Number, bool and nil.
func readJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &jsonObject{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				o.dups = append(o.dups, k)
				continue
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		l := []any{}
		for dec.More() {
			v, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.Token() // ']'
		return l, err
	}
	return tok, nil
}
