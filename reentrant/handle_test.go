package reentrant_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// A custom recipe's sentinels, as a recipe outside this module makes them.
var (
	errNotAcquired = recipe.Sentinel("gate: not acquired", recipe.ErrNotAcquired)
	errBusy        = recipe.Sentinel("gate: busy", recipe.ErrWouldBlock)
	errNotHeld     = recipe.Sentinel("gate: not held", recipe.ErrNotHeld)
)

func newGate(t *testing.T, c *recipe.Client, path string) *reentrant.Handle {
	t.Helper()
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe: "gate", LockName: "gate-", Driver: driver.Mutex(),
		NotAcquired: errNotAcquired, WouldBlock: errBusy, NotHeld: errNotHeld,
	}, recipe.DefaultNodeData())
	if err != nil {
		t.Fatal(err)
	}
	return reentrant.New(lk)
}

// Take with the context Enter returned counts on a handle that holds
// (without it, Take refuses or waits), Release counts down and deletes the
// node at zero, and every error carries the recipe's own sentinel as well
// as the engine's.
func TestHandleCountsAndLabels(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := newGate(t, zktest.Client(t, srv.Addr()), path)
	b := newGate(t, zktest.Client(t, srv.Addr()), path)

	if err := a.Err(); !errors.Is(err, errNotHeld) || !errors.Is(err, recipe.ErrNotHeld) {
		t.Fatalf("Err before any Take = %v, want the recipe's not-held sentinel", err)
	}
	hctx, err := a.Enter(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := a.Take(hctx, true); err != nil || h != recipe.Held(a) {
		t.Fatalf("Take with the context Enter returned = %v, %v; want the handle itself", h, err)
	}
	if _, err := a.Take(ctx, false); !errors.Is(err, errBusy) {
		t.Fatalf("Take without waiting and without the hold's context = %v, want the recipe's would-block sentinel", err)
	}
	node, token := a.Node(), a.Token()
	if node == "" || token == 0 {
		t.Fatalf("holding: node %q token %d", node, token)
	}
	if _, err := b.Take(ctx, false); !errors.Is(err, errBusy) || !errors.Is(err, recipe.ErrWouldBlock) {
		t.Fatalf("Take without waiting while held elsewhere = %v, want the recipe's would-block sentinel", err)
	}
	must(t, a.Release(ctx)) // count 2 -> 1: still held
	if err := a.Err(); err != nil || a.Node() != node {
		t.Fatalf("after one of two Releases: Err %v, node %q (was %q)", err, a.Node(), node)
	}
	must(t, a.Release(ctx)) // 1 -> 0: the node goes
	if err := a.Release(ctx); !errors.Is(err, errNotHeld) {
		t.Fatalf("a third Release = %v, want the recipe's not-held sentinel", err)
	}
	if _, err := b.Take(ctx, false); err != nil {
		t.Fatalf("b after a let go: %v", err)
	}
	if b.Token() <= token {
		t.Fatalf("b's token %d is not above a's %d", b.Token(), token)
	}
	must(t, b.Release(ctx))

	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if _, err := a.Take(short, true); !errors.Is(err, errNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Take with an ended context = %v, want the recipe's not-acquired sentinel and the context's error", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A context carries one hold per handle: several handles' holds side by
// side, the inner one of a handle replacing the outer.
func TestCarried(t *testing.T) {
	type owner struct{ int }
	a, b := &owner{1}, &owner{2}
	ha, hb, hb2 := new(int), new(int), new(int)
	ctx := reentrant.WithHold(context.Background(), a, ha)
	ctx = reentrant.WithHold(ctx, b, hb)
	inner := reentrant.WithHold(ctx, b, hb2)
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		owner any
		want  any
	}{
		{"nothing carried", context.Background(), a, nil},
		{"first handle", ctx, a, ha},
		{"second handle", ctx, b, hb},
		{"inner replaces outer", inner, b, hb2},
		{"other handles kept", inner, a, ha},
		{"an equal but distinct owner", ctx, &owner{1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reentrant.Carried(tc.ctx, tc.owner); got != tc.want {
				t.Fatalf("Carried = %v, want %v", got, tc.want)
			}
		})
	}
}

// Goroutines sharing a handle take turns: a Take waits for the handle's
// hold to be released (and gives up with its context), never holds beside
// it, and every waiter gets its turn; a loss reads "gate <path>: ...".
func TestHandleTakeWaitsForItsTurn(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := newGate(t, zktest.Client(t, srv.Addr()), path)

	must(t, func() error { _, err := h.Take(ctx, true); return err }())
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := h.Take(short, true); !errors.Is(err, errNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take while the handle holds, until its deadline = %v, want not acquired and the deadline", err)
	}
	const takers, rounds = 3, 4
	var inside, most atomic.Int32
	errs := make(chan error, takers)
	for range takers {
		go func() {
			for range rounds {
				if _, err := h.Take(ctx, true); err != nil {
					errs <- err
					return
				}
				most.Store(max(most.Load(), inside.Add(1)))
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := h.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	time.Sleep(20 * time.Millisecond) // the takers wait on the hold
	must(t, h.Release(ctx))
	for range takers {
		must(t, <-errs)
	}
	if most.Load() != 1 {
		t.Fatalf("%d takers held at once through one handle, want 1", most.Load())
	}

	must(t, func() error { _, err := h.Take(ctx, true); return err }())
	if err := zktest.Connect(t, srv.Addr()).Delete(path+"/"+h.Node(), -1); err != nil {
		t.Fatal(err)
	}
	if err := h.Err(); err == nil {
		for end := time.Now().Add(10 * time.Second); h.Err() == nil && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := h.Err(); !errors.Is(err, recipe.ErrLost) || !strings.HasPrefix(err.Error(), "gate "+path+": ") {
		t.Fatalf("Err after the node was deleted = %v, want a loss labelled %q", err, "gate "+path)
	}
	if err := h.Release(ctx); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("Release of the lost hold = %v, want the loss", err)
	}
}
