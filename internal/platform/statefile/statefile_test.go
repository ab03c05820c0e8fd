package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s[1].pb")
	if data, err := Read(path); err != nil || data != nil {
		t.Fatalf("Read of a missing file: %q, %v; want nil, nil", data, err)
	}
	// A temporary file a crash left behind is cleaned up by the next write.
	if err := os.WriteFile(filepath.Join(dir, ".s[1].pb.123"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(v)); err != nil {
			t.Fatal(err)
		}
		if data, err := Read(path); err != nil || string(data) != v {
			t.Fatalf("Read after Write(%q): %q, %v", v, data, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a missing file: %v, want nil", err)
	}
	if err := Write(filepath.Join(dir, "missing", "s.pb"), nil); err == nil {
		t.Error("Write into a missing directory: want an error")
	}
}

// TestReadRefuses: anything but a regular file of at most MaxSize bytes
// is an error, returned at once.
func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if err := os.WriteFile(large, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(large, MaxSize+1); err != nil { // sparse
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{dir, "not a regular file"},
		{large, "more than"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(tc.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read(%s): %v, want an error saying %q", filepath.Base(tc.path), err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) did not return", filepath.Base(tc.path))
		}
	}
}
