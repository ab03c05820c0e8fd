package wan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Core names the control plane's site: the root network namespace, which
// reaches the DCs through the link <Prefix>-core.
const Core = "core"

// Sentinel errors.
var (
	// ErrUnsupported: this host cannot build the network (see Supported).
	ErrUnsupported = errors.New("wan: not supported here")
	// ErrExists: a namespace or link Up would create is there already,
	// from another run or a crashed one (see Cleanup).
	ErrExists = errors.New("wan: already exists")
	// ErrUnknownSite: a DC name that is not in the network.
	ErrUnknownSite = errors.New("wan: unknown site")
	// ErrClosed: the network has been closed.
	ErrClosed = errors.New("wan: closed")
)

// Pair names two sites: DCs or Core. For delays it is unordered; in
// Stats it is a direction, From to To.
type Pair struct{ From, To string }

// Config describes the network Up builds. The zero value of each field
// but DCs takes the default it documents.
type Config struct {
	// Prefix names what Up creates: the namespaces <Prefix>-wan (the
	// router) and <Prefix>-<dc>, and the link <Prefix>-core. 1 to 10
	// characters of [A-Za-z0-9_]. Default "weir".
	Prefix string
	// DCs names the datacenters, one namespace each; 1 to 250 distinct
	// names of [A-Za-z0-9_.-], neither "core" nor "wan".
	DCs []string
	// Delay is the one-way delay between any two sites. Default 0.
	Delay time.Duration
	// Delays overrides Delay for some pairs of sites, both ways.
	Delays map[Pair]time.Duration
	// QueueLimit bounds the packets waiting in each direction between two
	// sites; more are dropped (and counted). Default 4096.
	QueueLimit int
	// Logger. Default: discard.
	Logger *slog.Logger
}

var (
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,10}$`)
	dcRE     = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = "weir"
	}
	if c.QueueLimit == 0 {
		c.QueueLimit = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports whether c is usable, defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if !prefixRE.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q: want 1 to 10 of [A-Za-z0-9_]", c.Prefix))
	}
	if len(c.DCs) == 0 || len(c.DCs) > 250 {
		errs = append(errs, fmt.Errorf("%d DCs: want 1 to 250", len(c.DCs)))
	}
	seen := map[string]bool{}
	for _, dc := range c.DCs {
		switch {
		case !dcRE.MatchString(dc):
			errs = append(errs, fmt.Errorf("DC %q: want 1 to 64 of [A-Za-z0-9_.-]", dc))
		case dc == Core || dc == "wan":
			errs = append(errs, fmt.Errorf("DC %q: the name is reserved", dc))
		case seen[dc]:
			errs = append(errs, fmt.Errorf("DC %q twice", dc))
		}
		seen[dc] = true
	}
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("delay %v is negative", c.Delay))
	}
	for p, d := range c.Delays {
		if (!seen[p.From] && p.From != Core) || (!seen[p.To] && p.To != Core) {
			errs = append(errs, fmt.Errorf("delay %s/%s: %w", p.From, p.To, ErrUnknownSite))
		}
		if d < 0 {
			errs = append(errs, fmt.Errorf("delay %s/%s: %v is negative", p.From, p.To, d))
		}
	}
	if c.QueueLimit < 0 {
		errs = append(errs, fmt.Errorf("queue limit %d is negative", c.QueueLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wan: invalid config: %w", err)
	}
	return nil
}

// Net is an emulated WAN: a router namespace that delays packets between
// the DCs' namespaces and the core (the root namespace). Its methods are
// safe for concurrent use. Close removes it.
//
// Addressing, with X chosen so that 10.X.0.0/16 is unused on this host:
// the core end of the link <Prefix>-core is 10.X.0.1 (the router end
// 10.X.0.254), DC i (1-based, in Config order) is 10.X.i.2 behind the
// router's 10.X.i.1. The root namespace gets one route, 10.X.0.0/16 via
// the router; the namespaces have no other way out.
type Net struct {
	prefix string
	sub    netip.Prefix
	dcs    []string       // site i+1
	index  map[string]int // site of each DC name, and Core: 0
	router *router
	log    *slog.Logger
	// delay and delays are Config's, for Delay.
	delay  time.Duration
	delays map[Pair]time.Duration

	mu     sync.Mutex
	closed bool
	err    error
}

// Supported returns nil when this process can build a Net, else an error
// (wrapping ErrUnsupported) that says what is missing.
func Supported() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces, veth and TUN devices need CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		missing = append(missing, "/dev/net/tun")
	}
	for _, cmd := range []string{"ip", "ss"} {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, "the "+cmd+" command (iproute2)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrUnsupported, strings.Join(missing, ", "))
	}
	return nil
}

// Up builds the network: namespaces, links, addresses, routes, the TUN
// device and its delaying router. On failure it removes whatever it had
// created. ctx bounds the building only; the network lasts until Close.
// Processes started in its namespaces must be stopped before Close.
func Up(ctx context.Context, cfg Config) (n *Net, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Supported(); err != nil {
		return nil, err
	}
	unlock, err := lockHost()
	if err != nil {
		return nil, err
	}
	defer unlock()
	names, err := namespaces()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if strings.HasPrefix(name, cfg.Prefix+"-") {
			return nil, fmt.Errorf("%w: namespace %s (remove leftovers with wan.Cleanup(%q))", ErrExists, name, cfg.Prefix)
		}
	}
	if linkExists(coreLink(cfg.Prefix)) {
		return nil, fmt.Errorf("%w: link %s (remove leftovers with wan.Cleanup(%q))", ErrExists, coreLink(cfg.Prefix), cfg.Prefix)
	}
	sub, err := freeSubnet(ctx)
	if err != nil {
		return nil, err
	}
	built := &Net{
		prefix: cfg.Prefix, sub: sub, dcs: append([]string(nil), cfg.DCs...),
		index: map[string]int{Core: 0}, log: cfg.Logger,
		delay: cfg.Delay, delays: maps.Clone(cfg.Delays),
	}
	for i, dc := range cfg.DCs {
		built.index[dc] = i + 1
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, built.Close())
		}
	}()
	n = built
	if err := n.build(ctx); err != nil {
		return nil, err
	}
	if err := n.verify(ctx); err != nil {
		return nil, err
	}
	tun, err := openTUN(n.routerNS(), tunName)
	if err != nil {
		return nil, err
	}
	n.router = newRouter(tun, sub, len(n.dcs)+1, cfg.QueueLimit, cfg.Logger)
	sites := append([]string{Core}, n.dcs...)
	for i := range sites {
		for j := range sites {
			n.router.setDelay(i, j, cfg.Delay)
		}
	}
	for p, d := range cfg.Delays {
		n.router.setDelay(n.index[p.From], n.index[p.To], d)
	}
	n.router.start()
	// The device exists now; route into it.
	r := n.routerNS()
	steps := [][]string{
		{"-n", r, "link", "set", "dev", tunName, "mtu", "1500", "up"},
		{"-n", r, "route", "add", "default", "dev", tunName, "table", routeTable},
	}
	for _, s := range steps {
		if _, err := ip(ctx, s...); err != nil {
			return nil, err
		}
	}
	if err := writeSysctl(r, "net/ipv4/conf/"+tunName+"/rp_filter", "0"); err != nil {
		return nil, err
	}
	cfg.Logger.Info("wan up", "prefix", n.prefix, "subnet", sub, "dcs", n.dcs)
	return n, nil
}

const (
	tunName    = "tun0"
	coreName   = "core" // the router's end of the core link
	routeTable = "100"
)

func coreLink(prefix string) string { return prefix + "-core" }

// routerLink is the router's end of DC site i's link.
func routerLink(site int) string { return "dc" + strconv.Itoa(site) }

func (n *Net) routerNS() string { return n.prefix + "-wan" }

func (n *Net) dcNS(site int) string { return n.prefix + "-" + n.dcs[site-1] }

// addr returns 10.X.site.host.
func (n *Net) addr(site, host int) netip.Addr {
	b := n.sub.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], byte(site), byte(host)})
}

func (n *Net) cidr(site, host int) string { return n.addr(site, host).String() + "/24" }

// build creates the namespaces, links, addresses and routes.
func (n *Net) build(ctx context.Context) error {
	r := n.routerNS()
	var steps [][]string
	steps = append(steps, []string{"netns", "add", r})
	for i := range n.dcs {
		steps = append(steps, []string{"netns", "add", n.dcNS(i + 1)})
	}
	if err := run(ctx, steps); err != nil {
		return err
	}
	// Before any link exists, so that every link inherits the defaults:
	// no IPv6 (nothing to route), no reverse-path filter in the router
	// (packets from the TUN device come from addresses it does not route
	// to), forwarding in the router only.
	all := append([]string{r}, n.nsNames()...)
	for _, ns := range all {
		for _, kv := range [][2]string{
			{"net/ipv6/conf/default/disable_ipv6", "1"}, {"net/ipv6/conf/all/disable_ipv6", "1"},
			{"net/ipv4/conf/default/rp_filter", "0"}, {"net/ipv4/conf/all/rp_filter", "0"},
		} {
			if err := writeSysctl(ns, kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	if err := writeSysctl(r, "net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	steps = [][]string{{"-n", r, "link", "set", "dev", "lo", "up"}}
	for i := range n.dcs {
		site, ns, rl := i+1, n.dcNS(i+1), routerLink(i+1)
		steps = append(steps,
			[]string{"-n", ns, "link", "set", "dev", "lo", "up"},
			[]string{"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", rl, "netns", r},
			[]string{"-n", ns, "addr", "add", n.cidr(site, 2), "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "dev", "eth0", "up"},
			[]string{"-n", ns, "route", "add", "default", "via", n.addr(site, 1).String(), "dev", "eth0"},
			[]string{"-n", r, "addr", "add", n.cidr(site, 1), "dev", rl},
			[]string{"-n", r, "link", "set", "dev", rl, "up"},
			// While the link is down (a partition) its packets vanish
			// instead of drawing ICMP errors.
			[]string{"-n", r, "route", "add", "blackhole", n.subnet(site), "metric", "4096"},
			[]string{"-n", r, "rule", "add", "iif", rl, "lookup", routeTable, "pref", "100"},
		)
	}
	cl := coreLink(n.prefix)
	steps = append(steps,
		[]string{"link", "add", cl, "type", "veth", "peer", "name", coreName, "netns", r},
		[]string{"addr", "add", n.cidr(0, 1), "dev", cl},
		[]string{"link", "set", "dev", cl, "up"},
		[]string{"-n", r, "addr", "add", n.cidr(0, 254), "dev", coreName},
		[]string{"-n", r, "link", "set", "dev", coreName, "up"},
		[]string{"-n", r, "rule", "add", "iif", coreName, "lookup", routeTable, "pref", "100"},
		[]string{"route", "add", n.sub.String(), "via", n.addr(0, 254).String(), "dev", cl},
	)
	if err := run(ctx, steps); err != nil {
		return err
	}
	return nil
}

func (n *Net) subnet(site int) string { return n.addr(site, 0).String() + "/24" }

func (n *Net) nsNames() []string {
	names := make([]string, len(n.dcs))
	for i := range n.dcs {
		names[i] = n.dcNS(i + 1)
	}
	return names
}

func run(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if _, err := ip(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// verify checks, before any packet is sent, that the root namespace
// routes every DC address and the router through the core link, and that
// each DC namespace routes the core through the router.
func (n *Net) verify(ctx context.Context) error {
	cl := coreLink(n.prefix)
	check := func(ns string, dst, via netip.Addr, dev string) error {
		args := []string{"-j", "route", "get", dst.String()}
		if ns != "" {
			args = append([]string{"-n", ns}, args...)
		}
		out, err := ip(ctx, args...)
		if err != nil {
			return err
		}
		var routes []struct {
			Dev     string `json:"dev"`
			Gateway string `json:"gateway"`
		}
		if err := json.Unmarshal(out, &routes); err != nil || len(routes) != 1 {
			return fmt.Errorf("wan: route to %s: cannot read %q", dst, out)
		}
		got := routes[0]
		if got.Dev != dev || (via.IsValid() && got.Gateway != via.String()) {
			return fmt.Errorf("wan: route to %s goes via %q dev %s, want via %s dev %s: refusing to send", dst, got.Gateway, got.Dev, via, dev)
		}
		return nil
	}
	if err := check("", n.addr(0, 254), netip.Addr{}, cl); err != nil {
		return err
	}
	for i := range n.dcs {
		site := i + 1
		if err := check("", n.addr(site, 2), n.addr(0, 254), cl); err != nil {
			return err
		}
		if err := check(n.dcNS(site), n.addr(0, 1), n.addr(site, 1), "eth0"); err != nil {
			return err
		}
	}
	return nil
}

// site returns the site index of dc (Core is 0).
func (n *Net) site(dc string) (int, error) {
	i, ok := n.index[dc]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownSite, dc)
	}
	return i, nil
}

// Addr returns the address of DC dc (CoreAddr for Core), or the zero Addr
// for an unknown DC.
func (n *Net) Addr(dc string) netip.Addr {
	i, err := n.site(dc)
	if err != nil {
		return netip.Addr{}
	}
	if i == 0 {
		return n.CoreAddr()
	}
	return n.addr(i, 2)
}

// CoreAddr is the root namespace's address on the core link: where the
// control plane listens for the DCs.
func (n *Net) CoreAddr() netip.Addr { return n.addr(0, 1) }

// Namespace returns the name of DC dc's network namespace ("" for an
// unknown DC or Core, which is the root namespace).
func (n *Net) Namespace(dc string) string {
	i, err := n.site(dc)
	if err != nil || i == 0 {
		return ""
	}
	return n.dcNS(i)
}

// DCs returns the DCs' names, in Config order.
func (n *Net) DCs() []string { return append([]string(nil), n.dcs...) }

// SetDelay sets the one-way delay between sites a and b (DCs or Core),
// both ways. Packets already waiting keep theirs; a shorter delay does
// not reorder a direction's packets.
func (n *Net) SetDelay(a, b string, d time.Duration) error {
	i, err := n.site(a)
	if err != nil {
		return err
	}
	j, err := n.site(b)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("wan: delay %v is negative", d)
	}
	n.router.setDelay(i, j, d)
	return nil
}

// Partition cuts DC dc off from every other site (cut true) by taking
// the router's end of its link down, or heals it (cut false). Packets
// in flight to or from it are lost; its connections stall and resume
// after healing unless they time out first.
func (n *Net) Partition(dc string, cut bool) error {
	i, err := n.site(dc)
	if err != nil {
		return err
	}
	if i == 0 {
		return fmt.Errorf("wan: partition: cut a DC, not %s", Core)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	state := "up"
	if cut {
		state = "down"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ip(ctx, "-n", n.routerNS(), "link", "set", "dev", routerLink(i), state); err != nil {
		return err
	}
	n.log.Info("wan partition", "dc", dc, "cut", cut)
	return nil
}

// Command returns a command that runs name inside DC dc's namespace
// (through `ip netns exec`); ctx kills it as exec.CommandContext does.
// For an unknown DC the command fails when started.
func (n *Net) Command(ctx context.Context, dc, name string, args ...string) *exec.Cmd {
	ns := n.Namespace(dc)
	if ns == "" {
		ns = "unknown-dc-" + dc
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// DialContext returns a dialer whose sockets belong to DC dc's namespace
// (the root namespace for Core), for grpc.WithContextDialer and the like.
// Addresses must be IP literals with a port: name resolution could open
// sockets on other threads.
func (n *Net) DialContext(dc string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ns, err := n.socketNS(dc, addr)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		if ns == "" {
			return d.DialContext(ctx, network, addr)
		}
		var c net.Conn
		err = inNS(ns, func() (err error) {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Listen listens on addr (an IP literal and a port) inside DC dc's
// namespace (the root namespace for Core). Connections it accepts belong
// to that namespace too.
func (n *Net) Listen(dc, network, addr string) (net.Listener, error) {
	ns, err := n.socketNS(dc, addr)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		return net.Listen(network, addr)
	}
	var l net.Listener
	err = inNS(ns, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

func (n *Net) socketNS(dc, addr string) (string, error) {
	i, err := n.site(dc)
	if err != nil {
		return "", err
	}
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return "", fmt.Errorf("wan: address %q: want an IP literal and a port: %w", addr, err)
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return "", ErrClosed
	}
	if i == 0 {
		return "", nil
	}
	return n.dcNS(i), nil
}

// PathStats counts one direction's packets.
type PathStats struct {
	// Forwarded packets left the router after their delay.
	Forwarded uint64
	// Dropped packets found the direction's queue full, or could not be
	// written back.
	Dropped uint64
}

// Stats is a snapshot of the router's counters.
type Stats struct {
	// Paths has an entry for every direction that has seen a packet.
	Paths map[Pair]PathStats
	// Other counts packets dropped for not being IPv4 between two sites.
	Other uint64
}

// Stats returns the router's counters.
func (n *Net) Stats() Stats {
	s := Stats{Paths: map[Pair]PathStats{}}
	if n.router == nil {
		return s
	}
	sites := append([]string{Core}, n.dcs...)
	for i, from := range sites {
		for j, to := range sites {
			p := i*len(sites) + j
			ps := PathStats{Forwarded: n.router.fwd[p].Load(), Dropped: n.router.drop[p].Load()}
			if ps != (PathStats{}) {
				s.Paths[Pair{From: from, To: to}] = ps
			}
		}
	}
	s.Other = n.router.other.Load()
	return s
}

// RTT measures the round trip from DC from to DC to: it serves a one-byte
// echo in to's namespace, dials it from from's, and returns the median of
// rounds one-byte round trips (rounds < 1 means 1). It ends when ctx does.
func (n *Net) RTT(ctx context.Context, from, to string, rounds int) (time.Duration, error) {
	ln, err := n.Listen(to, "tcp", net.JoinHostPort(n.Addr(to).String(), "0"))
	if err != nil {
		return 0, fmt.Errorf("wan: rtt %s→%s: %w", from, to, err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := n.DialContext(from)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return 0, fmt.Errorf("wan: rtt %s→%s: %w", from, to, err)
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	rtts := make([]time.Duration, 0, max(rounds, 1))
	b := []byte{0}
	for range max(rounds, 1) {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, fmt.Errorf("wan: rtt %s→%s: %w", from, to, err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, fmt.Errorf("wan: rtt %s→%s: %w", from, to, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
}

// Delay returns the one-way delay configured between DCs a and b (either
// way): Config.Delays' for the pair, else Config.Delay; SetDelay's later
// changes are not reflected.
func (n *Net) Delay(a, b string) time.Duration {
	if d, ok := n.delays[Pair{From: a, To: b}]; ok {
		return d
	}
	if d, ok := n.delays[Pair{From: b, To: a}]; ok {
		return d
	}
	return n.delay
}
