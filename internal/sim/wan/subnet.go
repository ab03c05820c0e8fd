package wan

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// freeSubnet picks 10.X.0.0/16 overlapping no address and no route (but
// a default route) of the root namespace.
func freeSubnet(ctx context.Context) (netip.Prefix, error) {
	var used []netip.Prefix
	out, err := ip(ctx, "-j", "route", "show", "table", "all")
	if err != nil {
		return netip.Prefix{}, err
	}
	var routes []struct {
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return netip.Prefix{}, fmt.Errorf("wan: read routes: %w", err)
	}
	for _, r := range routes {
		if p, ok := parsePrefix(r.Dst); ok && p.Bits() > 0 {
			used = append(used, p)
		}
	}
	out, err = ip(ctx, "-j", "addr", "show")
	if err != nil {
		return netip.Prefix{}, err
	}
	var links []struct {
		Addrs []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return netip.Prefix{}, fmt.Errorf("wan: read addresses: %w", err)
	}
	for _, l := range links {
		for _, a := range l.Addrs {
			if addr, err := netip.ParseAddr(a.Local); err == nil {
				if p, err := addr.Prefix(a.Prefixlen); err == nil {
					used = append(used, p)
				}
			}
		}
	}
	return pickSubnet(used)
}

// pickSubnet returns the first 10.X.0.0/16, X from 200 to 254 then 100 to
// 199, that overlaps none of used.
func pickSubnet(used []netip.Prefix) (netip.Prefix, error) {
	for _, x := range candidates() {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), 0, 0}), 16)
		free := true
		for _, u := range used {
			if u.Addr().Is4() && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("wan: no free 10.X.0.0/16 on this host")
}

func candidates() []int {
	var xs []int
	for x := 200; x <= 254; x++ {
		xs = append(xs, x)
	}
	for x := 100; x < 200; x++ {
		xs = append(xs, x)
	}
	return xs
}

// parsePrefix reads a route destination: a prefix, or a bare address.
func parsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// lockHost serialises Up across processes: between picking a subnet and
// routing it, another Up must not pick the same.
func lockHost() (func(), error) {
	dir := "/run"
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "weir-wan.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wan: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("wan: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
