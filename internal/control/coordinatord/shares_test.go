package coordinatord

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestSharesAdmitted reads the shares API's admitted — what a DC admitted
// over the statistics' period (60 intervals), as a fraction of the limit
// per window — while DC a reports 5 admissions every interval of 100 ms,
// for two rules in the same reports: 600 per minute (50/s is 5 limits a
// minute) and a calendar month's quota, read against the month at hand
// (not 31 days), as its demand is. DC b, silent, admitted nothing.
func TestSharesAdmitted(t *testing.T) {
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, usagetopic.Name)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	minute := rule.Rule{Domain: "api", ID: "minute", Limit: 600, WindowSeconds: 60, Scope: rule.ScopeGlobal}
	month := rule.Rule{Domain: "api", ID: "month", Limit: 1_000_000_000, Algorithm: algorithm.FixedWindow, Calendar: "month", Scope: rule.ScopeGlobal}
	putRule(ctx, t, cli, minute)
	putRule(ctx, t, cli, month)
	tokens := tokenFile(t, "ro viewer")
	const interval = 100 * time.Millisecond
	adminAddr := start(t, Config{
		Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b"},
		AdminAddr: "127.0.0.1:0", AdminTokenFile: tokens, Name: "c1", Interval: interval,
	})

	pub, err := usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: []string{broker.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	reporting, stop := context.WithCancel(ctx)
	defer stop()
	published := make(chan error, 1)
	go func() {
		defer close(published)
		// One report for every interval, none skipped: a report late under
		// load still counts in its own interval.
		iv := interval.Milliseconds()
		seq, next := uint64(0), time.Now().UnixMilli()/iv-1
		for reporting.Err() == nil {
			ended := time.Now().UnixMilli()/iv - 1 // the last interval that ended
			var msgs []usagetopic.Message
			for ; next <= ended; next++ {
				seq++
				r := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: seq, IntervalStartMs: next * iv, IntervalMs: iv}
				for _, id := range []string{minute.ID, month.ID} {
					r.Rules = append(r.Rules, &weirv1.RuleUsage{Domain: "api", RuleId: id, Offered: 5, Admitted: 5})
				}
				b, err := proto.Marshal(r)
				if err != nil {
					published <- err
					return
				}
				msgs = append(msgs, usagetopic.Message{Key: []byte("a-1"), Value: b})
			}
			if len(msgs) == 0 {
				time.Sleep(interval / 5)
				continue
			}
			if err := pub.Publish(reporting, msgs); err != nil && reporting.Err() == nil {
				published <- err
				return
			}
			time.Sleep(time.Until(time.UnixMilli((ended+2)*iv + iv/5)))
		}
	}()

	admin, err := adminclient.New("http://"+adminAddr, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin = admin.WithDomain("api")
	admitted := func(id string) map[string]float64 {
		sh, err := admin.Shares(ctx, id)
		if err != nil {
			return nil // not led yet, or no plan of the rule yet
		}
		out := map[string]float64{}
		for _, d := range sh.DCs {
			out[d.DC] = d.Admitted
		}
		return out
	}
	// 60 intervals of 5 admissions in 6 s: 300 in a tenth of a minute,
	// 5 limits a minute. The period fills in 6 s.
	var got map[string]float64
	wait.For(t, 30*time.Second, "DC a's admitted reaching 5 limits a minute", func() bool {
		got = admitted(minute.ID)
		return math.Abs(got["a"]-5) < 0.01
	})
	if got["b"] != 0 {
		t.Errorf("DC b admitted %v of the minute's limit, want 0", got["b"])
	}
	// The same 300 in 6 s against a month's quota (the reports of both
	// rules are the same): admitted × 6 s / the month's length × L.
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days := first.AddDate(0, 1, 0).Sub(first).Seconds()
	want := 300 / (6 / days) / 1e9
	var m map[string]float64
	if !wait.Until(30*time.Second, func() bool {
		m = admitted(month.ID)
		return math.Abs(m["a"]-want) <= want*0.01
	}) {
		if time.Now().UTC().Month() != now.Month() {
			t.Skip("a month ended during the check: the planner may have read either month")
		}
		t.Errorf("DC a admitted %v of the month's quota, want %v (a %v-day month; 31 days would give %v)", m["a"], want, days/86400, 300/(6/(31*86400.0))/1e9)
	}
	stop()
	if err := <-published; err != nil {
		t.Fatalf("publishing: %v", err)
	}
}
