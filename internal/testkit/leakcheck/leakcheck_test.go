package leakcheck

import (
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// parked is a goroutine for the tests to find by name.
func parked(stop <-chan struct{}) { <-stop }

func TestRunningFindsAGoroutine(t *testing.T) {
	stop := make(chan struct{})
	go parked(stop)
	deadline := time.Now().Add(5 * time.Second)
	for len(running([]string{"leakcheck.parked"})) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("running found %d goroutines of leakcheck.parked, want 1", len(running([]string{"leakcheck.parked"})))
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	for len(running([]string{"leakcheck.parked"})) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a stopped goroutine is still reported")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCheckPassesWhenStopped(t *testing.T) {
	stop := make(chan struct{})
	Check(t, "leakcheck.parked")
	go parked(stop)
	t.Cleanup(func() { close(stop) }) // runs before Check's cleanup
}
