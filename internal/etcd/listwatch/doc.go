// Package listwatch keeps a handler in step with the keys under one etcd
// prefix, in the manner of client-go's reflector: list, then watch from the
// listing's next revision, and list again when the watch cannot go on.
//
// A Loop lists the prefix in pages (Config.PageSize keys a request), every
// page read at the revision of the first, and hands the whole listing to
// Handler.Replace. It then watches the prefix from the next revision,
// requiring a leader and asking for progress notifications, and hands each
// watch response's events to Handler.Apply, in order. Nothing written
// between the listing and the watch is missed or seen twice: the listing is
// the state at revision R, the watch delivers exactly the changes after R.
//
// When the watch's revision has been compacted away the Loop lists again
// at once; when the watch ends for any other reason (no leader, the server
// or the connection gone) it lists again after a backoff
// (internal/platform/backoff). A failed listing is retried with backoff;
// the handler keeps what it had.
//
// The Loop passes keys and values as etcd stores them: decoding them, and
// what to do with a malformed one, is the handler's business. Handlers are
// called from Run's goroutine only, one call at a time, so a handler needs
// no lock for the state only its calls touch.
//
// Revision, Synced, Wait and Stats observe a running Loop from any
// goroutine: callers use them to know what has been applied (for example to
// acknowledge it) and tests to wait for a write to arrive.
package listwatch
