package recipe

import (
	"context"
	"log/slog"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/engine"
)

// The private half of the client, for this module's recipes, tests and
// tools only: package internal/engine hands it out.
func init() {
	engine.Register(func(c any) engine.Client { return private{c.(*Client)} }, relabel)
}

type private struct{ c *Client }

func (p private) Children(ctx context.Context, path string) ([]string, error) {
	return p.c.children(ctx, path)
}

func (p private) ChildrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	return p.c.childrenW(ctx, path)
}

func (p private) Get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	return p.c.get(ctx, path)
}

func (p private) GetW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	return p.c.getDataW(ctx, path)
}

func (p private) ExistsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	return p.c.existsW(ctx, path)
}

func (p private) Conn() *zk.Conn                           { return p.c.conn }
func (p private) Logger() *slog.Logger                     { return p.c.log }
func (p private) Tracer() trace.Tracer                     { return p.c.tracer }
func (p private) Stats() engine.Stats                      { return p.c.stats.snapshot() }
func (p private) Subscribe() (<-chan engine.Event, func()) { return p.c.subscribe() }
func (p private) Done() <-chan struct{}                    { return p.c.lifetime.Done() }
func (p private) Backoff() engine.Pacer                    { return p.c.pacer() }
