// Package logflag gives every Weir command the same logging flags,
// --log-level and --log-format, and builds the log/slog logger they ask for.
package logflag

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Flags holds the values of the logging flags.
type Flags struct {
	level, format string
}

// Register adds --log-level and --log-format to fs.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.format, "log-format", "json", "log format: json or text")
	return f
}

// Logger returns a logger writing to w as the flags say.
func (f *Flags) Logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch f.format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", f.format)
}
