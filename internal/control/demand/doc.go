// Package demand estimates each DC's demand for a global rule, or for one
// key of it, from the offered counts (admitted plus rejected) the DC reports
// every interval (SPEC §4). The coordinator feeds one observation per DC and
// interval and reads a published estimate that package allocate turns into
// shares.
//
// The estimate must be both calm and quick. Calm: steady demand with the
// usual noise must not move the published value, or the shares would
// oscillate and every small change would cost a two-phase quota move. Quick:
// when demand steps — doubles, stops, or moves to another DC — the estimate
// must follow within three intervals (SPEC §7). One exponentially weighted
// moving average cannot be both, so the estimator combines:
//
//   - two averages of the observations: a fast EWMA with a half-life of
//     Config.HalfLife intervals (3 by default) and a slow one, the mean,
//     with four times that. After a start, and after each step, both begin
//     as the plain mean of the observations so far, so neither is biased
//     toward where it started;
//   - a noise estimate: the mean absolute deviation of the noise, measured
//     between consecutive observations (so that a level shift counts once,
//     not until the averages catch up) and averaged slowly (half-life 48
//     intervals by default);
//   - a step detector: an observation further from the mean than three
//     quarters of a threshold is held back rather than averaged in; when
//     Config.Confirm consecutive observations are held back on the same
//     side and their mean is beyond the threshold — or twice Confirm are,
//     and their mean is beyond the deadband — the averages restart from
//     that mean and it is published at once: with the default Confirm of
//     2, two intervals after the step, or three or four when noise at the
//     new level blurs it. The threshold is the largest of Config.Deadband
//     (relative), Config.MinChange (absolute) and five times the noise
//     (about four standard deviations), the last capped at 80% of the mean
//     so that demand doubling or stopping counts as a step however noisy it
//     is. When the first held-back observation lies between the old level
//     and the rest of the run, far from the rest, it is the transitional
//     interval in which the step happened (part old level, part new), and
//     the restart leaves it out. A lone outlier is averaged in late, when
//     the next observation does not confirm it, and clipped to the
//     threshold, so it barely moves the averages;
//   - a deadband on publication: while the mean is still a plain mean (the
//     first 20 observations after a start or a step, by default) the
//     published estimate follows it within a quarter of the deadband, in
//     steps that shrink as it converges; after that, it changes only when
//     the mean, or the fast average, has moved away from it by more than
//     the largest of the deadband, MinChange and a band of a few standard
//     deviations of the averages' noise. The mean's band catches slow drift
//     precisely; the fast average's, wider, follows a ramp too gentle for
//     the step detector within a few intervals.
//
// Intervals without a report decay both averages by the fast average's
// factor — the estimate halves every HalfLife intervals — never at once: a
// lost report is not a drop in demand. A published value whose mean falls
// below MinChange/2 becomes exactly 0; it comes back above MinChange.
//
// An Estimator holds the configuration and is shared by all the DCs and
// entries; a State holds one (entry, DC) estimate in 64 bytes, without
// pointers, so a coordinator keeps 100,000 entries over 5 DCs in 32 MB of
// flat slices.
//
// The package is pure: it imports only the standard library, reads no
// clock (intervals are numbered by the caller) and does no I/O.
// docs/allocation.md explains the choices and gives their numbers.
package demand
