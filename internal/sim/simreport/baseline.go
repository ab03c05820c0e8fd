package simreport

import "time"

// StaticSplit returns what a static equal split would have admitted of
// rt's offered traffic: each of the N DCs enforces floor(L/N) per window
// on its own, exactly (a sliding window of whole seconds), and never
// moves. In second i DC d admits
//
//	min(offered_d[i], floor(L/N) − admitted_d in the w−1 seconds before i)
//
// for a window of w seconds — min(offered_d, floor(L/N)) for a 1 s window.
// Its shares are floor(L/N)/L for every DC, sampled at the start of each
// second. dcs are the DCs (N = len(dcs)).
func StaticSplit(rt RuleTrace, dcs []string) RuleTrace {
	out := RuleTrace{RuleID: rt.RuleID, Limit: rt.Limit, Window: rt.Window, Seconds: make([]Second, len(rt.Seconds))}
	if len(dcs) == 0 {
		return out
	}
	local := int(rt.Limit / int64(len(dcs)))
	share := float64(local) / float64(max(rt.Limit, 1))
	w := windowSeconds(rt)
	for i, s := range rt.Seconds {
		adm := make(map[string]int, len(dcs))
		for _, d := range dcs {
			used := 0
			for j := max(0, i-w+1); j < i; j++ {
				used += out.Seconds[j].Admitted[d]
			}
			adm[d] = min(s.Offered[d], max(local-used, 0))
		}
		out.Seconds[i] = Second{At: s.At, Offered: copyCounts(s.Offered), Admitted: adm}
		sample := ShareSample{At: time.Duration(i) * time.Second, Share: make(map[string]float64, len(dcs))}
		for _, d := range dcs {
			sample.Share[d] = share
		}
		out.Shares = append(out.Shares, sample)
	}
	return out
}

// Centralized returns what one exact, central limiter would have admitted
// of rt's offered traffic: L per window over all DCs together (a sliding
// window of whole seconds), divided among the DCs max-min fairly by what
// they offered. In second i it admits
//
//	min(Σ offered[i], L − Σ admitted in the w−1 seconds before i)
//
// for a window of w seconds — min(Σ offered, L) for a 1 s window — split
// by water-filling in whole requests (leftover requests go one at a time,
// in dcs order, to DCs still wanting). It has no shares.
func Centralized(rt RuleTrace, dcs []string) RuleTrace {
	out := RuleTrace{RuleID: rt.RuleID, Limit: rt.Limit, Window: rt.Window, Seconds: make([]Second, len(rt.Seconds))}
	w := windowSeconds(rt)
	for i, s := range rt.Seconds {
		used := 0
		for j := max(0, i-w+1); j < i; j++ {
			for _, d := range dcs {
				used += out.Seconds[j].Admitted[d]
			}
		}
		offered := 0
		for _, d := range dcs {
			offered += s.Offered[d]
		}
		budget := min(offered, max(int(rt.Limit)-used, 0))
		out.Seconds[i] = Second{At: s.At, Offered: copyCounts(s.Offered), Admitted: fairCounts(dcs, s.Offered, budget)}
	}
	return out
}

// windowSeconds returns rt's window in whole seconds, rounded up, at
// least 1.
func windowSeconds(rt RuleTrace) int {
	return int(max((window(rt)+time.Second-1)/time.Second, 1))
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
