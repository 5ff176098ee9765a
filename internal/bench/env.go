package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// connectTimeout bounds the wait for a new session.
const connectTimeout = 15 * time.Second

// env is what every scenario runs against: the server, the configuration,
// and an administrative session for setting up and removing paths.
type env struct {
	cfg   config
	addr  string
	admin *zk.Conn
	peers *peerPrograms // nil when no scenario runs a peer
}

func newEnv(ctx context.Context, cfg config, addr string, peers *peerPrograms) (*env, error) {
	e := &env{cfg: cfg, addr: addr, peers: peers}
	admin, err := e.rawConn(ctx)
	if err != nil {
		return nil, err
	}
	e.admin = admin
	return e, nil
}

func (e *env) close() { e.admin.Close() }

// rawConn opens a go-zookeeper session and waits until it is established.
func (e *env) rawConn(ctx context.Context) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{e.addr}, e.cfg.sessionTimeout,
		zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", e.addr, err)
	}
	timeout := time.NewTimer(connectTimeout)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("connect to %s: connection closed", e.addr)
			}
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				// Later events are dropped by go-zookeeper once its
				// small buffer is full, so nobody needs to read them.
				return conn, nil
			}
		case <-timeout.C:
			conn.Close()
			return nil, fmt.Errorf("connect to %s: no session within %v", e.addr, connectTimeout)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// client opens a session of this module's recipes.
func (e *env) client(ctx context.Context, opts ...recipe.Option) (*recipe.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return recipe.Connect(ctx, []string{e.addr}, append([]recipe.Option{recipe.WithSessionTimeout(e.cfg.sessionTimeout)}, opts...)...)
}

// mkdirAll creates p and its missing parents as persistent nodes.
func (e *env) mkdirAll(p string) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := e.admin.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p[:i], err)
		}
	}
	return nil
}

// removeAll deletes p and everything below it, as far as it can. It
// matters with -zk: a server started here is removed with its data.
func (e *env) removeAll(p string) {
	names, _, err := e.admin.Children(p)
	if err != nil {
		return
	}
	for _, n := range names {
		e.removeAll(path.Join(p, n))
	}
	_ = e.admin.Delete(p, -1)
	if parent := path.Dir(p); parent != "/" {
		// Only succeeds when no other run left anything there.
		_ = e.admin.Delete(parent, -1)
	}
}

// serverVersion returns the version the server reports ("3.8.0-..."), or
// "unknown".
func (e *env) serverVersion() string {
	r, err := zktest.FourLetter(e.addr, "srvr")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(r, "\n") {
		if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			v, _, _ = strings.Cut(v, ",")
			// Debian's build leaves the git placeholder unexpanded.
			v, _, _ = strings.Cut(v, "-${")
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// serverPackets returns how many request packets the server has received
// in all (zk_packets_received of mntr), or false when it does not say.
// Differences between two calls count the requests sent meanwhile,
// including the pings of idle sessions, which are few.
func (e *env) serverPackets() (int64, bool) {
	r, err := zktest.FourLetter(e.addr, "mntr")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(r, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// nopLogger discards go-zookeeper's log output.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
