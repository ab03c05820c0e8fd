// Package etcdlayout names the keys Weir keeps in etcd, so that the
// coordinator that writes them and the limiters that read them agree
// (docs/architecture.md lists them):
//
//	{prefix}quotas/{dc}/{domain}/{rule_id}   weirv1.RuleAssignment
//	{prefix}quotas/{dc}/_lease               weirv1.AssignmentLease
//	{prefix}instances/{dc}/{instance}        weirv1.InstanceRecord, under an etcd lease
//	{prefix}policies/{domain}/{rule_id}      operator settings of a rule's shares (JSON, package sharepolicy)
//	{prefix}rules/{domain}/{rule_id}         a rule (JSON, package rule), written by the admin API
//	{prefix}rules-valid/{domain}/{rule_id}   the rule's last valid document, its shadow (package rulestore)
//	{prefix}audit/{id}                       one audit record (JSON), id sortable by time
//	{prefix}coordinator/election/            the coordinators' election
//
// DC names, domains and rule ids cannot hold '/' (package rule checks
// them), so no escaping is needed; the parsers refuse keys that do not have
// the expected shape rather than guess.
package etcdlayout

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultPrefix is the prefix of every key unless configured otherwise.
const DefaultPrefix = "/weir/"

// LeaseName is the last component of a DC's assignment lease key; it starts
// with '_', which no domain may.
const LeaseName = "_lease"

// ErrKey marks a key that does not have the shape its prefix promises.
var ErrKey = errors.New("etcdlayout: malformed key")

// Layout derives keys from a prefix. The zero Layout uses DefaultPrefix.
type Layout struct {
	// Prefix starts every key; it should end with '/'.
	Prefix string
}

func (l Layout) p() string {
	if l.Prefix == "" {
		return DefaultPrefix
	}
	return l.Prefix
}

// Quotas is the prefix of every DC's assignments.
func (l Layout) Quotas() string { return l.p() + "quotas/" }

// DCQuotas is the prefix of dc's assignments and lease.
func (l Layout) DCQuotas(dc string) string { return l.Quotas() + dc + "/" }

// Assignment is the key of dc's assignment of a rule.
func (l Layout) Assignment(dc, domain, ruleID string) string {
	return l.DCQuotas(dc) + domain + "/" + ruleID
}

// Lease is the key of dc's assignment lease.
func (l Layout) Lease(dc string) string { return l.DCQuotas(dc) + LeaseName }

// Instances is the prefix of every live limiter instance.
func (l Layout) Instances() string { return l.p() + "instances/" }

// Instance is the key of one limiter instance.
func (l Layout) Instance(dc, instance string) string { return l.Instances() + dc + "/" + instance }

// Policies is the prefix of every rule's share settings.
func (l Layout) Policies() string { return l.p() + "policies/" }

// Policy is the key of one rule's share settings.
func (l Layout) Policy(domain, ruleID string) string { return l.Policies() + domain + "/" + ruleID }

// Rules is the prefix of every rule kept in etcd.
func (l Layout) Rules() string { return l.p() + "rules/" }

// Rule is the key of one rule.
func (l Layout) Rule(domain, ruleID string) string { return l.Rules() + domain + "/" + ruleID }

// ParseRule parses a key under Rules.
func (l Layout) ParseRule(key string) (domain, ruleID string, err error) {
	return parsePair(key, l.Rules())
}

// ValidRules is the prefix of the rules' shadows: the last valid document
// of each rule, kept so that a process started while a rule's document is
// corrupt still finds the version in force (package rulestore).
func (l Layout) ValidRules() string { return l.p() + "rules-valid/" }

// ValidRule is the key of one rule's shadow.
func (l Layout) ValidRule(domain, ruleID string) string {
	return l.ValidRules() + domain + "/" + ruleID
}

// ParseValidRule parses a key under ValidRules.
func (l Layout) ParseValidRule(key string) (domain, ruleID string, err error) {
	return parsePair(key, l.ValidRules())
}

// RuleDocs is the prefix common to Rules and ValidRules and to no other
// key: a reader that lists and watches it sees a rule and its shadow,
// written in one transaction, arrive together.
func (l Layout) RuleDocs() string { return l.p() + "rules" }

// parsePair parses prefix{a}/{b}.
func parsePair(key, prefix string) (a, b string, err error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if ok {
		a, b, ok = strings.Cut(rest, "/")
	}
	if !ok || a == "" || b == "" || strings.Contains(b, "/") {
		return "", "", fmt.Errorf("%w: %q: want %s{domain}/{rule_id}", ErrKey, key, prefix)
	}
	return a, b, nil
}

// Audit is the prefix of the audit records; Audit()+id is one record.
func (l Layout) Audit() string { return l.p() + "audit/" }

// Election is the prefix of the coordinators' election.
func (l Layout) Election() string { return l.p() + "coordinator/election/" }

// QuotaKey is a parsed key under Quotas: a rule's assignment, or a lease
// (Lease true, Domain and RuleID empty).
type QuotaKey struct {
	DC, Domain, RuleID string
	Lease              bool
}

// ParseQuota parses a key under Quotas.
func (l Layout) ParseQuota(key string) (QuotaKey, error) {
	rest, ok := strings.CutPrefix(key, l.Quotas())
	if !ok {
		return QuotaKey{}, fmt.Errorf("%w: %q is not under %q", ErrKey, key, l.Quotas())
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[1] == LeaseName && parts[0] != "":
		return QuotaKey{DC: parts[0], Lease: true}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return QuotaKey{DC: parts[0], Domain: parts[1], RuleID: parts[2]}, nil
	}
	return QuotaKey{}, fmt.Errorf("%w: %q: want %s{dc}/{domain}/{rule_id} or %s{dc}/%s", ErrKey, key, l.Quotas(), l.Quotas(), LeaseName)
}

// ParseInstance parses a key under Instances.
func (l Layout) ParseInstance(key string) (dc, instance string, err error) {
	rest, ok := strings.CutPrefix(key, l.Instances())
	if ok {
		dc, instance, ok = strings.Cut(rest, "/")
	}
	if !ok || dc == "" || instance == "" || strings.Contains(instance, "/") {
		return "", "", fmt.Errorf("%w: %q: want %s{dc}/{instance}", ErrKey, key, l.Instances())
	}
	return dc, instance, nil
}

// ParsePolicy parses a key under Policies.
func (l Layout) ParsePolicy(key string) (domain, ruleID string, err error) {
	return parsePair(key, l.Policies())
}
