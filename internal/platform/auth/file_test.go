package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runFile starts f.Run and stops it, waiting for it, when the test ends.
func runFile(t *testing.T, f *auth.File) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	})
}

func TestFileReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, tokA+" rw alice\n")
	logs := &syncbuf.Buffer{}
	f, err := auth.NewFile(auth.FileConfig{Path: path, Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runFile(t, f)
	if p, ok := f.Lookup(tokA); !ok || p.Name != "alice" {
		t.Fatalf("got %+v, %v, want alice", p, ok)
	}

	// A new token, and a changed mode for the old one.
	writeFile(t, path, tokA+" ro alice\n"+tokB+" rw bob\n")
	wait.For(t, 5*time.Second, "bob's token", func() bool { _, ok := f.Lookup(tokB); return ok })
	if p, _ := f.Lookup(tokA); !p.ReadOnly {
		t.Errorf("alice: got %+v, want read-only", p)
	}

	// A bad file is refused; the tokens in force stay.
	writeFile(t, path, tokC+" rw carol\nshort\n"+tokB+" rx bob\n")
	// (Run may first see the file truncated, and refuse it as empty.)
	wait.For(t, 5*time.Second, "the refusal to be logged", func() bool {
		return strings.Contains(logs.String(), "line 2: token shorter than 16 characters; line 3:")
	})
	for _, tok := range []string{tokA, tokB} {
		if _, ok := f.Lookup(tok); !ok {
			t.Errorf("a token in force before the bad file was lost")
		}
	}
	if _, ok := f.Lookup(tokC); ok {
		t.Errorf("a token of the refused file is in force")
	}

	// The file replaced by an atomic rename.
	tmp := path + ".new"
	writeFile(t, tmp, tokC+" rw carl\n"+tokB+" rw bob\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "carl's token", func() bool { p, _ := f.Lookup(tokC); return p.Name == "carl" })
	if _, ok := f.Lookup(tokA); ok {
		t.Errorf("alice's token is still in force after its removal")
	}

	// A file that disappears keeps the tokens in force.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the missing file to be logged", func() bool { return strings.Contains(logs.String(), "token file unreadable") })
	if _, ok := f.Lookup(tokC); !ok {
		t.Errorf("the tokens in force were dropped when the file disappeared")
	}

	for _, secret := range []string{"secret-A", "secret-B", "secret-C"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a token: %s", logs.String())
		}
	}
}

func TestFileSameSizeRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, tokA+" rw alice\n")
	f, err := auth.NewFile(auth.FileConfig{Path: path, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runFile(t, f)
	writeFile(t, path, tokA+" ro alice\n") // same size
	// Make the change visible even on file systems with coarse times.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the new mode", func() bool { p, _ := f.Lookup(tokA); return p.ReadOnly })
}

func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, tokA+"\n")
	f, err := auth.NewFile(auth.FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "x\n"+tokB+"\n")
	err = f.Reload()
	if !errors.Is(err, auth.ErrTokenFile) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an ErrTokenFile naming the file", err)
	}
	if _, ok := f.Lookup(tokA); !ok || f.Len() != 1 {
		t.Errorf("the tokens in force were dropped by a refused reload")
	}
	writeFile(t, path, tokB+"\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(tokB); !ok {
		t.Errorf("Reload did not put the new token in force")
	}
}

func TestNewFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	writeFile(t, bad, tokA+" admin\n")
	tests := []struct {
		name string
		cfg  auth.FileConfig
		want string
	}{
		{"no path", auth.FileConfig{}, "auth: FileConfig.Path is required"},
		{"negative interval", auth.FileConfig{Path: bad, Interval: -1}, "auth: FileConfig.Interval -1ns is negative"},
		{"missing file", auth.FileConfig{Path: filepath.Join(dir, "missing")}, "no such file"},
		{"bad file", auth.FileConfig{Path: bad}, `read token file ` + bad + `: auth: invalid token file: line 1: second field is not "rw" or "ro"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := auth.NewFile(tt.cfg)
			if f != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, %v, want no File and an error containing %q", f, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q holds the token", err)
			}
		})
	}
}
