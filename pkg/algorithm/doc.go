// Package algorithm holds Weir's five rate-limiting algorithms as pure
// functions: given a key's state, the limit in force, the time and the cost of
// a request, each returns a decision and the key's next state. Nothing here
// does I/O, reads a clock or keeps state of its own; stores (in memory, in
// Redis) keep the states and call these functions or, in Redis, Lua scripts
// that perform the same transitions.
//
// Time is handled as integer milliseconds since the Unix epoch, and the
// bucket algorithms keep their levels in integer units of 1/window tokens,
// so repeated refills never drift. Params.Validate bounds the bucket
// arithmetic to integers below 2^53, which Redis's Lua (whose numbers are
// IEEE doubles) computes exactly. The one product that can pass 2^53, the
// sliding window counter's weighting of the previous window, is computed in
// float64 in Go with the same IEEE operations in the same order as in Lua, so
// both agree bit for bit (and may round one below the exact ceiling at
// extreme limits and windows).
package algorithm
