// Package locktest holds helpers shared by the recipes' behaviour tests:
// a TestMain (Main), clients on a test server, detectors for safety
// properties, small waits and look-ups, and an OpenTelemetry SDK set-up
// with readers for its spans and metrics (Telemetry).
package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Client connects a recipe client to addrs (bounded by 20 s) and closes it
// when the test ends. Options are applied after a 4 s session timeout, so a
// test can override it.
func Client(t testing.TB, addrs []string, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]recipe.Option{recipe.WithSessionTimeout(4 * time.Second)}, opts...)
	c, err := recipe.Connect(ctx, addrs, all...)
	if err != nil {
		t.Fatalf("connect %v: %v", addrs, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Overlap detects a critical section entered by more than Max holders at
// once. Use Enter/Exit around the section; Violations and Peak report.
type Overlap struct {
	Max        int64
	cur, peak  atomic.Int64
	violations atomic.Int64
}

// Enter records an entry and reports whether the bound still holds.
func (o *Overlap) Enter() bool {
	n := o.cur.Add(1)
	for {
		p := o.peak.Load()
		if n <= p || o.peak.CompareAndSwap(p, n) {
			break
		}
	}
	max := o.Max
	if max == 0 {
		max = 1
	}
	if n > max {
		o.violations.Add(1)
		return false
	}
	return true
}

// Exit records an exit.
func (o *Overlap) Exit() { o.cur.Add(-1) }

// Violations returns how many entries exceeded the bound.
func (o *Overlap) Violations() int64 { return o.violations.Load() }

// Peak returns the largest number of holders seen at once.
func (o *Overlap) Peak() int64 { return o.peak.Load() }

// Log is a concurrency-safe append-only list.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends v.
func (l *Log[T]) Add(v T) {
	l.mu.Lock()
	l.items = append(l.items, v)
	l.mu.Unlock()
}

// Items returns a copy of the list.
func (l *Log[T]) Items() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// Eventually polls cond every 10 ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ctx returns a context that ends after d, cancelled when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Children lists the children of path, sorted, over conn (a raw connection
// apart from the recipe's); nil if path does not exist.
func Children(t testing.TB, conn *zk.Conn, path string) []string {
	t.Helper()
	names, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("children %s: %v", path, err)
	}
	slices.Sort(names)
	return names
}

// Closed reports whether ch is closed, without waiting.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Queued waits (up to 10 s) until participants, a recipe's Participants
// method, lists n nodes.
func Queued[P any](t testing.TB, n int, participants func(context.Context) ([]P, error)) {
	t.Helper()
	Eventually(t, 10*time.Second, fmt.Sprintf("%d nodes queued", n), func() bool {
		p, err := participants(context.Background())
		return err == nil && len(p) == n
	})
}

// Settle waits (up to 5 s) until c has sent no request for 200 ms, so that
// background requests started by an earlier call, such as a new hold
// arming the watch on its own node (at most 100 ms after the acquire), do
// not count in a measurement that follows.
func Settle(t testing.TB, c *recipe.Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	last := c.Stats().RoundTrips()
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		now := c.Stats().RoundTrips()
		if now == last {
			return
		}
		last = now
	}
	t.Fatal("client never went quiet")
}

// Sleep waits d, or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
