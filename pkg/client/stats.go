package client

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats is a snapshot of a client's counters since New.
type Stats struct {
	// Checks counts Check calls, Items the items they asked about.
	Checks, Items uint64
	// RPCs counts weir.v1 Check RPCs sent; with batching, fewer than
	// Checks. RPCErrors counts those that failed.
	RPCs, RPCErrors uint64
	// Fallbacks counts the Checks the failure policy answered, by action.
	Fallbacks map[Action]uint64
}

// counters are a client's live counters.
type counters struct {
	checks, items, rpcs, rpcErrors atomic.Uint64
	fallbacks                      [Fail + 1]atomic.Uint64
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	s := Stats{
		Checks: c.stats.checks.Load(), Items: c.stats.items.Load(),
		RPCs: c.stats.rpcs.Load(), RPCErrors: c.stats.rpcErrors.Load(),
		Fallbacks: make(map[Action]uint64, len(c.stats.fallbacks)),
	}
	for a := range c.stats.fallbacks {
		s.Fallbacks[Action(a)] = c.stats.fallbacks[a].Load()
	}
	return s
}

// Collector returns a Prometheus collector of the client's counters, for
// the caller to register in its own registry; constLabels (may be nil)
// tell the clients of one process apart. The metrics:
//
//	weir_client_checks_total             Check calls
//	weir_client_items_total              items checked
//	weir_client_rpcs_total               weir.v1 Check RPCs sent
//	weir_client_rpc_errors_total         RPCs that failed
//	weir_client_fallbacks_total{action}  Checks the failure policy answered
func (c *Client) Collector(constLabels prometheus.Labels) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("weir_client_"+name, help, labels, constLabels)
	}
	return &collector{
		c:         c,
		checks:    d("checks_total", "Check calls."),
		items:     d("items_total", "Items checked."),
		rpcs:      d("rpcs_total", "weir.v1 Check RPCs sent."),
		rpcErrors: d("rpc_errors_total", "weir.v1 Check RPCs that failed."),
		fallbacks: d("fallbacks_total", "Checks answered by the failure policy, by action.", "action"),
	}
}

type collector struct {
	c                                         *Client
	checks, items, rpcs, rpcErrors, fallbacks *prometheus.Desc
}

func (co *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{co.checks, co.items, co.rpcs, co.rpcErrors, co.fallbacks} {
		ch <- d
	}
}

func (co *collector) Collect(ch chan<- prometheus.Metric) {
	s := co.c.Stats()
	ch <- prometheus.MustNewConstMetric(co.checks, prometheus.CounterValue, float64(s.Checks))
	ch <- prometheus.MustNewConstMetric(co.items, prometheus.CounterValue, float64(s.Items))
	ch <- prometheus.MustNewConstMetric(co.rpcs, prometheus.CounterValue, float64(s.RPCs))
	ch <- prometheus.MustNewConstMetric(co.rpcErrors, prometheus.CounterValue, float64(s.RPCErrors))
	for a := Allow; a <= Fail; a++ {
		ch <- prometheus.MustNewConstMetric(co.fallbacks, prometheus.CounterValue, float64(s.Fallbacks[a]), a.String())
	}
}
