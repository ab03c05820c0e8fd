package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often File.Run looks at the token file unless
// configured otherwise.
const DefaultInterval = 5 * time.Second

// FileConfig configures a File.
type FileConfig struct {
	// Path is the token file. Required.
	Path string
	// Interval is how often Run checks whether the file changed (its
	// modification time, size or identity); default DefaultInterval.
	Interval time.Duration
	// Logger receives reloads and refused files (with their line numbers,
	// never their content); default: discard.
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c FileConfig) Validate() error {
	if c.Path == "" {
		return errors.New("auth: FileConfig.Path is required")
	}
	if c.Interval < 0 {
		return fmt.Errorf("auth: FileConfig.Interval %v is negative", c.Interval)
	}
	return nil
}

// File keeps the tokens of a token file in force. NewFile reads the file;
// Run re-reads it whenever it changes, and Reload at once. A file that
// cannot be read or parsed is refused as a whole: the tokens read before
// stay in force, and the problem is logged once per change of the file.
//
// A File is safe for concurrent use. Lookup never touches the file system.
type File struct {
	cfg    FileConfig
	log    *slog.Logger
	tokens atomic.Pointer[Tokens]

	mu   sync.Mutex  // serializes loads
	seen os.FileInfo // the file as last loaded or refused; nil if it could not be read
}

// NewFile reads the token file of cfg and returns a File holding its
// tokens, or an error if the file cannot be read or is malformed (a
// *ParseError, wrapped with the path).
func NewFile(cfg FileConfig) (*File, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File{cfg: cfg, log: log.With("token_file", cfg.Path)}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Lookup returns the principal holding token under the tokens in force.
func (f *File) Lookup(token string) (Principal, bool) { return f.tokens.Load().Lookup(token) }

// Len returns the number of tokens in force.
func (f *File) Len() int { return f.tokens.Load().Len() }

// Reload reads the file now, whether or not it changed, and puts its
// tokens in force. On error the tokens in force stay, and the error (which
// holds no token) is returned, not logged.
func (f *File) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.cfg.Path)
	if err != nil {
		f.seen = nil
		return fmt.Errorf("read token file %s: %w", f.cfg.Path, err)
	}
	// Remember the file as it was before reading it: if it changes while
	// it is read, the next check sees the change and reads it again.
	f.seen = fi
	return f.load(fi)
}

// Run checks the file every Interval and reloads it when its modification
// time, size or identity (an atomic rename) changed, logging what it did.
// It returns nil when ctx is done. Run at most once at a time.
func (f *File) Run(ctx context.Context) error {
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			f.check()
		}
	}
}

// check reloads the file if it changed since it was last seen.
func (f *File) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.cfg.Path)
	if err != nil {
		if f.seen != nil {
			f.log.Error("token file unreadable; keeping the tokens in force", "err", err, "tokens", f.Len())
		}
		f.seen = nil
		return
	}
	if f.seen != nil && os.SameFile(fi, f.seen) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		return
	}
	f.seen = fi
	if err := f.load(fi); err != nil {
		f.log.Error("token file refused; keeping the tokens in force", "err", err, "tokens", f.Len())
		return
	}
	f.log.Info("token file reloaded", "tokens", f.Len())
}

// load reads and parses the file described by fi and puts its tokens in
// force. f.mu is held.
func (f *File) load(fi os.FileInfo) error {
	if fi.Mode().Perm()&0o077 != 0 {
		f.log.Warn("token file is accessible to group or others", "mode", fi.Mode().Perm().String())
	}
	data, err := readFile(f.cfg.Path)
	if err == nil {
		var t *Tokens
		if t, err = Parse(data); err == nil {
			f.tokens.Store(t)
			return nil
		}
	}
	return fmt.Errorf("read token file %s: %w", f.cfg.Path, err)
}

// readFile reads at most MaxFileSize+1 bytes of path, so that Parse sees
// an oversized file as such without reading all of it.
func readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
}
