package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDomainSource checks that every subcommand names the domain of
// --domain, else of WEIR_DOMAIN, else none (the server then chooses), and
// that apply refuses a file of another domain than the one asked for.
func TestDomainSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte("domain: shop\nrules:\n  - rule_id: login\n    limit: 5\n    window_seconds: 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"get"},
		{"get", "login"},
		{"status", "login", "john"},
		{"top", "search"},
		{"shares", "get", "search"},
		{"shares", "pin", "search", "us-east", "50%"},
		{"shares", "unpin", "search", "us-east"},
		{"shares", "drain", "search", "us-east"},
		{"audit", "--rule", "login"},
		{"delete", "login"},
		{"apply", "-f", file, "--dry-run"},
	}
	sources := []struct {
		name string
		env  string   // WEIR_DOMAIN; empty: unset
		flag []string // global flags
		want string   // the ?domain= of every request
	}{
		{"flag", "", []string{"--domain", "shop"}, "shop"},
		{"environment", "shop", nil, "shop"},
		{"flag over environment", "elsewhere", []string{"--domain", "shop"}, "shop"},
		{"neither", "", nil, ""},
	}
	for _, src := range sources {
		for _, args := range commands {
			t.Run(src.name+"/"+strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
				srv := shopServer(t)
				c := newCLI(t, srv)
				if src.env != "" {
					c.env["WEIR_DOMAIN"] = src.env
				}
				c.run(append(src.flag, args...)...) // the exit status depends on the server's answer
				reqs := srv.Requests()
				if len(reqs) == 0 {
					t.Fatalf("no request sent")
				}
				for _, r := range reqs {
					want := src.want
					if args[0] == "apply" {
						want = "shop" // the file's
					}
					if got := r.Query.Get("domain"); got != want {
						t.Errorf("%s %s: got domain %q, want %q", r.Method, r.Path, got, want)
					}
				}
			})
		}
	}

	t.Run("apply of another domain", func(t *testing.T) {
		for _, tt := range []struct {
			env  string
			args []string
			msg  string
		}{
			{"api", []string{"apply", "-f", file}, `WEIR_DOMAIN "api", but the file's domain is "shop"`},
			{"", []string{"--domain", "api", "apply", "-f", file}, `--domain "api", but the file's domain is "shop"`},
		} {
			srv := shopServer(t)
			c := newCLI(t, srv)
			if tt.env != "" {
				c.env["WEIR_DOMAIN"] = tt.env
			}
			r := c.run(tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("weirctl %q with WEIR_DOMAIN=%q: got exit %d, %q; want %d, %q", tt.args, tt.env, r.code, r.stderr, exitUsage, tt.msg)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("weirctl %q: got %d requests, want none", tt.args, n)
			}
		}
	})
}
