package wait_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/wait"
)

func TestFor(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	wait.For(t, 5*time.Second, "three steps", func() bool { return n.Load() == 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("For returned with n = %d, want 3", got)
	}
}

func TestUntil(t *testing.T) {
	if wait.Until(20*time.Millisecond, func() bool { return false }) {
		t.Error("Until(false) = true, want false")
	}
	if !wait.Until(time.Second, func() bool { return true }) {
		t.Error("Until(true) = false, want true")
	}
}
