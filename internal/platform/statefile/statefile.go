// Package statefile keeps a process's small state files: a whole file
// written so that a crash leaves the old content or the new, never a part
// of either, and read back with a bound on its size. The limiter's
// --state-dir (saved shares and rules) uses it.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data: written to a temporary file
// in the same directory, synced, then renamed over path. The directory
// must exist.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
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
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Read returns the content of the file at path, or nil and no error when
// there is none. A file larger than limit bytes is an error, and is not
// read.
func Read(path string, limit int64) ([]byte, error) {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer file.Close()
	if fi, err := file.Stat(); err == nil && fi.Size() > limit {
		return nil, fmt.Errorf("read %s: %d bytes, more than %d", path, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: more than %d bytes", path, limit)
	}
	return data, nil
}

// Remove removes the file at path; a missing file is no error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
