package simreport

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// FormatLive writes one second of a run as a compact table for a live
// display: a line per DC with its offered, admitted and rejected requests
// and its share (as a percentage of L; "-" when unknown), then a line for
// all DCs together with the admitted requests against the limit:
//
//	DC    offered/s  admitted/s  rejected/s   share
//	dc-a        612         240         372   80.0%
//	dc-b         30          30           0   10.0%
//	all         642         270         372   90.0%  admitted 270 of L 300 (90.0%)
//
// DCs are those named in second or shares, in name order. limit is the
// rule's L. Write errors are ignored: the display is best effort.
func FormatLive(w io.Writer, second Second, shares map[string]float64, limit int64) {
	seen := map[string]bool{}
	var dcs []string
	for _, m := range []map[string]int{second.Offered, second.Admitted} {
		for d := range m {
			if !seen[d] {
				seen[d], dcs = true, append(dcs, d)
			}
		}
	}
	for d := range shares {
		if !seen[d] {
			seen[d], dcs = true, append(dcs, d)
		}
	}
	sort.Strings(dcs)
	width := len("all")
	for _, d := range dcs {
		width = max(width, len(d))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %9s  %10s  %10s  %6s\n", width, "DC", "offered/s", "admitted/s", "rejected/s", "share")
	var off, adm int
	var total float64
	known := false
	for _, d := range dcs {
		o, a := second.Offered[d], second.Admitted[d]
		off += o
		adm += a
		share := "-"
		if v, ok := shares[d]; ok {
			share = fmt.Sprintf("%.1f%%", v*100)
			total += v
			known = true
		}
		fmt.Fprintf(&b, "%-*s  %9d  %10d  %10d  %6s\n", width, d, o, a, max(o-a, 0), share)
	}
	share := "-"
	if known {
		share = fmt.Sprintf("%.1f%%", total*100)
	}
	fmt.Fprintf(&b, "%-*s  %9d  %10d  %10d  %6s  admitted %d of L %d", width, "all", off, adm, max(off-adm, 0), share, adm, limit)
	if limit > 0 {
		fmt.Fprintf(&b, " (%.1f%%)", float64(adm)/float64(limit)*100)
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(w, b.String())
}
