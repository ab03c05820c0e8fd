package main

import (
	"strings"
	"testing"
)

// A --store-pause (or WEIR_STORE_PAUSE) that is not a duration of zero or
// more stops the limiter before it starts, naming the flag, or the
// variable when the environment set it.
func TestStorePauseFlag(t *testing.T) {
	for _, v := range []string{"-1ms", "soon", ""} {
		t.Run("flag "+v, func(t *testing.T) {
			err := run([]string{"--store-pause", v})
			if err == nil || !strings.Contains(err.Error(), "store-pause") {
				t.Errorf("--store-pause %q: got %v, want an error naming the flag", v, err)
			}
		})
	}
	for _, tt := range []struct{ value, want string }{
		{"soon", "WEIR_STORE_PAUSE"},
		{"", "WEIR_STORE_PAUSE"},
		{"-1ms", "store-pause"}, // a duration, refused by the config's validation
	} {
		t.Run("environment "+tt.value, func(t *testing.T) {
			t.Setenv("WEIR_STORE_PAUSE", tt.value)
			err := run(nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WEIR_STORE_PAUSE=%q: got %v, want an error naming %s", tt.value, err, tt.want)
			}
		})
	}
}
