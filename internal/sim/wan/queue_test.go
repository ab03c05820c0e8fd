package wan

import (
	"net/netip"
	"testing"
	"time"
)

// ipv4 returns a minimal IPv4 header from src to dst.
func ipv4(src, dst string) []byte {
	p := make([]byte, 20)
	p[0] = 0x45
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	return p
}

func TestClassify(t *testing.T) {
	sub := netip.MustParsePrefix("10.200.0.0/16")
	ipv6 := make([]byte, 40)
	ipv6[0] = 0x60
	badIHL := ipv4("10.200.1.2", "10.200.0.1")
	badIHL[0] = 0x44
	tests := []struct {
		name     string
		pkt      []byte
		from, to int
		ok       bool
	}{
		{"core to dc 1", ipv4("10.200.0.1", "10.200.1.2"), 0, 1, true},
		{"dc 2 to core", ipv4("10.200.2.2", "10.200.0.1"), 2, 0, true},
		{"dc 1 to dc 3", ipv4("10.200.1.2", "10.200.3.2"), 1, 3, true},
		{"site beyond the DCs", ipv4("10.200.4.2", "10.200.0.1"), 0, 0, false},
		{"source outside the subnet", ipv4("192.0.2.2", "10.200.1.2"), 0, 0, false},
		{"destination outside the subnet", ipv4("10.200.1.2", "8.8.8.8"), 0, 0, false},
		{"IPv6", ipv6, 0, 0, false},
		{"truncated", ipv4("10.200.1.2", "10.200.0.1")[:19], 0, 0, false},
		{"header length below 20", badIHL, 0, 0, false},
		{"empty", nil, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to, ok := classify(tt.pkt, sub, 4)
			if from != tt.from || to != tt.to || ok != tt.ok {
				t.Errorf("got (%d, %d, %v), want (%d, %d, %v)", from, to, ok, tt.from, tt.to, tt.ok)
			}
		})
	}
}

func TestDelayLine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	type push struct {
		at    time.Duration // after t0
		path  int
		delay time.Duration
		id    byte
		ok    bool
	}
	tests := []struct {
		name   string
		limit  int
		pushes []push
		popAt  time.Duration
		want   []byte // ids popped at popAt, in order
		rest   int    // still queued after
	}{
		{
			name:   "nothing due yet",
			limit:  10,
			pushes: []push{{0, 0, ms(25), 1, true}},
			popAt:  ms(24), want: nil, rest: 1,
		},
		{
			name:   "due exactly at its delay",
			limit:  10,
			pushes: []push{{0, 0, ms(25), 1, true}},
			popAt:  ms(25), want: []byte{1}, rest: 0,
		},
		{
			name:  "paths interleave by due time",
			limit: 10,
			pushes: []push{
				{0, 0, ms(30), 1, true},
				{0, 1, ms(10), 2, true},
				{ms(5), 2, ms(10), 3, true},
			},
			popAt: ms(30), want: []byte{2, 3, 1}, rest: 0,
		},
		{
			name:  "a shorter delay does not overtake its path",
			limit: 10,
			pushes: []push{
				{0, 0, ms(50), 1, true},
				{ms(1), 0, ms(5), 2, true},
				{ms(1), 1, ms(5), 3, true},
			},
			popAt: ms(49), want: []byte{3}, rest: 2,
		},
		{
			name:  "same due time leaves in arrival order",
			limit: 10,
			pushes: []push{
				{0, 0, ms(10), 1, true},
				{0, 1, ms(10), 2, true},
				{0, 0, ms(10), 3, true},
			},
			popAt: ms(10), want: []byte{1, 2, 3}, rest: 0,
		},
		{
			name:  "a full path drops, others do not",
			limit: 2,
			pushes: []push{
				{0, 0, ms(10), 1, true},
				{0, 0, ms(10), 2, true},
				{0, 0, ms(10), 3, false},
				{0, 1, ms(10), 4, true},
			},
			popAt: ms(10), want: []byte{1, 2, 4}, rest: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newDelayLine(4, tt.limit)
			for _, p := range tt.pushes {
				if got := q.push(t0.Add(p.at), p.path, p.delay, []byte{p.id}); got != p.ok {
					t.Fatalf("push %d: got %v, want %v", p.id, got, p.ok)
				}
			}
			var got []byte
			for {
				p, ok := q.pop(t0.Add(tt.popAt))
				if !ok {
					break
				}
				got = append(got, p.data[0])
			}
			if string(got) != string(tt.want) {
				t.Errorf("popped %v, want %v", got, tt.want)
			}
			if q.len() != tt.rest {
				t.Errorf("%d still queued, want %d", q.len(), tt.rest)
			}
		})
	}
}

func TestDelayLineRefillsAfterPop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newDelayLine(1, 1)
	if !q.push(t0, 0, 0, []byte{1}) {
		t.Fatal("first push refused")
	}
	if q.push(t0, 0, 0, []byte{2}) {
		t.Fatal("push over the limit accepted")
	}
	if _, ok := q.pop(t0); !ok {
		t.Fatal("nothing to pop")
	}
	if !q.push(t0, 0, 0, []byte{3}) {
		t.Error("push after pop refused")
	}
	if due, ok := q.next(); !ok || !due.Equal(t0) {
		t.Errorf("next: got %v %v, want %v true", due, ok, t0)
	}
}

func TestPickSubnet(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		used []netip.Prefix
		want string
	}{
		{"nothing used", nil, "10.200.0.0/16"},
		{"first taken by an address", []netip.Prefix{pfx("10.200.3.4/24")}, "10.201.0.0/16"},
		{"a wider route covers several", []netip.Prefix{pfx("10.200.0.0/15"), pfx("10.202.9.0/24")}, "10.203.0.0/16"},
		{"IPv6 ignored", []netip.Prefix{pfx("fd00::/8")}, "10.200.0.0/16"},
		{"10/8 leaves none", []netip.Prefix{pfx("10.0.0.0/8")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickSubnet(tt.used)
			if tt.want == "" {
				if err == nil {
					t.Errorf("got %v, want an error", got)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}
