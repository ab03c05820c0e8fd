package sim

import (
	"io"
	"sync"
)

// lockedWriter serialises writes to the live display: the per-second table,
// fault notices and start-up notices come from different goroutines, and
// the caller's writer need not be safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
