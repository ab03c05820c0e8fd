// Package topk finds the heaviest keys of a stream in bounded memory: the
// Space-Saving algorithm of Metwally, Agrawal and El Abbadi ("Efficient
// Computation of Frequent and Top-k Elements in Data Streams", ICDT 2005),
// with weighted updates.
//
// A Sketch monitors at most K keys, each with an estimated count and an
// error bound. A key already monitored has its count increased; a new key
// takes the place of the monitored key with the smallest count, inheriting
// that count as its error. After keys of total weight N have been added:
//
//   - no monitored key is undercounted, and none is overcounted by more
//     than its error: Count−Err ≤ true count ≤ Count;
//   - every key not monitored has a true count of at most Min(), which is
//     at most N/K; so every key whose true count exceeds N/K is monitored;
//   - while fewer than K distinct keys have been seen, every count is exact.
//
// Keys are identified by a 64-bit hash (hash/maphash, seeded at random per
// Sketch) and their bytes are kept in buffers the Sketch reuses, so that
// Add allocates nothing once the buffers have grown to the keys' lengths.
// Two distinct keys whose hashes collide (probability about K·D/2^64 for D
// distinct keys seen) share a counter for a while; the guarantees above hold
// except for the pair.
//
// A Sketch is not safe for concurrent use: its user serialises calls.
package topk
