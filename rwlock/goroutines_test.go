package rwlock_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Goroutines sharing one read/write lock handle: a writer is never inside
// with another writer or with a reader; readers may share.
func TestSharedHandleExcludes(t *testing.T) {
	srv := zktest.Shared(t)
	rw := newRW(t, locktest.Client(t, []string{srv.Addr()}), zktest.UniquePath(t))
	ctx := locktest.Ctx(t, 60*time.Second)
	var readers, writers, bad atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 8 {
				if (g+i)%2 == 0 {
					if err := rw.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
					time.Sleep(time.Millisecond)
					writers.Add(-1)
					if err := rw.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if err := rw.RLock(ctx); err != nil {
					t.Error(err)
					return
				}
				readers.Add(1)
				if writers.Load() != 0 {
					bad.Add(1)
				}
				time.Sleep(time.Millisecond)
				readers.Add(-1)
				if err := rw.RUnlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d times a goroutine wrote beside another holder of the shared handle", n)
	}
}
