package recipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// limited builds each recipe with a maximum hold time.
var limited = map[string]func(t *testing.T, c *recipe.Client, path string, d time.Duration) handle{
	"mutex": func(t *testing.T, c *recipe.Client, path string, d time.Duration) handle {
		m, err := mutex.New(c, path, mutex.WithMaxHold(d))
		must(t, err)
		return handle{acquire: m.Lock, release: m.Unlock, err: m.Err, node: m.Node}
	},
	"rwlock.write": func(t *testing.T, c *recipe.Client, path string, d time.Duration) handle {
		rw, err := rwlock.New(c, path, rwlock.WithMaxHold(d))
		must(t, err)
		return handle{acquire: rw.Lock, release: rw.Unlock, err: rw.Err, node: rw.Node}
	},
	"semaphore": func(t *testing.T, c *recipe.Client, path string, d time.Duration) handle {
		s, err := semaphore.New(c, path, 1, semaphore.WithMaxHold(d))
		must(t, err)
		var lease *semaphore.Lease
		return handle{
			acquire: func(ctx context.Context) (err error) { lease, err = s.Acquire(ctx); return err },
			release: func(ctx context.Context) error { return lease.Release(ctx) },
			err:     func() error { return lease.Err() },
			node:    func() string { return lease.Node() },
		}
	},
	"leader": func(t *testing.T, c *recipe.Client, path string, d time.Duration) handle {
		e, err := leader.New(c, path, leader.WithMaxHold(d))
		must(t, err)
		return handle{acquire: e.Campaign, release: e.Resign, err: e.Err, node: e.Node}
	},
}

// A hold with a maximum hold time is ended by the library when it runs
// out: its node goes, the next in line proceeds, and Err says why.
func TestMaxHold(t *testing.T) {
	srv := zktest.Shared(t)
	const limit = 300 * time.Millisecond
	for name, build := range limited {
		t.Run(name, func(t *testing.T) {
			path := zktest.UniquePath(t)
			ctx := locktest.Ctx(t, 30*time.Second)
			holder := build(t, locktest.Client(t, []string{srv.Addr()}), path, limit)
			next := build(t, locktest.Client(t, []string{srv.Addr()}), path, 0)
			start := time.Now()
			must(t, holder.acquire(ctx))
			must(t, next.acquire(ctx)) // waits until the holder's time is up
			waited := time.Since(start)
			if waited < limit {
				t.Fatalf("the next holder was granted after %v, before the %v limit", waited, limit)
			}
			err := holder.err()
			if !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrMaxHoldExceeded) {
				t.Fatalf("holder Err = %v, want ErrLost and ErrMaxHoldExceeded", err)
			}
			t.Logf("limit %v: next holder granted after %v", limit, waited.Round(time.Millisecond))
			must(t, next.release(ctx))
		})
	}
}

// A revocable holder is asked to let go through its node's data, with the
// marker Curator uses; a holder that did not opt in is not affected.
func TestRevocation(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	ctx := locktest.Ctx(t, 30*time.Second)
	revoker := locktest.Client(t, []string{srv.Addr()})

	path := zktest.UniquePath(t)
	m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path, mutex.WithRevocable())
	must(t, err)
	must(t, m.Lock(ctx))
	start := time.Now()
	must(t, mutex.Revoke(ctx, revoker, path, m.Node()))
	select {
	case <-m.Revoked():
		t.Logf("revocation seen after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("a revocable holder was not told")
	}
	if err := m.Err(); err != nil {
		t.Fatalf("revocation is a request, not a loss: Err = %v", err)
	}
	must(t, m.Unlock(ctx))

	rwPath := zktest.UniquePath(t)
	rw, err := rwlock.New(locktest.Client(t, []string{srv.Addr()}), rwPath, rwlock.WithRevocable(), rwlock.WithCuratorNames())
	must(t, err)
	must(t, rw.RLock(ctx))
	must(t, rwlock.Revoke(ctx, revoker, rwPath, rw.Reader().Node()))
	select {
	case <-rw.Reader().Revoked():
	case <-time.After(5 * time.Second):
		t.Fatal("a revocable reader was not told")
	}
	must(t, rw.RUnlock(ctx))

	plainPath := zktest.UniquePath(t)
	plain, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), plainPath)
	must(t, err)
	must(t, plain.Lock(ctx))
	must(t, mutex.Revoke(ctx, revoker, plainPath, plain.Node()))
	if data, _, err := raw.Get(plainPath + "/" + plain.Node()); err != nil || string(data) != "__REVOKE__" {
		t.Fatalf("the revoke marker was not written: %q, %v", data, err)
	}
	select {
	case <-plain.Revoked():
		t.Fatal("a holder that did not opt in was told")
	case <-time.After(300 * time.Millisecond):
	}
	if err := plain.Err(); err != nil {
		t.Fatal(err)
	}
	gone := plain.Node()
	must(t, plain.Unlock(ctx))
	if err := mutex.Revoke(ctx, revoker, plainPath, gone); !errors.Is(err, recipe.ErrNotHeld) {
		t.Fatalf("Revoke of a node that is gone = %v, want ErrNotHeld", err)
	}
}

// A waiter's acquire span names the node it waited on and that node's
// data (its holder's identity); the hold-duration histogram counts holds
// by how they ended.
func TestWaitingOnAndHoldDuration(t *testing.T) {
	srv := zktest.Shared(t)
	tel := locktest.NewTelemetry(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	holder, err := mutex.New(tel.Client(t, srv.Addr()), path, mutex.WithData([]byte("billing-7")))
	must(t, err)
	wc := tel.Client(t, srv.Addr())
	waiter, err := mutex.New(wc, path)
	must(t, err)
	must(t, holder.Lock(ctx))
	granted := make(chan error, 1)
	go func() { granted <- waiter.Lock(ctx) }()
	// Waiting: the server has its watch on the holder's node (a read sent
	// is not enough: it may still be on its way when the holder leaves).
	holderNode := holder.Node()
	locktest.Eventually(t, 10*time.Second, "the waiter watching", func() bool {
		r, err := srv.FourLetter("wchp")
		return err == nil && strings.Contains(r, path+"/"+holderNode)
	})
	must(t, holder.Unlock(ctx))
	must(t, <-granted)
	must(t, waiter.Unlock(ctx))

	var found bool
	for _, s := range tel.Spans("mutex.acquire") {
		node, ok := locktest.SpanAttr(s, telemetry.AttrWaitingOnNode)
		if !ok {
			continue
		}
		found = true
		data, _ := locktest.SpanAttr(s, telemetry.AttrWaitingOn)
		if node.AsString() != holderNode || data.AsString() != "billing-7" {
			t.Errorf("waiting_on = %s (%s), want %s (billing-7)", node.AsString(), data.AsString(), holderNode)
		}
	}
	if !found {
		t.Fatal("no acquire span says what it waited on")
	}
	rm := tel.Collect(t)
	if n := locktest.HistCountOf(t, rm, telemetry.MetricHoldDuration, attribute.String(string(telemetry.AttrRecipe), "mutex"),
		attribute.String(string(telemetry.AttrHoldEnd), "released")); n != 2 {
		t.Fatalf("hold.duration counted %d released mutex holds, want 2", n)
	}
}
