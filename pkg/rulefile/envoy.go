package rulefile

import (
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

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/fielderr"
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
// Every field of envoyproxy/ratelimit's schema is accepted. As Weir rules
// (for weir.v1 and /v1/check), a wildcard value counts every value of its
// key, a key repeated on a path keeps the outer value, replaces,
// quota_mode and share_threshold have no effect, detailed_metric,
// value_to_metric and metadata are ignored, and a requests_per_unit of 0
// or above algorithm.MaxLimit gives no rule; ParseEnvoyConfig returns the
// descriptor tree by which Weir's Envoy API applies all of them as
// envoyproxy/ratelimit does, a limit's metadata (an object, read as the
// peer reads it) with it. docs/envoy.md and docs/rules.md describe both.
//
// Errors are those of Parse for malformed documents; any other problem
// gives a *rule.ValidationError listing every problem with the path of
// the descriptor, e.g. descriptors[0].descriptors[1].rate_limit.unit.
func ParseEnvoy(data []byte) (rule.Set, error) {
	tree, err := parse(data)
	if err != nil {
		return rule.Set{}, err
	}
	return decodeEnvoy(tree)
}

// isEnvoy reports whether tree looks like a configuration of
// envoyproxy/ratelimit: an object with descriptors and no rules, or one
// with a domain alone (a domain without limits, which
// envoyproxy/ratelimit loads).
func isEnvoy(tree *document.Node) bool {
	if tree.Kind != document.Object {
		return false
	}
	_, descriptors := tree.Get("descriptors")
	_, rules := tree.Get("rules")
	_, domain := tree.Get("domain")
	return descriptors && !rules || domain && len(tree.Fields) == 1
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

// envoyUnitNames are envoyUnits' names, shortest window first.
var envoyUnitNames = []string{"second", "minute", "hour", "day", "week", "month", "year"}

const (
	maxEnvoyDepth  = 64 // descriptors nested deeper are refused
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
	quota    bool
	share    bool // share_threshold
	metadata *structpb.Struct
	children []*envoyNode
}

// anyValue reports whether n's Weir rule counts every value of its key:
// no value, or one with a wildcard (weir.v1 has no wildcard conditions).
func (n *envoyNode) anyValue() bool { return n.value == "" || strings.Contains(n.value, "*") }

// envoyLimit is a descriptor's rate_limit.
type envoyLimit struct {
	perUnit   int64
	window    int64 // seconds
	unlimited bool
	name      string
	replaces  []string
}

// envoyConverter collects the problems of one configuration. Each part of
// the format is decoded by one method, which reads its object's fields
// through package document, so that a field the format gains is one more
// line in that method.
type envoyConverter struct {
	rep rule.Report
	// ignored are the paths of fields envoyproxy/ratelimit knows but
	// that mean nothing where they are, inner objects' first.
	ignored []string
}

// envoyFieldNames are the field names envoyproxy/ratelimit's reader
// knows. It checks a name against all of them wherever it appears, and
// ignores one out of its place (shadow_mode in a rate_limit, unit in a
// descriptor).
var envoyFieldNames = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true, "metadata": true,
}

// done ends the reading of o as envoyproxy/ratelimit would: the fields it
// knows but that mean nothing in o are ignored (and listed in ignored),
// any other field not read is refused as unknown.
func (c *envoyConverter) done(o *document.Obj) {
	for _, k := range o.Unasked() {
		if envoyFieldNames[k] {
			o.Ignore(k)
			c.ignored = append(c.ignored, o.FieldPath(k))
		}
	}
	o.Done()
}

// decodeEnvoy converts a parsed configuration, as ParseEnvoy.
func decodeEnvoy(tree *document.Node) (rule.Set, error) {
	e, err := decodeEnvoyConfig(tree)
	return e.Rules, err
}

// Envoy is a configuration of envoyproxy/ratelimit read by
// ParseEnvoyConfig: the same domain as envoyproxy/ratelimit's lookup
// walks it, for Weir's Envoy API, and as Weir rules, for its own APIs.
type Envoy struct {
	Rules rule.Set
	// Tree is the configuration as envoyproxy/ratelimit reads it; each
	// limit names the rule converted from it (Limit.RuleID), if any.
	Tree *envoyconf.Domain
	// Ignored are the paths of the fields that envoyproxy/ratelimit
	// knows but that mean nothing where the file puts them (shadow_mode
	// in a rate_limit): it ignores them, and so does Weir, which a
	// loader should say.
	Ignored []string
	// SharedNames, for a merge (MergeEnvoy), are the rate_limit.names
	// given in more than one of its files, whose rules' ids are made
	// unique in file order; empty otherwise.
	SharedNames []string
	// nodes are the checked top descriptors, which MergeEnvoy merges;
	// never changed once read.
	nodes []*envoyNode
}

// ParseEnvoyConfig reads a configuration of envoyproxy/ratelimit as
// ParseEnvoy does, and returns with its rules the descriptor tree that
// Weir's Envoy API looks limits up in.
func ParseEnvoyConfig(data []byte) (Envoy, error) {
	tree, err := parse(data)
	if err != nil {
		return Envoy{}, err
	}
	return decodeEnvoyConfig(tree)
}

func decodeEnvoyConfig(tree *document.Node) (Envoy, error) {
	var c envoyConverter
	domain, nodes := c.root(tree)
	if c.check(nodes); c.rep.Len() > 0 {
		return Envoy{}, c.rep.Err()
	}
	e, err := c.build(domain, nodes, func(n *envoyNode) string { return n.path })
	e.Ignored = c.ignored
	return e, err
}

// build converts checked descriptors of domain into rules and the tree
// the rules' ids are named in. A problem that validation finds in a
// converted rule is reported at origin(n), n the descriptor it came
// from.
func (c *envoyConverter) build(domain string, nodes []*envoyNode, origin func(*envoyNode) string) (Envoy, error) {
	s, from := convertEnvoy(domain, nodes)
	if err := s.Validate(); err != nil {
		ve, ok := errors.AsType[*rule.ValidationError](err)
		if !ok {
			return Envoy{}, err
		}
		for _, fe := range ve.Errors {
			c.addRuleError(fe, s.Rules, from, origin)
		}
		c.rep.Omit(ve.Omitted)
		return Envoy{}, c.rep.Err()
	}
	ids := make(map[*envoyNode]string, len(from))
	for i, n := range from {
		ids[n] = s.Rules[i].ID
	}
	d := &envoyconf.Domain{Name: domain}
	buildTree(&d.Root, nodes, ids)
	return Envoy{Rules: s, Tree: d, nodes: nodes}, nil
}

// buildTree adds nodes below parent, their limits naming the rules
// converted from them.
func buildTree(parent *envoyconf.Node, nodes []*envoyNode, ids map[*envoyNode]string) {
	for _, n := range nodes {
		var l *envoyconf.Limit
		if n.limit != nil {
			l = &envoyconf.Limit{
				Unlimited: n.limit.unlimited, ShadowMode: n.shadow, QuotaMode: n.quota,
				Name: n.limit.name, Replaces: n.limit.replaces, RuleID: ids[n],
				Metadata: n.metadata,
			}
			if !n.limit.unlimited {
				l.RequestsPerUnit = uint32(n.limit.perUnit)
				l.Unit = unitOf(n.limit.window)
			}
		}
		child, ok := parent.Add(n.key, n.value, l, n.share)
		if ok { // check refused duplicates
			buildTree(child, n.children, ids)
		}
	}
}

func unitOf(seconds int64) envoyconf.Unit {
	for u := envoyconf.Second; u <= envoyconf.Week; u++ {
		if u.Seconds() == seconds {
			return u
		}
	}
	return 0
}

// addRuleError reports a problem that validation found in a converted
// rule at origin(from[i]), the descriptor rules[i] came from.
func (c *envoyConverter) addRuleError(fe rule.FieldError, rules []rule.Rule, from []*envoyNode, origin func(*envoyNode) string) {
	var i int
	if _, err := fmt.Sscanf(fe.Path, "rules[%d]", &i); err != nil || i < 0 || i >= len(rules) {
		c.rep.Fail(fe.Path, "%s", fe.Reason)
		return
	}
	field := strings.TrimPrefix(fe.Path[strings.IndexByte(fe.Path, ']')+1:], ".")
	c.rep.Fail(origin(from[i]), "as Weir rule %q: %s: %s", rules[i].ID, field, fe.Reason)
}

// root decodes the top of the document.
func (c *envoyConverter) root(v *document.Node) (domain string, nodes []*envoyNode) {
	o := document.OpenAs(&c.rep, "", v, "an object with domain and descriptors")
	if o == nil {
		return "", nil
	}
	if dv, ok := o.Lookup("domain"); !ok {
		c.rep.Fail("domain", "required")
	} else if s, ok := c.scalar("domain", dv); ok {
		if s == "" {
			c.rep.Fail("domain", "required")
		}
		domain = s
	}
	if dv, ok := o.Get("descriptors"); ok {
		nodes = c.descriptors("descriptors", dv, 1)
	}
	c.done(o)
	return domain, nodes
}

// descriptors decodes the list of descriptors at path, at the given depth.
func (c *envoyConverter) descriptors(path string, v *document.Node, depth int) []*envoyNode {
	if v.Kind != document.List {
		document.Mismatch(&c.rep, path, "a list of descriptors", v)
		return nil
	}
	if depth > maxEnvoyDepth {
		c.rep.Fail(path, "descriptors nested more than %d deep", maxEnvoyDepth)
		return nil
	}
	var nodes []*envoyNode
	for i, e := range v.Items {
		if n := c.descriptor(fielderr.Index(path, i), e, depth); n != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// descriptor decodes one descriptor, or reports why it cannot.
func (c *envoyConverter) descriptor(path string, v *document.Node, depth int) *envoyNode {
	o := document.OpenAs(&c.rep, path, v, "a descriptor (an object with a key)")
	if o == nil {
		return nil
	}
	n := &envoyNode{path: path}
	if kv, ok := o.Lookup("key"); !ok {
		c.rep.Fail(o.FieldPath("key"), "required")
	} else if s, ok := c.scalar(o.FieldPath("key"), kv); ok {
		if s == "" {
			c.rep.Fail(o.FieldPath("key"), "empty")
		}
		n.key = s
	}
	if vv, ok := o.Get("value"); ok { // null: no value, as in envoyproxy/ratelimit
		n.value, _ = c.scalar(o.FieldPath("value"), vv)
	}
	if lv, ok := o.Get("rate_limit"); ok { // null: no rate limit
		n.limit = c.rateLimit(o.FieldPath("rate_limit"), lv)
	}
	if dv, ok := o.Get("descriptors"); ok {
		n.children = c.descriptors(o.FieldPath("descriptors"), dv, depth+1)
	}
	n.shadow, _ = c.bool(o, "shadow_mode")
	n.quota, _ = c.bool(o, "quota_mode")
	n.share, _ = c.bool(o, "share_threshold")
	if n.share && !strings.Contains(n.value, "*") && !strings.Contains(n.key, "*") {
		c.rep.Fail(o.FieldPath("share_threshold"), "only for a wildcard value (one holding '*'), as in envoyproxy/ratelimit")
	}
	// Statistics only: accepted, nothing to convert.
	c.bool(o, "detailed_metric")
	c.bool(o, "value_to_metric")
	if mv, ok := o.Get("metadata"); ok {
		n.metadata = c.metadata(o.FieldPath("metadata"), mv)
	}
	c.done(o)
	return n
}

// metadata converts a descriptor's metadata at path, an object, into what
// the Envoy API's answers carry in their dynamic metadata, as
// envoyproxy/ratelimit converts it (structpb.NewStruct of what its YAML
// reader makes of it); nil after reporting that it is not an object,
// which the peer refuses too.
func (c *envoyConverter) metadata(path string, v *document.Node) *structpb.Struct {
	if v.Kind != document.Object {
		document.Mismatch(&c.rep, path, "an object", v)
		return nil
	}
	return metadataStruct(v)
}

// metadataStruct converts an object of a descriptor's metadata: a
// repeated key keeps its last value, as the peer's YAML reader keeps it.
func metadataStruct(v *document.Node) *structpb.Struct {
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(v.Fields))}
	for _, fs := range [][]document.Field{v.Fields, v.Repeats} {
		for _, f := range fs {
			out.Fields[f.Key] = metadataValue(f.Value)
		}
	}
	return out
}

// metadataValue converts one value of a descriptor's metadata; numbers
// are kept whatever they are (.inf, .nan), as the peer keeps them.
func metadataValue(v *document.Node) *structpb.Value {
	switch v.Kind {
	case document.Bool:
		return structpb.NewBoolValue(v.Text == "true")
	case document.Number:
		return structpb.NewNumberValue(document.NumberValue(v))
	case document.String:
		return structpb.NewStringValue(v.Text)
	case document.List:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(v.Items))}
		for i, it := range v.Items {
			l.Values[i] = metadataValue(it)
		}
		return structpb.NewListValue(l)
	case document.Object:
		return structpb.NewStructValue(metadataStruct(v))
	}
	return structpb.NewNullValue()
}

// scalar reads a domain, key or value: a string, or a number or boolean
// as written ("yes", "0x1F", "017", not true, 31, 15), which
// envoyproxy/ratelimit's YAML reader also takes as text.
func (c *envoyConverter) scalar(path string, v *document.Node) (string, bool) {
	switch {
	case v.Kind != document.Number && v.Kind != document.Bool:
		return document.AsString(&c.rep, path, v)
	case v.Written != "":
		return v.Written, true
	}
	return v.Text, true
}

// stringField reads a text field of o as scalar does, "" when absent.
func (c *envoyConverter) stringField(o *document.Obj, name string) (string, bool) {
	if v, ok := o.Get(name); ok {
		return c.scalar(o.FieldPath(name), v)
	}
	return "", false
}

// bool reads a boolean field of o that may be absent but not null.
func (c *envoyConverter) bool(o *document.Obj, name string) (bool, bool) {
	if v, ok := o.Lookup(name); ok {
		return document.AsBool(&c.rep, o.FieldPath(name), v)
	}
	return false, false
}

// rateLimit decodes a descriptor's rate_limit at path.
func (c *envoyConverter) rateLimit(path string, v *document.Node) *envoyLimit {
	o := document.OpenAs(&c.rep, path, v, "an object with unit and requests_per_unit")
	if o == nil {
		return nil
	}
	l := &envoyLimit{}
	unitOK, perUnitOK := true, true
	uv, hasUnit := o.Lookup("unit")
	if hasUnit {
		var unit string
		if unit, unitOK = document.AsString(&c.rep, o.FieldPath("unit"), uv); unitOK {
			w, known := envoyUnits[strings.ToLower(unit)]
			if !known {
				document.NotOneOf(&c.rep, o.FieldPath("unit"), unit, envoyUnitNames...)
				unitOK = false
			}
			l.window = w
		}
	}
	pv, hasPerUnit := o.Lookup("requests_per_unit")
	if hasPerUnit {
		l.perUnit, perUnitOK = document.AsInt(&c.rep, o.FieldPath("requests_per_unit"), pv)
	}
	l.unlimited, _ = c.bool(o, "unlimited")
	l.name, _ = c.stringField(o, "name")
	if items, path, ok := o.List("replaces"); ok {
		for i, it := range items {
			ip := fielderr.Index(path, i)
			ro := document.OpenAs(&c.rep, ip, it, "an object with a name")
			if ro == nil {
				continue
			}
			name, _ := c.stringField(ro, "name")
			c.done(ro)
			switch {
			case name == "":
				c.rep.Fail(ro.FieldPath("name"), "required: a replaces entry names the limit it replaces")
			case name == l.name:
				c.rep.Fail(ro.FieldPath("name"), "%q is this limit's own name; a limit cannot replace itself", name)
			default:
				l.replaces = append(l.replaces, name)
			}
		}
	}
	c.done(o)
	switch {
	case l.unlimited && hasUnit && unitOK:
		c.rep.Fail(o.FieldPath("unit"), "must be absent when unlimited is true")
	case l.unlimited:
		// requests_per_unit means nothing; envoyproxy/ratelimit ignores it.
	case !hasUnit:
		c.rep.Fail(o.FieldPath("unit"), "required (want %s)", document.OrList(envoyUnitNames))
	}
	switch {
	case l.unlimited || !perUnitOK:
	case l.perUnit < 0 || l.perUnit > math.MaxUint32:
		c.rep.Fail(o.FieldPath("requests_per_unit"), "%d is out of range [0, %d]", l.perUnit, uint32(math.MaxUint32))
	}
	return l
}

// check reports descriptors that repeat a sibling's key and value, as
// envoyproxy/ratelimit refuses them.
func (c *envoyConverter) check(nodes []*envoyNode) {
	seen := map[string]*envoyNode{}
	for _, n := range nodes {
		if n.key == "" {
			continue // reported
		}
		name := n.key
		if n.value != "" {
			name += "_" + n.value
		}
		if first, dup := seen[name]; dup {
			c.rep.Fail(n.path, "repeats %s (key %q, value %q)", first.path, n.key, n.value)
		} else {
			seen[name] = n
		}
		c.check(n.children)
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
// the descriptor each rule comes from. A limit of 0 requests, or of more
// than Weir's rules take, has no Weir rule: only the Envoy API applies
// it.
func convertEnvoy(domain string, nodes []*envoyNode) (rule.Set, []*envoyNode) {
	s := rule.Set{Domain: domain, Rules: []rule.Rule{}}
	var from []*envoyNode
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
			_, outer := q.conds[n.key]
			switch {
			case outer || slices.Contains(q.dims, n.key):
				// The key of an enclosing descriptor too: a Weir request
				// has one value per attribute, so the rule keeps the
				// outer one.
				q.names = append(q.names, n.key)
				q.desc = append(q.desc, n.key)
			case n.anyValue():
				q.dims = append(q.dims, n.key)
				for _, v := range specific[n.key] {
					q.excluded = append(q.excluded, [2]string{n.key, v})
				}
				q.names = append(q.names, n.key)
				q.desc = append(q.desc, n.key)
			default:
				if q.conds == nil {
					q.conds = map[string]string{}
				}
				q.conds[n.key] = n.value
				q.names = append(q.names, n.key+"_"+n.value)
				q.desc = append(q.desc, n.key+"="+n.value)
			}
			if l := n.limit; l != nil && (l.unlimited || l.perUnit >= 1 && l.perUnit <= algorithm.MaxLimit) {
				s.Rules = append(s.Rules, envoyRule(domain, n, q))
				from = append(from, n)
				named = append(named, n.limit.name != "")
			}
			walk(n.children, q)
		}
	}
	walk(nodes, envoyPath{})
	assignIDs(s.Rules, named)
	return s, from
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

// ParseConfig reads a rule file as Parse does and, when it is a
// configuration of envoyproxy/ratelimit, returns its descriptor tree too
// (Tree is nil for a Weir rule file).
func ParseConfig(data []byte) (Envoy, error) {
	tree, err := parse(data)
	if err != nil {
		return Envoy{}, err
	}
	if isEnvoy(tree) {
		return decodeEnvoyConfig(tree)
	}
	s, err := rule.DecodeSet(tree)
	return Envoy{Rules: s}, err
}
