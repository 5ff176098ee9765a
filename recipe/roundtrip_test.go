package recipe_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/internal/zktest"
	"github.com/zkrecipes/zkrecipes/recipe"
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
