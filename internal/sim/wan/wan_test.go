package wan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/leakcheck"
)

// up builds a Net with a prefix of its own, or skips the test when this
// host cannot.
func up(t *testing.T, cfg Config) *Net {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if err := Supported(); err != nil {
		t.Skipf("WAN emulation not possible here: %v", err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	cfg.Prefix = "wt" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// echo serves an echo on l until t ends, when it closes l and every
// connection it accepted and waits for their goroutines: a peer in a
// namespace already torn down never sends the FIN that would end them.
func echo(t *testing.T, l net.Listener) {
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
		wg     sync.WaitGroup
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); _, _ = io.Copy(c, c) })
		}
	})
}

// rtt dials addr from dc and returns the median of rounds one-byte round
// trips.
func rtt(t *testing.T, n *Net, dc, addr string, rounds int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := n.DialContext(dc)(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, dc, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var rtts []time.Duration
	b := []byte{0}
	for range rounds {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatalf("write: %v", err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("read: %v", err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

func TestNet(t *testing.T) {
	n := up(t, Config{
		DCs:    []string{"a", "b"},
		Delay:  10 * time.Millisecond,
		Delays: map[Pair]time.Duration{{From: "b", To: "a"}: 25 * time.Millisecond},
	})
	prefix := n.prefix

	la, err := n.Listen("a", "tcp", n.Addr("a").String()+":0")
	if err != nil {
		t.Fatalf("listen in a: %v", err)
	}
	echo(t, la)
	lc, err := net.Listen("tcp", n.CoreAddr().String()+":0")
	if err != nil {
		t.Fatalf("listen on the core address: %v", err)
	}
	echo(t, lc)

	t.Run("DC to DC", func(t *testing.T) {
		got := rtt(t, n, "b", la.Addr().String(), 10)
		t.Logf("b→a median RTT %v", got)
		if got < 50*time.Millisecond || got >= 200*time.Millisecond {
			t.Errorf("RTT %v, want 50ms..200ms", got)
		}
	})
	t.Run("RTT and Delay", func(t *testing.T) {
		if d := n.Delay("a", "b"); d != 25*time.Millisecond {
			t.Errorf("Delay(a, b): got %v, want the pair's 25ms", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := n.RTT(ctx, "a", "b", 5)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a→b median RTT %v", got)
		if got < 50*time.Millisecond || got >= 200*time.Millisecond {
			t.Errorf("RTT(a, b): got %v, want 50ms..200ms", got)
		}
	})
	t.Run("DC to core", func(t *testing.T) {
		got := rtt(t, n, "a", lc.Addr().String(), 10)
		t.Logf("a→core median RTT %v", got)
		if got < 20*time.Millisecond || got >= 150*time.Millisecond {
			t.Errorf("RTT %v, want 20ms..150ms", got)
		}
	})
	t.Run("SetDelay", func(t *testing.T) {
		if err := n.SetDelay("a", "b", 2*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		got := rtt(t, n, "b", la.Addr().String(), 10)
		t.Logf("b→a median RTT at 2ms one-way: %v", got)
		if got < 4*time.Millisecond || got >= 40*time.Millisecond {
			t.Errorf("RTT %v, want 4ms..40ms", got)
		}
		if err := n.SetDelay("a", "nowhere", 0); !errors.Is(err, ErrUnknownSite) {
			t.Errorf("SetDelay to an unknown DC: got %v, want ErrUnknownSite", err)
		}
	})
	t.Run("Partition", func(t *testing.T) {
		dial := func(dc, addr string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			c, err := n.DialContext(dc)(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			return err
		}
		if err := n.Partition("a", true); err != nil {
			t.Fatal(err)
		}
		if err := dial("a", lc.Addr().String()); err == nil {
			t.Error("a reached the core while cut off")
		}
		if err := dial("b", la.Addr().String()); err == nil {
			t.Error("b reached a while a was cut off")
		}
		if err := dial("b", lc.Addr().String()); err != nil {
			t.Errorf("b could not reach the core while a was cut off: %v", err)
		}
		if err := n.Partition("a", false); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			err := dial("a", lc.Addr().String())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a cannot reach the core after healing: %v", err)
			}
		}
	})
	t.Run("Stats", func(t *testing.T) {
		s := n.Stats()
		for _, p := range []Pair{{"a", "b"}, {"b", "a"}, {"a", Core}, {Core, "a"}} {
			if s.Paths[p].Forwarded == 0 {
				t.Errorf("%s→%s: nothing forwarded (stats %+v)", p.From, p.To, s)
			}
		}
	})
	t.Run("Command", func(t *testing.T) {
		out, err := n.Command(context.Background(), "b", "ip", "-br", "addr", "show", "eth0").Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), n.Addr("b").String()+"/24") {
			t.Errorf("got %q, want %s on eth0", out, n.Addr("b"))
		}
	})

	la.Close()
	lc.Close()
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), prefix+"-") {
		t.Errorf("namespaces left after Close:\n%s", out)
	}
	if linkExists(coreLink(prefix)) {
		t.Errorf("link %s left after Close", coreLink(prefix))
	}
	if _, err := n.DialContext("a")(context.Background(), "tcp", "10.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("dial after Close: got %v, want ErrClosed", err)
	}
	// The router's goroutines are gone (the echo servers' may take a moment).
	leakcheck.Gone(t, "wan.(*router)", "wan.inNS")
}

func TestCleanup(t *testing.T) {
	n := up(t, Config{DCs: []string{"x"}})
	prefix := n.prefix
	// As after a crash: the namespaces and link are there, the process is not.
	n.router.stop()
	cmd := n.Command(context.Background(), "x", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Up(ctx, Config{Prefix: prefix, DCs: []string{"y"}}); !errors.Is(err, ErrExists) {
		t.Errorf("Up over leftovers: got %v, want ErrExists", err)
	}
	if err := Cleanup(prefix); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the process inside the namespace survived Cleanup")
	}
	names, _ := namespaces()
	for _, name := range names {
		if strings.HasPrefix(name, prefix+"-") {
			t.Errorf("namespace %s left", name)
		}
	}
	if linkExists(coreLink(prefix)) {
		t.Errorf("link %s left", coreLink(prefix))
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{DCs: []string{"us-east", "eu-west"}}, true},
		{"no DCs", Config{}, false},
		{"reserved name", Config{DCs: []string{"core"}}, false},
		{"twice", Config{DCs: []string{"a", "a"}}, false},
		{"bad DC name", Config{DCs: []string{"a/b"}}, false},
		{"long prefix", Config{Prefix: "abcdefghijk", DCs: []string{"a"}}, false},
		{"prefix with a dash", Config{Prefix: "we-ir", DCs: []string{"a"}}, false},
		{"negative delay", Config{DCs: []string{"a"}, Delay: -time.Second}, false},
		{"delay to the core", Config{DCs: []string{"a"}, Delays: map[Pair]time.Duration{{"a", Core}: time.Millisecond}}, true},
		{"delay to an unknown DC", Config{DCs: []string{"a"}, Delays: map[Pair]time.Duration{{"a", "b"}: time.Millisecond}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// The addresses a Net hands out are in its subnet and distinct.
func TestAddresses(t *testing.T) {
	n := &Net{sub: netip.MustParsePrefix("10.201.0.0/16"), dcs: []string{"a", "b"}, index: map[string]int{Core: 0, "a": 1, "b": 2}, prefix: "weir"}
	tests := []struct{ dc, addr, ns string }{
		{"a", "10.201.1.2", "weir-a"},
		{"b", "10.201.2.2", "weir-b"},
		{Core, "10.201.0.1", ""},
		{"nowhere", "invalid IP", ""},
	}
	for _, tt := range tests {
		if got := n.Addr(tt.dc).String(); got != tt.addr {
			t.Errorf("Addr(%s): got %s, want %s", tt.dc, got, tt.addr)
		}
		if got := n.Namespace(tt.dc); got != tt.ns {
			t.Errorf("Namespace(%s): got %q, want %q", tt.dc, got, tt.ns)
		}
	}
}
