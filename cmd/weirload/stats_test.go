package main

import (
	"strings"
	"testing"
)

func TestSumCommands(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hmget:calls=10,usec=5\r\ncmdstat_info:calls=7,usec=70\r\ncmdstat_pexpire:calls=3,usec=1\r\n"
	if got, want := sumCommands(info), int64(23); got != want {
		t.Errorf("got %d commands, want %d", got, want)
	}
}

func TestCountDecisions(t *testing.T) {
	text := `# HELP weir_decisions_total Rule decisions
# TYPE weir_decisions_total counter
weir_decisions_total{domain="bench",result="allowed",rule="under",source="store"} 1000
weir_decisions_total{domain="bench",result="allowed",rule="under",source="failure_local"} 3
weir_decisions_total{domain="bench",result="rejected",rule="over",source="failure_closed"} 2
weir_decisions_total{domain="bench",result="rejected",rule="over",source="cache"} 1.5e+06
weir_check_duration_seconds_count 12
`
	failed, all := countDecisions(strings.NewReader(text))
	if failed != 5 || all != 1_501_005 {
		t.Errorf("got %d failed of %d, want 5 of 1501005", failed, all)
	}
}

func TestEnvoyRequest(t *testing.T) {
	req, keys := envoyRequest(config{batch: 2, domain: "bench", keyAttr: "user_id"}, map[string]string{"bench": "under", "a": "b"})
	keys[0].Value, keys[1].Value = "k1", "k2"
	if req.GetDomain() != "bench" || len(req.GetDescriptors()) != 2 {
		t.Fatalf("got domain %q and %d descriptors, want bench and 2", req.GetDomain(), len(req.GetDescriptors()))
	}
	for i, d := range req.GetDescriptors() {
		var got []string
		for _, e := range d.GetEntries() {
			got = append(got, e.GetKey()+"="+e.GetValue())
		}
		want := "a=b bench=under user_id=k" + string(rune('1'+i))
		if strings.Join(got, " ") != want {
			t.Errorf("descriptor %d: got %q, want %q", i, strings.Join(got, " "), want)
		}
	}
}
