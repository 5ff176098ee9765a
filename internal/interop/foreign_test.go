package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// acquirer is one of our recipes' acquires, with the recipe's own
// not-acquired sentinel.
type acquirer struct {
	name        string
	acquire     func(context.Context) error
	notAcquired error
}

// acquirers returns an acquire of each of our recipes on path: the mutex,
// both sides of the read/write lock (ours and Curator's names), the
// semaphore and the election.
func acquirers(t *testing.T, c *recipe.Client, path string) []acquirer {
	t.Helper()
	m, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := rwlock.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	crw, err := rwlock.New(c, path, rwlock.WithCuratorNames())
	if err != nil {
		t.Fatal(err)
	}
	s, err := semaphore.New(c, path, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := leader.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	return []acquirer{
		{"mutex", m.Lock, mutex.ErrNotAcquired},
		{"rwlock.read", rw.RLock, rwlock.ErrNotAcquired},
		{"rwlock.write", rw.Lock, rwlock.ErrNotAcquired},
		{"rwlock.curator-write", crw.Lock, rwlock.ErrNotAcquired},
		{"semaphore", func(ctx context.Context) error { _, err := s.Acquire(ctx); return err }, semaphore.ErrNotAcquired},
		{"leader", e.Campaign, leader.ErrNotElected},
	}
}

// checkRefusals runs each acquire on path, whose directory holds the
// foreign children foreign (and nothing else): each must fail at once with
// recipe.ErrMismatch and its recipe's not-acquired sentinel, naming one of
// them, and leave nothing of ours in the directory.
func checkRefusals(t *testing.T, raw *zk.Conn, as []acquirer, path string, foreign ...string) {
	t.Helper()
	for _, a := range as {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		err := a.acquire(ctx)
		cancel()
		switch {
		case !errors.Is(err, recipe.ErrMismatch) || !errors.Is(err, recipe.ErrNotAcquired) || !errors.Is(err, a.notAcquired):
			t.Errorf("%s next to %v = %v, want recipe.ErrMismatch and %v", a.name, foreign, err, a.notAcquired)
			continue
		case !slices.ContainsFunc(foreign, func(n string) bool { return strings.Contains(err.Error(), n) }):
			t.Errorf("%s: %v does not name any of %v", a.name, err, foreign)
		}
		t.Logf("%s refused in %v: %v", a.name, time.Since(start).Round(time.Millisecond), err)
		for _, n := range locktest.Children(t, raw, path) {
			if !slices.Contains(foreign, n) {
				t.Errorf("after %s's refusal the directory holds %s (with %v)", a.name, n, foreign)
			}
		}
	}
}

// curatorSemaphoreRefused: while Curator's InterProcessSemaphoreV2 holds
// a lease on a path (its "locks" and "leases" children), every recipe of
// ours refuses the path with ErrMismatch naming one of them.
func (e *env) curatorSemaphoreRefused(t *testing.T) {
	ctx := locktest.Ctx(t, 60*time.Second)
	path := zktest.UniquePath(t)
	j := e.javaC(0, kind{java: "semaphore"}, path)
	if err := j.hold(ctx); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, e.addr)
	layout := locktest.Children(t, raw, path)
	if !slices.Equal(layout, []string{"leases", "locks"}) && !slices.Equal(layout, []string{"leases"}) {
		t.Fatalf("Curator's semaphore left %v in its directory, want leases and locks", layout)
	}
	checkRefusals(t, raw, acquirers(t, e.clients[0], path), path, layout...)
	if err := j.release(ctx); err != nil {
		t.Fatal(err)
	}
}
