package backoff

import (
	"context"
	"testing"
	"time"
)

func TestGrowsWithJitterUpToMax(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	ceil := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, c := range ceil {
		c *= time.Millisecond
		if got := b.Next(); got < c/2 || got > c {
			t.Fatalf("wait %d = %v, want in [%v, %v]", i, got, c/2, c)
		}
	}
	b.Reset()
	if got := b.Next(); got > 100*time.Millisecond {
		t.Fatalf("after Reset: %v", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep waited past a done context")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep did not wait")
	}
}
