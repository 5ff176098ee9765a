package faults_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// burstQueueBound is how long a burst of waiters from one client may take
// to queue: every Lock call's node created.
const burstQueueBound = 10 * time.Second

// A burst of concurrent Lock calls from one client on one path, while a
// second client (in the same process) holds the lock: every call queues
// (its node is created) within burstQueueBound; the holder keeps its lock;
// the burst's client keeps trusting its session (no epoch ends, no call
// fails, with errNoTrustedSession or anything else); the requests and the
// allocation per waiter are reported and bounded (the waiters share their
// listings of the directory, so neither grows with the queue). Then every
// call is cancelled: each returns ErrNotAcquired with the context's error,
// no node is left but the holder's, and no goroutine is left behind.
//
// 2,000 waiters in the normal run; SCALE_BURST sets the number (make
// scale: 10,000).
func TestScaleBurstOneClient(t *testing.T) {
	waiters := 2000
	if v := os.Getenv("SCALE_BURST"); v != "" {
		var err error
		if waiters, err = strconv.Atoi(v); err != nil || waiters < 1 {
			t.Fatalf("SCALE_BURST=%q: want a positive number", v)
		}
	}
	const (
		// Each waiter creates its node and arms a watch on its
		// predecessor, and has a share of the listings (a listing each
		// would make 3).
		maxRequestsPerWaiter = 2.5
		// What a waiter allocates to queue, all of it garbage but for
		// its state while it waits: no listing of the whole queue each.
		maxAllocPerWaiter = 64 << 10
	)
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	if _, _, err := raw.Exists("/"); err != nil { // raw's loops are running
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()

	other := locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	holder, err := mutex.New(other, path)
	if err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithTimeout(context.Background(), time.Minute)
	defer hcancel()
	if err := holder.Lock(hctx); err != nil {
		t.Fatal(err)
	}
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := c.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocBefore := ms.TotalAlloc

	var (
		wg       sync.WaitGroup
		returned atomic.Int64
		errMu    sync.Mutex
		errs     []error
	)
	start := time.Now()
	for range waiters {
		wg.Go(func() {
			defer returned.Add(1)
			m, err := mutex.New(c, path)
			if err == nil {
				err = m.Lock(ctx)
			}
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		})
	}
	queued := func() bool {
		n, _, err := raw.Children(path)
		return err == nil && len(n) == waiters+1
	}
	for !queued() {
		if time.Since(start) > burstQueueBound {
			n, _, _ := raw.Children(path)
			t.Fatalf("%d of %d waiters queued after %v", len(n)-1, waiters, burstQueueBound)
		}
		if returned.Load() > 0 {
			break // reported below
		}
		time.Sleep(10 * time.Millisecond)
	}
	queueTime := time.Since(start)
	// Every waiter arms a watch on its predecessor once its node is known:
	// wait for them all, so that the requests counted are the whole cost
	// of queueing.
	locktest.Eventually(t, 2*time.Minute, "every waiter watching", func() bool {
		return c.Stats().Reads-before.Reads >= int64(waiters) || returned.Load() > 0
	})
	watching := time.Since(start)
	runtime.ReadMemStats(&ms)
	alloc := float64(ms.TotalAlloc-allocBefore) / float64(waiters)
	after := c.Stats()
	creates, lists, reads := after.Creates-before.Creates, after.Lists-before.Lists, after.Reads-before.Reads
	perWaiter := float64(creates+lists+reads) / float64(waiters)
	t.Logf("%d waiters from one client queued in %v, all watching in %v: %.2f requests per waiter (%d creates, %d listings, %d reads), %.0f B allocated per waiter, %d retries",
		waiters, queueTime.Round(time.Millisecond), watching.Round(time.Millisecond), perWaiter, creates, lists, reads, alloc,
		after.Retries-before.Retries)

	if n := returned.Load(); n > 0 {
		errMu.Lock()
		t.Fatalf("%d Lock calls returned while the lock was held, first with %v", n, errs[0])
	}
	if queueTime > burstQueueBound {
		t.Errorf("queued in %v, bound %v", queueTime, burstQueueBound)
	}
	if err := holder.Err(); err != nil {
		t.Errorf("the holder on the other client lost its lock during the burst: %v", err)
	}
	if ended := after.EpochsEnded - before.EpochsEnded; ended > 0 || after.Suspensions > before.Suspensions {
		t.Errorf("the burst's client stopped trusting its session: %d epochs ended, %d suspensions",
			ended, after.Suspensions-before.Suspensions)
	}
	if perWaiter > maxRequestsPerWaiter {
		t.Errorf("%.2f requests per waiter, want at most %v", perWaiter, maxRequestsPerWaiter)
	}
	if alloc > maxAllocPerWaiter {
		t.Errorf("%.0f B allocated per waiter, want at most %d", alloc, maxAllocPerWaiter)
	}

	cancelled := time.Now()
	cancel()
	wg.Wait()
	t.Logf("all %d calls returned %v after the cancel", waiters, time.Since(cancelled).Round(time.Millisecond))
	for _, err := range errs {
		if !errors.Is(err, recipe.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled Lock returned %v, want ErrNotAcquired and context.Canceled", err)
		}
		if strings.Contains(err.Error(), "no trusted session") {
			t.Fatalf("a Lock call failed with %v", err)
		}
	}
	// Only the holder's node is left once cleanup is done.
	locktest.Eventually(t, 30*time.Second, "the waiters' nodes deleted", func() bool {
		n, _, err := raw.Children(path)
		return err == nil && len(n) == 1
	})
	if err := holder.Err(); err != nil {
		t.Errorf("the holder lost its lock: %v", err)
	}
	if err := holder.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	if left, err := faults.WaitEmpty(raw, path, 10*time.Second); err != nil || len(left) > 0 {
		t.Fatalf("left in %s: %v (%v)", path, left, err)
	}
	c.Close()
	other.Close()
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left: %v", err)
	}
}
