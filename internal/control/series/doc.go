// Package series keeps the coordinator's recent history of each global
// rule, for operators: per rule and DC, one Point per planning interval —
// demand, target share, share in force, and the requests offered, admitted
// and rejected — over a bounded span (15 minutes by default), in rings of
// fixed size.
//
// The leader's loop records one round after each planning tick (Record);
// the admin API reads copies (Rule, Rules). Nothing here plans or does I/O:
// the planner stays pure and the history lives beside it, in memory only,
// so a new leader starts with an empty history.
package series
