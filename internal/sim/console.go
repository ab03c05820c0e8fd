package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/control/coordinatord"
	"github.com/weirhq/weir/internal/platform/auth"
)

// ConsoleConfig asks a run to serve the admin API and the operators'
// console (package console) of its first coordinator, so that the shares
// can be watched, and changed, in a browser while the scenario plays.
type ConsoleConfig struct {
	// Addr is where to listen; default 127.0.0.1:0 (a free port).
	Addr string
	// Ready, if set, is called once serving, with the console's URL and
	// the tokens that sign in to it.
	Ready func(url string, tokens ConsoleTokens)
}

// ConsoleTokens are a run's admin API tokens, made up for the run.
type ConsoleTokens struct {
	// ReadWrite may change share policies and rules; ReadOnly may only
	// look.
	ReadWrite, ReadOnly string
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sim: console token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// startConsole serves the admin API and the console; w.stop stops them.
func (w *world) startConsole() error {
	cc := w.cfg.Console
	var toks ConsoleTokens
	var err error
	if toks.ReadWrite, err = newToken(); err != nil {
		return err
	}
	if toks.ReadOnly, err = newToken(); err != nil {
		return err
	}
	tokens, err := auth.Parse([]byte(toks.ReadWrite + " rw operator\n" + toks.ReadOnly + " ro viewer\n"))
	if err != nil {
		return fmt.Errorf("sim: console tokens: %w", err)
	}
	w.mu.Lock()
	co := w.coords[0].c
	w.mu.Unlock()
	api, err := adminserver.New(adminserver.Config{Etcd: w.cli, DefaultDomain: w.cfg.Rules.Domain, DCs: w.cfg.DCs, Live: coordinatord.Live(co), Logger: w.log})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/rate-limits", "/rate-limits/", "/audit", "/overview", "/cluster"} {
		mux.Handle(p, auth.Middleware(tokens, api))
	}
	mux.Handle("/v1/", auth.Middleware(tokens, co.Handler()))
	ui, err := coordinatord.ConsoleHandler(mux, tokens, false, w.cfg.Rules.Domain, w.log)
	if err != nil {
		return err
	}
	mux.Handle(console.Prefix, ui)
	addr := cc.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: console: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("console", "err", err)
		}
	}()
	w.mu.Lock()
	w.stops = append(w.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	w.mu.Unlock()
	if cc.Ready != nil {
		cc.Ready("http://"+ln.Addr().String()+console.Prefix, toks)
	}
	return nil
}
