package recipe

import (
	"context"
	"log/slog"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"
)

// The reads below are go-zookeeper's, with a context: they return ctx's
// error as soon as ctx ends (the request then finishes in the background and
// its result is dropped) and [ErrClosed] after Close. They are counted in
// [Client.Stats] and not retried. Recipes use them to observe a lock
// directory; programs may use them to inspect one.

// Children lists the children of path.
func (c *Client) Children(ctx context.Context, path string) ([]string, error) {
	return c.children(ctx, path)
}

// ChildrenW lists the children of path and sets a watch that fires when
// they change or path is deleted.
func (c *Client) ChildrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	var names []string
	var ch <-chan zk.Event
	c.stats.lists.Add(1)
	err := c.call(ctx, func() (err error) {
		names, _, ch, err = c.conn.ChildrenW(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return names, ch, nil
}

// Get returns the data and stat of path.
func (c *Client) Get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	return c.get(ctx, path)
}

// GetW returns the data and stat of path and sets a watch that fires when
// path changes or is deleted.
func (c *Client) GetW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	var data []byte
	var st *zk.Stat
	var ch <-chan zk.Event
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		data, st, ch, err = c.conn.GetW(path)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return data, st, ch, nil
}

// ExistsW reports whether path exists and sets a watch that fires when it
// is created, changed or deleted.
func (c *Client) ExistsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	var ok bool
	var st *zk.Stat
	var ch <-chan zk.Event
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		ok, st, ch, err = c.conn.ExistsW(path)
		return err
	})
	if err != nil {
		return false, nil, nil, err
	}
	return ok, st, ch, nil
}

// Done returns a channel that is closed when the client is closed.
func (c *Client) Done() <-chan struct{} { return c.lifetime.Done() }

// Logger returns the client's logger (see [WithLogger]), for recipes that
// log on the client's behalf.
func (c *Client) Logger() *slog.Logger { return c.log }

// Tracer returns the client's tracer (see [WithTracerProvider]), for
// recipes that trace on the client's behalf.
func (c *Client) Tracer() trace.Tracer { return c.tracer }
