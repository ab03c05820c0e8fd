package main

import (
	"strings"
	"testing"
)

// A --store-pause that is not a duration of zero or more stops the
// limiter before it starts, naming the flag.
func TestStorePauseFlag(t *testing.T) {
	for _, v := range []string{"-1ms", "soon", ""} {
		err := run([]string{"--store-pause", v})
		if err == nil || !strings.Contains(err.Error(), "store-pause") {
			t.Errorf("--store-pause %q: got %v, want an error naming the flag", v, err)
		}
	}
}
