package zktest

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// clientConnectWait bounds the wait for a recipe.Client's first session.
const clientConnectWait = 15 * time.Second

// Client connects a recipe.Client to the ZooKeeper server (or proxy) at
// addr with opts, waiting at most 15 seconds for a session, and closes it
// when the test ends. It fails the test if the client cannot connect, so
// call it from the test's goroutine. Without options the client has
// recipe's defaults (a 10s session timeout; its loss timeout is half the
// session timeout).
//
// When the server grants another session timeout than the one asked for
// (a server ticking every 3s, as ZKTEST_ADDR may name, turns a 2s session
// into a 6s one), Client says so in the test's log: the test's bounds
// follow the granted value, [recipe.Client.SessionTimeout].
func Client(t testing.TB, addr string, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	return connectClient(t, []string{addr}, opts)
}

// Client connects a recipe.Client through the proxy: it is
// Client(t, p.Addr(), opts...).
func (p *Proxy) Client(t testing.TB, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	return Client(t, p.Addr(), opts...)
}

// Client connects a recipe.Client to every member of the ensemble (the
// client picks one and moves to another when it fails), as [Client] does
// for one server, and closes it when the test ends.
func (e *Ensemble) Client(t testing.TB, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	return connectClient(t, e.Addrs(), opts)
}

func connectClient(t testing.TB, servers []string, opts []recipe.Option) *recipe.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientConnectWait)
	defer cancel()
	// The client's warnings go nowhere by default: keep the one about the
	// session timeout, for the test's log. A logger among opts replaces it.
	granted := &grantedWatch{}
	opts = append([]recipe.Option{recipe.WithLogger(slog.New(granted))}, opts...)
	c, err := recipe.Connect(ctx, servers, opts...)
	if err != nil {
		t.Fatalf("zktest: recipe client for %s: %v", strings.Join(servers, ","), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if granted.seen.Load() {
		t.Logf("zktest: the server granted a session timeout of %v, not the one asked for: bounds follow the granted one", c.SessionTimeout())
	}
	return c
}

// grantedWatch is a slog handler that notes the client's warning about
// the granted session timeout and drops every record.
type grantedWatch struct{ seen atomic.Bool }

func (g *grantedWatch) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (g *grantedWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "granted another session timeout") {
		g.seen.Store(true)
	}
	return nil
}

func (g *grantedWatch) WithAttrs([]slog.Attr) slog.Handler { return g }
func (g *grantedWatch) WithGroup(string) slog.Handler      { return g }
