// Package embedetcd runs an etcd member inside the process, through
// go.etcd.io/etcd/server/v3/embed — the real etcd, not an imitation: a
// single-member cluster by default, or one member of a cluster whose
// members are named in Config.InitialCluster. It backs `coordinator --dev`,
// `weirdev etcd` and the tests (package etcdtest).
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config configures an embedded etcd. Dir is required.
type Config struct {
	// Dir holds the data; it is created when missing and reused when not.
	Dir string
	// ClientAddr is the host:port clients reach it on. Default
	// 127.0.0.1:2379; port 0 picks a free port.
	ClientAddr string
	// PeerAddr is the host:port of the peer listener. Default
	// 127.0.0.1:0, a free port (a single member has no peers to reach it;
	// a member of a cluster needs the port it is named with in
	// InitialCluster).
	PeerAddr string
	// Name is the member's name. Default "weir".
	Name string
	// InitialCluster names every member of a new cluster with its peer
	// URL, "a=http://127.0.0.1:2380,b=http://127.0.0.1:2381,...", as
	// etcd's --initial-cluster. Default: this member alone. Members of a
	// cluster are started together: Start returns once a quorum has formed
	// and elected a leader. A member restarted on its Dir ignores it.
	InitialCluster string
	// ClusterToken is etcd's --initial-cluster-token. Default
	// "weir-etcd".
	ClusterToken string
	// TickMs and ElectionMs are the Raft heartbeat and election timeout;
	// defaults 10 and 50, which start a single member in well under 100 ms
	// (members of a cluster on one machine do well with 50 and 500).
	TickMs, ElectionMs uint
	// LogLevel is etcd's zap log level. Default "fatal": at "error" an
	// embedded member logs benign complaints on every start and stop.
	LogLevel string
	// StartTimeout bounds the start. Default 10s.
	StartTimeout time.Duration
	// TLS, when its Cert and Key are set, serves clients over TLS
	// (https:// endpoints) and, when its ClientCA is set too, requires
	// client certificates signed by it (etcd's --client-cert-auth; with
	// auth enabled, etcd takes a certificate's common name as the user).
	// Default: plain HTTP.
	TLS TLS
}

// TLS names the PEM files of an embedded etcd's client TLS.
type TLS struct {
	Cert, Key, ClientCA string
}

// Server is a running embedded etcd. Close stops it.
type Server struct {
	etcd     *embed.Etcd
	endpoint string
}

// Start starts an embedded etcd and returns once it serves clients.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedetcd: Config.Dir is required")
	}
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = "127.0.0.1:2379"
	}
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = "127.0.0.1:0"
	}
	if cfg.Name == "" {
		cfg.Name = "weir"
	}
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "weir-etcd"
	}
	if cfg.TickMs == 0 {
		cfg.TickMs = 10
	}
	if cfg.ElectionMs == 0 {
		cfg.ElectionMs = 50
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "fatal"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	client, err := resolve(cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client address: %w", err)
	}
	peer, err := resolve(cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer address: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.TickMs, ec.ElectionMs = cfg.TickMs, cfg.ElectionMs
	ec.LogLevel = cfg.LogLevel
	scheme := "http"
	if cfg.TLS.Cert != "" || cfg.TLS.Key != "" {
		scheme = "https"
		ec.ClientAutoTLS = false
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile: cfg.TLS.Cert, KeyFile: cfg.TLS.Key,
			TrustedCAFile: cfg.TLS.ClientCA, ClientCertAuth: cfg.TLS.ClientCA != "",
		}
	}
	cu := url.URL{Scheme: scheme, Host: client}
	pu := url.URL{Scheme: "http", Host: peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	}
	ec.InitialClusterToken = cfg.ClusterToken
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start on %s: %w", client, err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return &Server{etcd: e, endpoint: cu.String()}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: start: %w", err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedetcd: not ready after %v", cfg.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// resolve replaces port 0 by a free port: etcd must know its URLs before it
// listens. Another process may take the port in between; Start then fails
// with an address-in-use error and callers may retry.
func resolve(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeAddr returns host:port with a port free at the time of the call, for
// naming the members of a cluster before any of them starts. Another
// process may take it in between; Start then fails with an address-in-use
// error.
func FreeAddr(host string) (string, error) {
	return resolve(net.JoinHostPort(host, "0"))
}

// Endpoint is the client URL, e.g. http://127.0.0.1:2379 (https:// with
// TLS).
func (s *Server) Endpoint() string { return s.endpoint }

// Err reports fatal server errors.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// IsLeader reports whether this member is the Raft leader now.
func (s *Server) IsLeader() bool { return s.etcd.Server.Leader() == s.etcd.Server.MemberID() }

// Kill stops the server as a crash would: a leader does not hand its
// leadership over first, so the other members elect a new one after their
// election timeout. The data stays in Dir.
func (s *Server) Kill() {
	s.etcd.Server.HardStop()
	s.etcd.Close()
}

// Close stops the server and waits for it; the data stays in Dir. A
// leader hands its leadership to another member first.
func (s *Server) Close() { s.etcd.Close() }
