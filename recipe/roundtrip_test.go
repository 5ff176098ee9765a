package recipe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// An uncontended acquire waits for one round trip in every recipe: the
// listing of the queue (and the semaphore's read of its lease count) is
// sent behind the create, on the same connection, and answered with it.
// With every reply 100 ms late, the best of three acquires takes one delay
// and less than two.
func TestUncontendedAcquireIsOneRoundTrip(t *testing.T) {
	srv := zktest.Shared(t)
	const delay = 100 * time.Millisecond
	for name, newHandle := range kinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := locktest.Client(t, []string{srv.Addr()}, recipe.WithDialer(locktest.SlowDialer(delay)))
			h := newHandle(t, c, zktest.UniquePath(t))
			ctx := locktest.Ctx(t, 30*time.Second)
			must(t, h.acquire(ctx)) // creates the lock's directory
			must(t, h.release(ctx))
			best := time.Hour
			for range 3 {
				start := time.Now()
				must(t, h.acquire(ctx))
				best = min(best, time.Since(start))
				must(t, h.release(ctx))
			}
			t.Logf("uncontended acquire with replies %v late: %v", delay, best.Round(time.Millisecond))
			if best < delay || best >= 2*delay {
				t.Fatalf("uncontended acquire took %v with replies %v late: want one round trip", best, delay)
			}
		})
	}
}

// After an acquire that found the lock taken, the next acquire sends its
// listing once the create is answered (two round trips): a waiter gains
// nothing from the early listing, and without it the server answers the
// waiter being handed the lock sooner. An acquire that finds the lock free
// makes the next one a single round trip again.
func TestBusyLockListsAfterCreate(t *testing.T) {
	srv := zktest.Shared(t)
	const delay = 100 * time.Millisecond
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	holder, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
	must(t, err)
	slow, err := mutex.New(locktest.Client(t, []string{srv.Addr()}, recipe.WithDialer(locktest.SlowDialer(delay))), path)
	must(t, err)
	timed := func() time.Duration {
		start := time.Now()
		must(t, slow.Lock(ctx))
		d := time.Since(start)
		must(t, slow.Unlock(ctx))
		return d
	}
	timed() // creates the lock's directory
	// The best of three trials: a loaded machine slows single acquires
	// down, never speeds one up past the replies' delay.
	free, afterTaken, freeAgain := time.Hour, time.Hour, time.Hour
	for range 3 {
		free = min(free, timed())
		must(t, holder.Lock(ctx))
		if err := slow.TryLock(ctx); !errors.Is(err, recipe.ErrWouldBlock) {
			t.Fatalf("TryLock while held: %v, want ErrWouldBlock", err)
		}
		must(t, holder.Unlock(ctx))
		afterTaken = min(afterTaken, timed())
		freeAgain = min(freeAgain, timed())
	}
	t.Logf("replies %v late: free lock %v, after finding it taken %v, free again %v", delay,
		free.Round(time.Millisecond), afterTaken.Round(time.Millisecond), freeAgain.Round(time.Millisecond))
	if free >= 2*delay {
		t.Fatalf("free lock: acquire took %v with replies %v late, want one round trip", free, delay)
	}
	if afterTaken < 2*delay || afterTaken >= 3*delay {
		t.Fatalf("after finding the lock taken: acquire took %v with replies %v late, want two round trips", afterTaken, delay)
	}
	if freeAgain >= 2*delay {
		t.Fatalf("after finding the lock free again: acquire took %v with replies %v late, want one round trip", freeAgain, delay)
	}
}
