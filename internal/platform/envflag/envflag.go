// Package envflag lets every command-line flag also be set by an
// environment variable: flag "redis-timeout" of a command with prefix
// "WEIR" reads WEIR_REDIS_TIMEOUT. A flag given on the command line wins
// over the environment, which wins over the flag's default.
package envflag

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Name returns the environment variable for flag name under prefix.
func Name(prefix, flagName string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse applies the environment (through lookup, normally os.LookupEnv)
// to fs's flags, then parses args. An invalid value in the environment is
// an error naming the variable.
func Parse(fs *flag.FlagSet, prefix string, args []string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		name := Name(prefix, f.Name)
		if v, ok := lookup(name); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment %s=%q: %w", name, v, serr)
			}
		}
	})
	if err != nil {
		return err
	}
	return fs.Parse(args)
}

// Usage returns a usage function for fs that also names each flag's
// environment variable. A flag's default is printed unless it is its
// type's zero value (as the flag package does: such a flag's zero often
// means "the package's default", which its usage then states) or its
// usage already says "(default".
func Usage(fs *flag.FlagSet, prefix, synopsis string) func() {
	return func() {
		out := fs.Output()
		fmt.Fprintln(out, synopsis)
		fmt.Fprintln(out)
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(out, "  --%s (env %s)\n    \t%s", f.Name, Name(prefix, f.Name), f.Usage)
			if !zeroDefault(f) && !strings.Contains(f.Usage, "(default") {
				fmt.Fprintf(out, " (default %q)", f.DefValue)
			}
			fmt.Fprintln(out)
		})
	}
}

// zeroDefault reports whether f's default is the zero value of its type.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// SplitList splits a comma-separated flag value, trimming spaces and
// dropping empty items: "a, b,,c" gives [a b c].
func SplitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
