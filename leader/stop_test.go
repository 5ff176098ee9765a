package leader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// mutexHolds has a mutex, on a client of its own, hold path until the test
// ends: the path is then used by another kind of lock.
func mutexHolds(t *testing.T, srv *zktest.Server, path string) {
	t.Helper()
	m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// guardedDir creates a fresh election directory whose ACL lets anyone do
// perms only (with its parent open to all), and returns its path.
func guardedDir(t *testing.T, srv *zktest.Server, perms int32) string {
	t.Helper()
	raw := zktest.Connect(t, srv.Addr())
	parent := zktest.UniquePath(t)
	if _, err := raw.Create("/zktest", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := raw.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	dir := parent + "/election"
	if _, err := raw.CreateContainer(dir, nil, zk.FlagContainer, zk.WorldACL(perms)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Run on a path that no retry can make usable returns at its first
// campaign with the error: one create (the campaign's node, deleted
// again), no term, fn never called.
func TestRunStopsOnPermanentError(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want error
	}{
		{"used by a mutex", func(t *testing.T) string {
			p := zktest.UniquePath(t)
			mutexHolds(t, srv, p)
			return p
		}, recipe.ErrMismatch},
		{"no right to create", func(t *testing.T) string {
			return guardedDir(t, srv, zk.PermRead)
		}, recipe.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			c := locktest.Client(t, []string{srv.Addr()})
			e := newElection(t, c, path)
			before := c.Stats()
			// The deadline only bounds a broken Run; the test asserts
			// counts, not times.
			err := e.Run(locktest.Ctx(t, 30*time.Second), func(context.Context) error {
				t.Error("fn called on a path Run cannot lead")
				return nil
			})
			if !errors.Is(err, tc.want) || !errors.Is(err, leader.ErrNotElected) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run = %v, want %v (and ErrNotElected) at once", err, tc.want)
			}
			st := c.Stats().Sub(before)
			if st.Creates != 1 || st.Acquired != 0 {
				t.Fatalf("Run made %d creates and %d acquires, want one campaign (1 create) and no term", st.Creates, st.Acquired)
			}
			t.Logf("Run = %v (after %d create, %d lists)", err, st.Creates, st.Lists)
			for _, n := range locktest.Children(t, zktest.Connect(t, srv.Addr()), path) {
				if strings.Contains(n, leader.LockName) {
					t.Fatalf("the campaign left its node %s", n)
				}
			}
		})
	}
}

// A term whose node cannot be deleted (the directory grants no DELETE)
// ends Run: a new campaign would queue behind the node left over.
func TestRunStopsWhenResignRefused(t *testing.T) {
	srv := zktest.Shared(t)
	path := guardedDir(t, srv, zk.PermRead|zk.PermCreate)
	e := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	terms := 0
	err := e.Run(locktest.Ctx(t, 30*time.Second), func(context.Context) error {
		terms++
		return nil
	})
	if !errors.Is(err, recipe.ErrPermission) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrPermission", err)
	}
	if terms != 1 {
		t.Fatalf("fn ran %d times, want one term", terms)
	}
}

// Observe ends on a path used by another kind of lock, and on one it may
// not read, after one listing; Observer's Err says why. Its end by the
// context or by closing the client says so too.
func TestObserveEnds(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want error
	}{
		{"used by a mutex", func(t *testing.T) string {
			p := zktest.UniquePath(t)
			mutexHolds(t, srv, p)
			return p
		}, recipe.ErrMismatch},
		{"no right to read", func(t *testing.T) string {
			return guardedDir(t, srv, zk.PermCreate)
		}, recipe.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			c := locktest.Client(t, []string{srv.Addr()})
			e := newElection(t, c, path)
			before := c.Stats()
			o, err := e.Observer(locktest.Ctx(t, 30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for p := range o.C {
				t.Errorf("delivered %+v", p)
			}
			if err := o.Err(); !errors.Is(err, tc.want) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Err = %v, want %v", err, tc.want)
			}
			if st := c.Stats().Sub(before); st.Lists != 1 || st.Reads != 0 {
				t.Fatalf("the observer made %d listings and %d reads, want one listing", st.Lists, st.Reads)
			}
			// Observe's channel closes the same way.
			ch, err := e.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for p := range ch {
				t.Errorf("Observe delivered %+v", p)
			}
		})
	}

	t.Run("context", func(t *testing.T) {
		e := newElection(t, locktest.Client(t, []string{srv.Addr()}), zktest.UniquePath(t))
		ctx, cancel := context.WithCancel(context.Background())
		o, err := e.Observer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Err(); err != nil {
			t.Fatalf("Err while observing = %v", err)
		}
		cancel()
		for range o.C {
		}
		if err := o.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", err)
		}
	})
	t.Run("client closed", func(t *testing.T) {
		c := locktest.Client(t, []string{srv.Addr()})
		e := newElection(t, c, zktest.UniquePath(t))
		o, err := e.Observer(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		for range o.C {
		}
		if err := o.Err(); !errors.Is(err, recipe.ErrClosed) {
			t.Fatalf("Err = %v, want recipe.ErrClosed", err)
		}
	})
}

// A panic in fn is not recovered by Run: it reaches Run's caller with its
// own value, after Run cancelled the term's context and resigned, so the
// node is gone and the next participant leads at once. The handle can run
// again afterwards.
func TestRunPanic(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	e := newElection(t, locktest.Client(t, []string{srv.Addr()}), path, leader.WithData([]byte("panicky")))
	next := newElection(t, locktest.Client(t, []string{srv.Addr()}), path, leader.WithData([]byte("next")))

	type boom struct{ msg string }
	value := &boom{"boom"}
	var termCtx context.Context
	var node string
	elected := make(chan error, 1)
	got := func() (r any) {
		defer func() { r = recover() }()
		_ = e.Run(ctx, func(tctx context.Context) error {
			termCtx, node = tctx, e.Node()
			go func() { elected <- next.Campaign(ctx) }()
			locktest.Queued(t, 2, e.Participants)
			panic(value)
		})
		t.Error("Run returned after fn panicked")
		return nil
	}()
	if got != value {
		t.Fatalf("recovered %v from Run, want fn's panic value %v", got, value)
	}
	// All of this was done before the panic left Run.
	if termCtx.Err() == nil {
		t.Fatal("the term's context is not cancelled")
	}
	if e.IsLeader() || e.Node() != "" {
		t.Fatalf("after the panic: IsLeader %v, node %q; want the term resigned", e.IsLeader(), e.Node())
	}
	for _, n := range locktest.Children(t, zktest.Connect(t, srv.Addr()), path) {
		if n == node {
			t.Fatalf("the panicked term's node %s is still there", n)
		}
	}
	if err := <-elected; err != nil {
		t.Fatalf("the next participant's Campaign: %v", err)
	}
	if err := next.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// Run works again on the handle.
	rctx, stop := context.WithCancel(ctx)
	if err := e.Run(rctx, func(context.Context) error { stop(); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after the panic = %v, want context.Canceled", err)
	}
}
