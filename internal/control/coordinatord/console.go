package coordinatord

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/platform/auth"
)

// mountConsole serves the operators' console under /ui/ on mux, over the
// admin API mux already serves (the console calls it in-process with the
// signed-in token). It links only to the coordinators' URLs peers (nil:
// any) allow.
func mountConsole(mux *http.ServeMux, cfg Config, tokens auth.Store, peers *adminserver.PeerURLs, log *slog.Logger) error {
	ui, err := console.New(console.Config{API: mux, Tokens: tokens, Secure: cfg.TLS.Enabled(), DefaultDomain: cfg.DefaultDomain, EtcdPrefix: cfg.Prefix, PeerAllowed: peers.Allows, Logger: log})
	if err != nil {
		return fmt.Errorf("coordinatord: %w", err)
	}
	mux.Handle(console.Prefix, ui)
	return nil
}

// ConsoleHandler returns the console over api, the authenticated admin API
// (for programs that serve one of their own, such as the simulator); mount
// it at console.Prefix. secure marks its cookie Secure (TLS on). Its etcd
// keys have the default prefix.
func ConsoleHandler(api http.Handler, tokens auth.Store, secure bool, defaultDomain string, log *slog.Logger) (http.Handler, error) {
	ui, err := console.New(console.Config{API: api, Tokens: tokens, Secure: secure, DefaultDomain: defaultDomain, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("coordinatord: %w", err)
	}
	return ui, nil
}
