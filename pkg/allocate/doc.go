// Package allocate divides one global limit among datacenters (SPEC §4): it
// turns each DC's estimated demand, and the operator's floors, ceilings, pins
// and drains, into shares — fractions of the global limit L that the DCs then
// enforce locally as share × L.
//
// Allocate computes the shares of one entry (a global rule, or one key of a
// rule under pressure). The order of precedence is:
//
//  1. a drained DC gets 0;
//  2. a pinned DC gets exactly its pin (pins summing above 1 are scaled
//     down in proportion, and Result.PinsScaled says so);
//  3. every other DC is guaranteed its floor, whatever its demand (floors
//     summing above what the pins leave are scaled down in proportion, and
//     Result.FloorsScaled says so); a floor above the DC's ceiling is cut to
//     the ceiling;
//  4. the capacity left is water-filled max-min fair by demand: shares rise
//     together to a water level λ, each DC stopping at its demand (or its
//     ceiling), so no DC gets more than its demand while another with unmet
//     demand gets less than it: each share is clamp(λ, floor, cap), with cap
//     = max(floor, min(demand, ceiling)), and λ is the level at which the
//     shares fill the capacity;
//  5. when all demand fits, the capacity still left — the headroom — is
//     handed out too, so a DC can absorb a burst before the next rebalance:
//     first up to EqualHeadroom of it in equal parts (so an idle DC is not
//     at zero when its first requests arrive), then the rest in proportion to
//     demand (so every busy DC can grow by the same factor), then anything
//     that ceilings refused in equal parts to whoever still has room. Only
//     capacity that no DC may take (every DC drained, pinned or at its
//     ceiling) is left unassigned.
//
// Every share is in [0, 1] and the shares, added in index order in float64,
// never exceed 1: shares are multiplied by L and floored downstream, and
// safety (SPEC §4) depends on that sum. Allocate does not allocate memory for
// up to MaxStackDCs DCs and runs in O(n log n) for n DCs.
//
// Table and Rebalance apply Allocate to many entries at once over a compact,
// flat layout: one row of n demands and n shares per entry, and one row of n
// DC settings per policy (a rule's operator settings, shared by the rule's
// entry and the entries of its keys).
//
// The package is pure: it imports only the standard library, keeps no
// state, does no I/O and is safe for concurrent use on distinct outputs.
// docs/allocation.md explains the choices and gives benchmark figures.
package allocate
