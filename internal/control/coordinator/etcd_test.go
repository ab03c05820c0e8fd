package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// A policy written to etcd reaches the leader's planner without waiting for
// a planning tick: the interval here is an hour, so only the watch can
// bring it. An invalid policy (a key repeated at any level included) is
// counted and leaves the last valid one in force; a deleted one clears the
// settings.
func TestPoliciesReachThePlannerWithoutATick(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(Config{
		Etcd: h.etcd.Client(t), Layout: h.layout, Name: "c1",
		Planner: planner.Config{DCs: simDCs, Interval: time.Hour},
		Rules:   func() []rule.Rule { return []rule.Rule{simRule()} },
		NewSource: func(context.Context) (Source, error) {
			return usagetopic.NewConsumer(usagetopic.ConsumerConfig{Brokers: []string{h.broker.Addr()}})
		},
		SessionTTL: 1,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(rctx) }()
	defer func() { stop(); <-done }()
	waitFor(t, 5*time.Second, "c1 leads", c.Leader)

	// policyOf returns the planner's settings of DC a, as "pin/floor/drained".
	policyOf := func() string {
		views, ok := c.Shares()
		if !ok || len(views) != 1 {
			return fmt.Sprintf("no view (%v, leading %v)", views, ok)
		}
		for _, d := range views[0].DCs {
			if d.DC == "a" {
				pin := "-"
				if d.Policy.Pin != nil {
					pin = fmt.Sprint(*d.Policy.Pin)
				}
				return fmt.Sprintf("%s/%v/%v", pin, d.Policy.Floor, d.Policy.Drained)
			}
		}
		return "no DC a"
	}
	key := h.layout.Policy("api", "r")
	steps := []struct {
		name    string
		value   string // "" deletes
		want    string
		wantBad uint64
	}{
		{"pin", `{"dcs":{"a":{"pin":0.6}}}`, "0.6/0/false", 0},
		{"floor", `{"dcs":{"a":{"floor":0.2},"c":{"drained":true}}}`, "-/0.2/false", 0},
		{"unknown DC", `{"dcs":{"zz":{"pin":0.5}}}`, "-/0.2/false", 1},
		{"undecodable", `{"dcs":`, "-/0.2/false", 2},
		// A proxy or tool reading the first value would pin 0.9.
		{"repeated key", `{"dcs":{"a":{"pin":0.9,"pin":0.1}}}`, "-/0.2/false", 3},
		{"repeated DC", `{"dcs":{"a":{"drained":true},"a":{"floor":0.3}}}`, "-/0.2/false", 4},
		{"drain", `{"dcs":{"a":{"drained":true}}}`, "-/0/true", 4},
		{"deleted", "", "-/0/false", 4},
	}
	for _, st := range steps {
		if st.value == "" {
			_, err = h.cli.Delete(ctx, key)
		} else {
			_, err = h.cli.Put(ctx, key, st.value)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, st.name+": bad policies counted", func() bool { return c.stats.badPolicies.Load() == st.wantBad })
		waitFor(t, 5*time.Second, st.name+": planner's policy of DC a is "+st.want, func() bool { return policyOf() == st.want })
	}
	if got := c.stats.badPolicies.Load(); got != 4 {
		t.Errorf("bad policies: got %d, want 4", got)
	}
}

// The leader's instance watch follows the records: each DC's
// acknowledgement is the least revision its live instances applied.
func TestInstanceRecordsReachTheLeader(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c1 := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	ack := func(dc string) (int64, map[string]int) {
		c1.c.mu.Lock()
		defer c1.c.mu.Unlock()
		if c1.c.acks == nil {
			return -1, nil
		}
		return c1.c.acks.ack(dc, time.Now()), c1.c.acks.counts()
	}
	steps := []struct {
		name, dc, inst string
		applied        int64
		wantA, wantB   int64
		wantCounts     map[string]int
	}{
		{"a's first instance", "a", "i1", 5, 5, 0, map[string]int{"a": 1}},
		{"a's instance moves on", "a", "i1", 9, 9, 0, map[string]int{"a": 1}},
		{"a's second instance, behind", "a", "i2", 7, 7, 0, map[string]int{"a": 2}},
		{"b's instance", "b", "i1", 3, 7, 3, map[string]int{"a": 2, "b": 1}},
	}
	for _, st := range steps {
		v, err := proto.Marshal(&weirv1.InstanceRecord{Dc: st.dc, Instance: st.inst, AppliedRevision: st.applied})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.cli.Put(ctx, h.layout.Instance(st.dc, st.inst), string(v)); err != nil {
			t.Fatal(err)
		}
		var a, b int64
		var counts map[string]int
		waitFor(t, 5*time.Second, st.name, func() bool {
			a, _ = ack("a")
			b, counts = ack("b")
			return a == st.wantA && b == st.wantB && maps.Equal(counts, st.wantCounts)
		})
	}
}
