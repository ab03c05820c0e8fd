package wan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Close stops the router and removes every namespace, link and route Up
// created. Call it after closing the sockets that use the network and
// stopping the processes started in its namespaces: sockets of this host
// still open to or from the subnet are killed (they would otherwise send
// their last packets along the default route once the core link is
// gone). It is idempotent: later calls return the first call's result.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.err
	}
	n.closed = true
	if n.router != nil {
		n.router.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n.err = remove(ctx, n.prefix, n.sub, append([]string{n.routerNS()}, n.nsNames()...), false)
	if n.err == nil {
		n.log.Info("wan down", "prefix", n.prefix)
	}
	return n.err
}

// remove takes down what Up built for prefix: the root namespace's
// sockets and route to sub (if valid), the core link, the namespaces
// names (kill: after killing the processes in them). Missing pieces are
// not an error.
//
// The order keeps every packet inside: first the route to sub becomes a
// blackhole and the sockets that use sub are killed; only then does the
// core link go, and with it the address 10.X.0.1; sockets that raced are
// killed again before the blackhole goes.
func remove(ctx context.Context, prefix string, sub netip.Prefix, names []string, kill bool) error {
	var errs []error
	cl := coreLink(prefix)
	if sub.IsValid() {
		if linkExists(cl) {
			if _, err := ip(ctx, "route", "replace", "blackhole", sub.String()); err != nil {
				errs = append(errs, err)
			}
		}
		if err := killSockets(ctx, sub); err != nil {
			errs = append(errs, err)
		}
	}
	if linkExists(cl) {
		if _, err := ip(ctx, "link", "del", "dev", cl); err != nil && linkExists(cl) {
			errs = append(errs, err)
		}
	}
	if sub.IsValid() {
		if err := killSockets(ctx, sub); err != nil {
			errs = append(errs, err)
		}
		if out, _ := ip(ctx, "route", "show", "exact", sub.String()); len(out) > 0 {
			if _, err := ip(ctx, "route", "del", "blackhole", sub.String()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range names {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); err != nil {
			continue
		}
		if kill {
			if out, err := ip(ctx, "netns", "pids", ns); err == nil {
				for _, f := range strings.Fields(string(out)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
		if _, err := ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killSockets kills (ss -K) the root namespace's TCP and UDP sockets from
// or to sub, and checks that none is left but in TIME-WAIT, which sends
// nothing unless spoken to.
func killSockets(ctx context.Context, sub netip.Prefix) error {
	filter := []string{"(", "src", sub.String(), "or", "dst", sub.String(), ")"}
	if _, err := ss(ctx, append([]string{"-K", "-H", "-n", "-a", "-t", "-u"}, filter...)...); err != nil {
		return err
	}
	out, err := ss(ctx, append([]string{"-H", "-n", "-a", "-t", "-u"}, filter...)...)
	if err != nil {
		return err
	}
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] == "TIME-WAIT" {
			continue
		}
		left = append(left, strings.Join(f, " "))
	}
	if len(left) > 0 {
		return fmt.Errorf("wan: sockets to %s survive ss -K (kernel without CONFIG_INET_DIAG_DESTROY?): %s", sub, strings.Join(left, "; "))
	}
	return nil
}

// coreSubnet returns the subnet of the core link of prefix, from its
// address, if the link is there.
func coreSubnet(ctx context.Context, prefix string) netip.Prefix {
	if !linkExists(coreLink(prefix)) {
		return netip.Prefix{}
	}
	out, err := ip(ctx, "-j", "addr", "show", "dev", coreLink(prefix))
	if err != nil {
		return netip.Prefix{}
	}
	var links []struct {
		Addrs []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if json.Unmarshal(out, &links) != nil {
		return netip.Prefix{}
	}
	for _, l := range links {
		for _, a := range l.Addrs {
			if addr, err := netip.ParseAddr(a.Local); err == nil && addr.Is4() {
				p, _ := addr.Prefix(16)
				return p
			}
		}
	}
	return netip.Prefix{}
}

// Cleanup removes what a run with this prefix left behind when it could
// not Close (a crash, a kill -9): the sockets and route to its subnet,
// the link <prefix>-core, and every namespace named <prefix>-*, after
// killing the processes in it. Do not call it while such a run is alive.
func Cleanup(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("wan: cleanup: prefix %q: want 1 to 10 of [A-Za-z0-9_]", prefix)
	}
	if err := Supported(); err != nil {
		return err
	}
	names, err := namespaces()
	if err != nil {
		return err
	}
	var ours []string
	for _, name := range names {
		if strings.HasPrefix(name, prefix+"-") {
			ours = append(ours, name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return remove(ctx, prefix, coreSubnet(ctx, prefix), ours, true)
}
