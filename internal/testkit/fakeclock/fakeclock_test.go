package fakeclock_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
)

func TestClock(t *testing.T) {
	c := fakeclock.New(time.Time{})
	if got := c.Now(); !got.Equal(fakeclock.Start) {
		t.Fatalf("New(zero).Now() = %v, want %v", got, fakeclock.Start)
	}
	now := c.After(0)
	soon := c.After(time.Second)
	later := c.After(time.Minute)
	select {
	case got := <-now:
		if !got.Equal(fakeclock.Start) {
			t.Errorf("After(0) sent %v, want %v", got, fakeclock.Start)
		}
	default:
		t.Fatal("After(0) did not fire at once")
	}
	if got := c.Pending(); got != 2 {
		t.Fatalf("Pending() = %d, want 2", got)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-soon:
		t.Fatal("a 1s timer fired after 999ms")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case got := <-soon:
		if want := fakeclock.Start.Add(time.Second); !got.Equal(want) {
			t.Errorf("1s timer sent %v, want %v", got, want)
		}
	default:
		t.Fatal("a 1s timer did not fire at 1s")
	}
	c.Set(fakeclock.Start.Add(time.Hour))
	select {
	case <-later:
	default:
		t.Fatal("Set past a timer did not fire it")
	}
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending() = %d after every timer fired, want 0", got)
	}
}

func TestWaitForTimers(t *testing.T) {
	c := fakeclock.New(time.Time{})
	done := make(chan time.Time)
	go func() { done <- <-c.After(time.Second) }()
	c.WaitForTimers(t, 1)
	c.Advance(time.Second)
	if got, want := <-done, fakeclock.Start.Add(time.Second); !got.Equal(want) {
		t.Errorf("waiter got %v, want %v", got, want)
	}
}

func TestOnNow(t *testing.T) {
	c := fakeclock.New(time.Time{})
	calls := 0
	c.OnNow(func() { calls++; c.Advance(time.Second) })
	first := c.Now()
	if calls != 1 || !first.Equal(fakeclock.Start) {
		t.Fatalf("Now() = %v after %d hook calls, want %v after 1", first, calls, fakeclock.Start)
	}
	c.OnNow(nil)
	if got, want := c.Now(), fakeclock.Start.Add(time.Second); !got.Equal(want) || calls != 1 {
		t.Errorf("Now() = %v after %d hook calls, want %v after 1", got, calls, want)
	}
}
