// Package statefile keeps a process's small state files: a whole file
// written so that a crash — of the process or of the machine — leaves the
// old content or the new, never a part of either, and read back with a
// bound on its size. The limiter's --state-dir (saved shares and rules)
// uses it.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxSize bounds a state file Read takes, in bytes (256 MiB: far above
// what 100,000 keys of a DC's documents or a few hundred thousand rules
// take).
const MaxSize = 256 << 20

// Write replaces the file at path with data: written to a temporary file
// in the same directory, synced, renamed over path, and the directory
// synced, so that the new content survives a crash of the machine once
// Write returns. The directory must exist. Temporary files a crash left
// behind are removed.
func Write(path string, data []byte) error {
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+".*")); len(stale) > 0 {
		for _, s := range stale {
			os.Remove(s)
		}
	}
	return nil
}

// Read returns the content of the regular file at path, or nil and no
// error when there is none. Anything else at path (a directory, a FIFO,
// a device), and a file larger than MaxSize, is an error and is not read.
func Read(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("read %s: %d bytes, more than %d", path, fi.Size(), MaxSize)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("read %s: more than %d bytes", path, MaxSize)
	}
	return data, nil
}

// Remove removes the file at path and syncs its directory; a missing file
// is no error.
func Remove(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename or a removal in dir durable.
func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// globEscape escapes the characters filepath.Match treats specially.
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
