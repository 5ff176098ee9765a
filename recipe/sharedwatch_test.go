package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A waiter that gives up behind a holder leaves its watch on the holder's
// node to its client, and the waiters that come after join that watch
// instead of setting one each: however many give up, one watch per path
// is kept. A waiter that joined is woken by the holder's release as a
// waiter with a watch of its own is, and after its session expired it
// enqueues again and is granted.
func TestSharedWatchOfWaitersThatGaveUp(t *testing.T) {
	for _, expire := range []bool{false, true} {
		t.Run(fmt.Sprintf("expire=%v", expire), func(t *testing.T) {
			srv := zktest.Shared(t)
			path := zktest.UniquePath(t)
			raw := zktest.Connect(t, srv.Addr())
			holderC := zktest.Client(t, srv.Addr())
			h, err := newLock(t, holderC, path).Acquire(locktest.Ctx(t, 30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			p := srv.Proxy(t)
			c := p.Client(t, recipe.WithSessionTimeout(4*time.Second))
			giveUp := func(i int) {
				short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, err := newLock(t, c, path).Acquire(short)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("attempt %d behind the holder: %v, want its deadline", i, err)
				}
			}
			// The first attempt that set its watch before its deadline
			// leaves it (under load, an attempt may end before).
			for i := 0; ; i++ {
				giveUp(i)
				if n, _ := recipe.SharedWatches(c); n == 1 {
					break
				}
				if i == 9 {
					t.Fatal("no attempt of 10 left its watch to the client")
				}
			}
			for i := range 4 {
				giveUp(i)
				if n, subs := recipe.SharedWatches(c); n != 1 || subs != 0 {
					t.Fatalf("after attempt %d: %d shared watches, %d subscribers; want 1 and 0", i, n, subs)
				}
			}
			got := make(chan error, 1)
			go func() {
				h, err := newLock(t, c, path).Acquire(locktest.Ctx(t, 30*time.Second))
				if err == nil {
					err = h.Release(context.Background())
				}
				got <- err
			}()
			locktest.Eventually(t, 10*time.Second, "the waiter joined the shared watch", func() bool {
				_, subs := recipe.SharedWatches(c)
				return subs == 1
			})
			if expire {
				if _, err := p.ExpireSessions(); err != nil {
					t.Fatal(err)
				}
				// The watch ended with the session: the waiter enqueues
				// again with a watch of its own.
				locktest.Eventually(t, 10*time.Second, "the waiter enqueued again", func() bool {
					names := locktest.Children(t, raw, path)
					n, _ := recipe.SharedWatches(c)
					return len(names) == 2 && n == 0
				})
			}
			released := time.Now()
			if err := h.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("granted %v after the release", time.Since(released).Round(time.Millisecond))
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not granted within 5s of the release")
			}
		})
	}
}
