package reentrant_test

import (
	"context"
	"errors"
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
