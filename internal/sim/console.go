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
	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/internal/control/coordinatord"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/pkg/adminapi"
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
	api, err := adminserver.New(adminserver.Config{Etcd: w.cli, DefaultDomain: w.cfg.Rules.Domain, DCs: w.cfg.DCs, Live: leaderLive{w}, Logger: w.log})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	mux := http.NewServeMux()
	for _, p := range coordinatord.APIPatterns() {
		mux.Handle(p, auth.Middleware(tokens, api))
	}
	mux.Handle("/v1/", auth.Middleware(tokens, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.leader().Handler().ServeHTTP(rw, r)
	})))
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

// leader returns the coordinator that leads now, or the first one.
func (w *world) leader() *coordinator.Coordinator {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.coords {
		if c.c.Leader() {
			return c.c
		}
	}
	return w.coords[0].c
}

// leaderLive answers the admin API's live views from whichever of the
// run's coordinators leads (they publish no admin URL for a standby to
// name), so that the console follows the leader through kill-leader.
type leaderLive struct{ w *world }

var _ adminserver.SeriesLive = leaderLive{}

func (l leaderLive) live() adminserver.Live { return coordinatord.Live(l.w.leader()) }

func (l leaderLive) Stats(ctx context.Context, domain, ruleID string) (adminapi.RuleStats, error) {
	return l.live().Stats(ctx, domain, ruleID)
}

func (l leaderLive) Shares(ctx context.Context, domain, ruleID string) ([]adminapi.DCShare, error) {
	return l.live().Shares(ctx, domain, ruleID)
}

func (l leaderLive) KeyStatus(ctx context.Context, domain, ruleID, key string) ([]adminapi.DCKeyStatus, error) {
	return l.live().KeyStatus(ctx, domain, ruleID, key)
}

func (l leaderLive) Series(ctx context.Context, domain, ruleID string) (adminapi.Series, error) {
	return l.live().(adminserver.SeriesLive).Series(ctx, domain, ruleID)
}

func (l leaderLive) Overview(ctx context.Context) (adminapi.Overview, error) {
	return l.live().(adminserver.SeriesLive).Overview(ctx)
}

func (l leaderLive) Cluster(ctx context.Context) (adminapi.Cluster, error) {
	return l.live().(adminserver.SeriesLive).Cluster(ctx)
}
