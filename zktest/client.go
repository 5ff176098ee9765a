package zktest

import (
	"context"
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
func Client(t testing.TB, addr string, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientConnectWait)
	defer cancel()
	c, err := recipe.Connect(ctx, []string{addr}, opts...)
	if err != nil {
		t.Fatalf("zktest: recipe client for %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Client connects a recipe.Client through the proxy: it is
// Client(t, p.Addr(), opts...).
func (p *Proxy) Client(t testing.TB, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	return Client(t, p.Addr(), opts...)
}
