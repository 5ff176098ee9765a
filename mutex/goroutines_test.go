package mutex_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Two goroutines sharing one handle never both hold: the second Lock waits
// for the first goroutine's Unlock, then queues and holds with a new node
// and a greater token; a TryLock meanwhile fails at once without I/O.
func TestTwoGoroutinesOneHandle(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	m := newMutex(t, c, zktest.UniquePath(t))
	ctx := locktest.Ctx(t, 30*time.Second)

	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first, node := m.Token(), m.Node()
	second := make(chan error, 1)
	go func() { second <- m.Lock(ctx) }()
	select {
	case err := <-second:
		t.Fatalf("a second goroutine's Lock on the held handle returned %v while the first holds", err)
	case <-time.After(500 * time.Millisecond):
	}

	m.Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
	locktest.Settle(t, c)
	before := c.Stats()
	tryErr := make(chan error, 1)
	go func() { tryErr <- m.TryLock(ctx) }()
	if err := <-tryErr; !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock from a third goroutine while the handle holds = %v, want ErrLocked", err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("TryLock on a handle held locally made %d round trips, want 0", got)
	}

	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second goroutine's Lock after the first let go: %v", err)
	}
	if m.Token() <= first || m.Node() == node {
		t.Fatalf("second hold: token %d node %q; want a new node with a token above %d", m.Token(), m.Node(), first)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Err(); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("after both Unlocks, Err = %v; want ErrNotHeld", err)
	}
}

// Goroutines sharing one handle, each locking and unlocking in a loop,
// are never inside together (on every hold the handle queues anew).
func TestSharedHandleExcludes(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	m := newMutex(t, c, zktest.UniquePath(t))
	ctx := locktest.Ctx(t, 60*time.Second)
	var in locktest.Overlap
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				in.Enter()
				time.Sleep(time.Millisecond)
				in.Exit()
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if v := in.Violations(); v != 0 {
		t.Fatalf("%d times two goroutines sharing a handle were inside together", v)
	}
}

// A call chain that passes down the context Enter returned re-enters
// without a round trip, contexts derived from it too; the node goes with
// the last Unlock; a context of an earlier hold re-enters nothing.
func TestEnterReentersWithoutRoundTrip(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	path := zktest.UniquePath(t)
	m := newMutex(t, c, path)
	other := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 30*time.Second)

	hctx, err := m.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Done()
	locktest.Settle(t, c)
	before := c.Stats()
	var chain func(ctx context.Context, depth int) error
	chain = func(ctx context.Context, depth int) error {
		if depth == 0 {
			return nil
		}
		sub, cancel := context.WithTimeout(ctx, 10*time.Second) // derived: still carries the hold
		defer cancel()
		if err := m.Lock(sub); err != nil {
			return err
		}
		defer func() { _ = m.Unlock(sub) }()
		if err := m.TryLock(sub); err != nil {
			return err
		}
		if err := m.Unlock(sub); err != nil {
			return err
		}
		return chain(sub, depth-1)
	}
	if err := chain(hctx, 3); err != nil {
		t.Fatalf("reentrant call chain: %v", err)
	}
	again, err := m.Enter(hctx)
	if err != nil || again != hctx {
		t.Fatalf("Enter with a context carrying the hold = %v, %v; want the same context", again, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("reentrant calls made %d round trips, want 0", got)
	}
	if err := other.TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock elsewhere while the chain's outer hold is kept = %v, want ErrLocked", err)
	}
	if err := m.Unlock(ctx); err != nil { // the outer hold: the node goes
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("one Unlock more than holds = %v, want ErrNotHeld", err)
	}

	// A new hold taken with a plain context: the old context is stale.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(hctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock with the context of an earlier hold = %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(hctx, 200*time.Millisecond)
	defer cancel()
	if err := m.Lock(short); !errors.Is(err, mutex.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with the context of an earlier hold = %v, want a wait ended by its deadline", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock elsewhere after every Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// An Unlock from another goroutine while the handle's first acquire is
// still waiting in line finds nothing held and releases nothing.
func TestUnlockDuringAcquire(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	holder := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	m := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 30*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(ctx) }()
	locktest.Queued(t, 2, holder.Participants)
	if err := m.Unlock(ctx); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("Unlock while the handle's acquire waits = %v, want ErrNotHeld", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("the acquire's hold after the stray Unlock: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
