package main

import (
	"context"
	"testing"
	"time"
)

func TestPacerWake(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		name       string
		next       int64
		now        time.Time
		wantNext   int64
		wantIssued []int64
	}{
		{"before the first call", 0, start.Add(-time.Millisecond), 0, nil},
		{"the first call is due at start", 0, start, 1, []int64{0}},
		{"a wake-up late by three intervals", 1, start.Add(3*time.Millisecond + 500*time.Microsecond), 4, []int64{1, 2, 3}},
		{"nothing new since the last wake-up", 4, start.Add(3*time.Millisecond + 900*time.Microsecond), 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(start, time.Millisecond, start)
			got, lags := p.wake(context.Background(), tt.next, tt.now, nil)
			if got != tt.wantNext {
				t.Errorf("wake returned %d, want %d", got, tt.wantNext)
			}
			if wantLags := min(1, len(tt.wantIssued)); len(lags) != wantLags {
				t.Errorf("recorded %d lags, want %d (one per wake-up that released calls)", len(lags), wantLags)
			}
			close(p.due)
			var issued []int64
			for k := range p.due {
				issued = append(issued, k)
			}
			if len(issued) != len(tt.wantIssued) {
				t.Fatalf("issued %v, want %v", issued, tt.wantIssued)
			}
			for i := range issued {
				if issued[i] != tt.wantIssued[i] {
					t.Fatalf("issued %v, want %v", issued, tt.wantIssued)
				}
			}
		})
	}
}

func TestPacerScheduled(t *testing.T) {
	start := time.Unix(1000, 0)
	p := newPacer(start, 90*time.Microsecond, start)
	if got, want := p.scheduled(1000), start.Add(90*time.Millisecond); !got.Equal(want) {
		t.Errorf("scheduled(1000) = %v, want %v", got, want)
	}
}

// TestPacerRun paces real time: in 200 ms at one call per millisecond it
// must release calls in order, none before it is due, not many more than
// were due, and close its channel when the context ends. The bounds are
// loose, for a busy machine.
func TestPacerRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	p := newPacer(start, time.Millisecond, start)
	errc := make(chan error, 1)
	go func() {
		_, err := p.run(ctx)
		errc <- err
	}()
	want := int64(0)
	for k := range p.due {
		if k != want {
			t.Fatalf("released call %d, want %d", k, want)
		}
		if early := time.Until(p.scheduled(k)); early > 0 {
			t.Fatalf("call %d released %v before it was due", k, early)
		}
		want++
	}
	elapsed := time.Since(start)
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	if max := int64(elapsed/time.Millisecond) + 1; want < 1 || want > max {
		t.Errorf("released %d calls in %v, want 1 to %d", want, elapsed, max)
	}
}

// A wake-up's lag counts from the first call it released: one that comes
// 1 ms late, at a call every 90 µs, released a dozen calls and lagged by
// 1 ms, not by the 10 µs since the last of them fell due.
func TestPacerWokeLag(t *testing.T) {
	start := time.Unix(1000, 0)
	p := newPacer(start, 90*time.Microsecond, start)
	first := int64(100)
	now := p.scheduled(first).Add(time.Millisecond)
	next, lags := p.wake(context.Background(), first, now, nil)
	if next-first < 11 {
		t.Fatalf("released %d calls, want at least 11", next-first)
	}
	if len(lags) != 1 || lags[0] != time.Millisecond {
		t.Errorf("lags = %v, want [1ms]", lags)
	}
	// A wake-up before lagsFrom (the warm-up) releases calls but records
	// no lag.
	warm := newPacer(start, 90*time.Microsecond, start.Add(time.Hour))
	if _, got := warm.wake(context.Background(), 0, start.Add(time.Millisecond), nil); len(got) != 0 {
		t.Errorf("a wake-up before lagsFrom was recorded: %v", got)
	}
}
