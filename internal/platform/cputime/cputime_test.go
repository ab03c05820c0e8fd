package cputime

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		err        string
	}{
		{"plain", "4242 (limiter) S 1 4242 4242 0 -1 4194560 2500 0 0 0 150 37 0 0 20 0 9 0 100 0 0", 1870 * time.Millisecond, ""},
		{"name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 70 * time.Millisecond, ""},
		{"no name", "7 R 1 7", 0, "no command name"},
		{"cut short", "7 (x) R 1 7 7", 0, "fields after the command name"},
		{"not numbers", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a b 0 0", 0, "not tick counts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, %v; want an error about %q", got, err, tt.err)
			case tt.err == "" && (err != nil || got != tt.want):
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestSelfAndProcessAgree: after this process has used at least 100 ms
// of CPU (a bounded loop: at most 10 s of wall time), both readings show
// it, and agree within a few of /proc's 10 ms steps.
func TestSelfAndProcessAgree(t *testing.T) {
	self0, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	self := self0
	for deadline := time.Now().Add(10 * time.Second); self-self0 < 100*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("Self grew by %v in 10 s of busy loop", self-self0)
		}
		for x := range 1_000_000 {
			_ = x * x
		}
		if self, err = Self(); err != nil {
			t.Fatal(err)
		}
	}
	proc, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in ticks of 10 ms, and may lag a tick or two behind
	// (one run measured Self 102 ms, Process 90 ms).
	if proc < 80*time.Millisecond || proc > self+50*time.Millisecond || proc < self-50*time.Millisecond {
		t.Errorf("Self %v, Process %v: want Process past 80 ms (100 less two ticks) and within 50 ms of Self", self, proc)
	}
	if _, err := Process(-1); err == nil {
		t.Error("Process(-1): no error")
	}
}
