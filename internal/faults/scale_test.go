package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Targets of the scale tests. A waiter is a mutex handle and the goroutine
// blocked in its Lock call: the goroutine is the caller's, so one per
// waiter is the floor, and the engine must add none while waiting.
const (
	// idleWorkers is how many of its request workers an open client keeps
	// parked after a burst (recipe's maxIdleWorkers): they are not a leak.
	idleWorkers = 4

	maxGoroutinesPerWaiter = 1.5
	maxHeapPerWaiter       = 4 << 10

	// maxHeapPerWatchedHold is the heap a hold may cost, with its handle,
	// once its loss signal or a context was asked for. The target is
	// 2,000 B; a hold asked for a context measures about 1,360 B (with
	// its handle; the derived context, its entry among its parent's
	// children and the channel Done makes are about 240 B of it), so the
	// bound keeps what handles sharing their kind saved.
	maxHeapPerWatchedHold = 1600
)

// memSnapshot is the heap in use after a full collection, and the
// number of goroutines.
type memSnapshot struct {
	heap       uint64
	stack      uint64
	goroutines int
}

func snapshot() memSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

func perUnit(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

// waitersResult is what queueing waiters cost while they all waited.
type waitersResult struct {
	heapPer, stackPer, goroutinesPer float64
}

// runWaiters queues waiters handles on one mutex held by another handle,
// the handles spread over sessions clients; while they all wait it
// measures the heap and goroutines they cost; then it releases the lock
// and checks that every waiter gets it, in the order of its node's
// sequence number (FIFO), and that the directory ends empty.
func runWaiters(t *testing.T, sessions, waiters int) waitersResult {
	t.Helper()
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	clients := make([]*recipe.Client, sessions)
	for i := range clients {
		clients[i] = locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	}
	holder, err := mutex.New(clients[0], path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	readsBefore := sumStats(clients).Reads
	before := snapshot()

	handles := make([]*mutex.Mutex, waiters)
	for i := range handles {
		if handles[i], err = mutex.New(clients[i%sessions], path); err != nil {
			t.Fatal(err)
		}
	}
	var (
		grantMu sync.Mutex
		grants  []int64
		failed  atomic.Int32
		wg      sync.WaitGroup
	)
	start := time.Now()
	for _, m := range handles {
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				failed.Add(1)
				t.Errorf("Lock: %v", err)
				return
			}
			seq, ok := driver.Sequence(m.Node(), mutex.LockName)
			if !ok {
				t.Errorf("node %q has no sequence", m.Node())
			}
			grantMu.Lock()
			grants = append(grants, seq)
			grantMu.Unlock()
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
		})
	}
	// Every waiter is queued and watching once the directory has all the
	// nodes and each waiter armed the watch on its predecessor (waiters
	// whose whole queue is known also watch their own node).
	locktest.Eventually(t, 2*time.Minute, "every waiter queued and watching", func() bool {
		n, _, err := raw.Children(path)
		return err == nil && len(n) == waiters+1 && sumStats(clients).Reads-readsBefore >= int64(waiters)
	})
	queued := time.Since(start)
	time.Sleep(300 * time.Millisecond) // let the last calls' goroutines end
	during := snapshot()
	r := waitersResult{
		heapPer:       perUnit(during.heap, before.heap, waiters),
		stackPer:      perUnit(during.stack, before.stack, waiters),
		goroutinesPer: float64(during.goroutines-before.goroutines) / float64(waiters),
	}
	t.Logf("%d waiters on %d session(s) queued in %v: heap %.0f B/waiter, stack %.0f B/waiter, %.2f goroutines/waiter",
		waiters, sessions, queued.Round(time.Millisecond), r.heapPer, r.stackPer, r.goroutinesPer)

	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("all %d waiters held and released in turn in %v", waiters, time.Since(released).Round(time.Millisecond))
	if failed.Load() > 0 {
		t.FailNow()
	}
	if len(grants) != waiters {
		t.Fatalf("%d grants, want %d", len(grants), waiters)
	}
	for i := 1; i < len(grants); i++ {
		if grants[i] <= grants[i-1] {
			t.Fatalf("grant %d went to sequence %d after %d: not FIFO", i, grants[i], grants[i-1])
		}
	}
	if left, err := faults.WaitEmpty(raw, path, 10*time.Second); err != nil || len(left) > 0 {
		t.Fatalf("left in %s: %v (%v)", path, left, err)
	}
	return r
}

// 1,000 waiters on one mutex, their handles sharing one session or spread
// over 50: all acquire, in FIFO order; each costs at most
// maxGoroutinesPerWaiter goroutines while waiting. The heap they cost is
// reported; its target is checked by TestWaiterHeapIndependentOfQueue.
func TestScaleWaiters(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions int
	}{
		{"one_session", 1},
		{"50_sessions", 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runWaiters(t, tc.sessions, 1000)
			if r.goroutinesPer > maxGoroutinesPerWaiter {
				t.Errorf("%.2f goroutines per waiter, want at most %v", r.goroutinesPer, maxGoroutinesPerWaiter)
			}
		})
	}
}

// A waiter's heap does not grow with the queue ahead of it: it keeps only
// the window of the queue it watches (from its first watched node to its
// own), and lists again after a change in it. Target: at most
// maxHeapPerWaiter per waiter at 1,000 waiters, and not much more than at
// 200.
func TestWaiterHeapIndependentOfQueue(t *testing.T) {
	small := runWaiters(t, 1, 200)
	large := runWaiters(t, 1, 1000)
	if large.heapPer > maxHeapPerWaiter {
		t.Errorf("%.0f heap bytes per waiter with 1,000 waiters, want at most %d", large.heapPer, maxHeapPerWaiter)
	}
	if large.heapPer > 2*small.heapPer+1024 {
		t.Errorf("heap per waiter grows with the queue: %.0f B at 200 waiters, %.0f B at 1,000", small.heapPer, large.heapPer)
	}
}

func sumStats(cs []*recipe.Client) recipe.Stats {
	var s recipe.Stats
	for _, c := range cs {
		st := c.Stats()
		s.Reads += st.Reads
		s.Creates += st.Creates
		s.Lists += st.Lists
		s.Deletes += st.Deletes
		s.Writes += st.Writes
		s.Commits += st.Commits
	}
	return s
}

// One session holds 10,000 distinct mutexes at once, then releases them:
// afterwards no node is left, the goroutines are back to where they were
// (but for the client's idle workers) and so, after a collection, is the heap (within heapSlack per 10,000 locks: maps that
// grew, such as go-zookeeper's table of watches, keep their buckets).
// Each lock is a directory of its own, created on first use and reaped by
// the server once empty.
func TestScaleManyLocks(t *testing.T) {
	const (
		workers   = 32
		heapSlack = 2 << 20
	)
	locks := 10000 // SCALE_LOCKS for more (make scale: 100,000)
	if v := os.Getenv("SCALE_LOCKS"); v != "" {
		var err error
		if locks, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	parent := zktest.UniquePath(t)
	sessions := scaleSize(t, "SCALE_LOCK_SESSIONS", 1) // the locks spread over this many clients
	cs := make([]*recipe.Client, sessions)
	for i := range cs {
		cs[i] = locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute*time.Duration(max(1, locks/10000)))
	defer cancel()
	// The runtime keeps the descriptors of ended goroutines for reuse and
	// never frees them: create as many as the test will need at its peak
	// (a hold monitor per lock) before the baseline, so that the
	// comparison shows what the library keeps, not the runtime's pool.
	warmGoroutines(locks + 1000)
	before := snapshot()

	handles := make([]*mutex.Mutex, locks)
	for i := range handles {
		m, err := mutex.New(cs[i%sessions], fmt.Sprintf("%s/l%05d", parent, i))
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = m
	}
	each := func(what string, fn func(m *mutex.Mutex) error) time.Duration {
		start := time.Now()
		next := atomic.Int64{}
		var failed atomic.Int32
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(locks) || failed.Load() > 0 {
						return
					}
					if err := fn(handles[i]); err != nil {
						if failed.Add(1) == 1 {
							t.Errorf("%s %s: %v", what, handles[i].Path(), err)
						}
						return
					}
				}
			})
		}
		wg.Wait()
		if failed.Load() > 0 {
			t.FailNow()
		}
		return time.Since(start)
	}
	perLock := func(st recipe.Stats) string {
		return fmt.Sprintf("%.2f requests/lock (%.2f creates, %.2f lists, %.2f reads, %.2f deletes)",
			float64(st.RoundTrips())/float64(locks), float64(st.Creates)/float64(locks), float64(st.Lists)/float64(locks),
			float64(st.Reads)/float64(locks), float64(st.Deletes)/float64(locks))
	}
	start := sumStats(cs)
	took := each("Lock", func(m *mutex.Mutex) error { return m.Lock(ctx) })
	held := snapshot()
	t.Logf("%d locks held by %d session(s) after %v, %s; nobody asking for their loss signal: heap %.0f B/lock, %.2f goroutines/lock",
		locks, sessions, took.Round(time.Millisecond), perLock(sumStats(cs).Sub(start)), perUnit(held.heap, before.heap, locks),
		float64(held.goroutines-before.goroutines)/float64(locks))
	// An idle hold nobody asks about has no goroutine of its own (the
	// client's workers aside, at most maxIdleWorkers of them).
	if g := float64(held.goroutines-before.goroutines) / float64(locks); g > 0.01 {
		t.Errorf("%.2f goroutines per idle hold, want none", g)
	}
	stats := sumStats(cs)
	for _, m := range handles[:locks/2] {
		m.Done() // asked: each hold watches its node
	}
	locktest.Eventually(t, time.Minute, "the first half watching its node", func() bool {
		return sumStats(cs).Sub(stats).Reads >= int64(locks/2)
	})
	cancels := make([]context.CancelFunc, 0, locks/2) // the test's, before the snapshot
	var halfDone memSnapshot
	locktest.Eventually(t, 2*time.Minute, "the reads' goroutines ended", func() bool {
		halfDone = snapshot()
		return halfDone.goroutines <= held.goroutines+idleWorkers*sessions
	})
	for _, m := range handles[locks/2:] {
		hctx, cancel := m.Context(ctx) // asked for its context, which it watches
		cancels = append(cancels, cancel)
		_ = hctx.Done() // the channel is made, as by anyone who selects on it
	}
	locktest.Eventually(t, time.Minute, "every hold watching its node", func() bool {
		return sumStats(cs).Sub(stats).Reads >= int64(locks)
	})
	var watched memSnapshot
	locktest.Eventually(t, 2*time.Minute, "the reads' goroutines ended", func() bool {
		watched = snapshot()
		return watched.goroutines <= held.goroutines+idleWorkers*sessions
	})
	heapWatched := perUnit(watched.heap, before.heap, locks)
	goWatched := float64(watched.goroutines-before.goroutines) / float64(locks)
	t.Logf("the same, half asked for their loss signal (Done), half for a context (Context): heap %.0f B/lock, %.3f goroutines/lock, %d reads",
		heapWatched, goWatched, sumStats(cs).Sub(stats).Reads)
	// What asking costs, on top of a held lock, each way.
	heldPer := perUnit(held.heap, before.heap, locks)
	heapDone := heldPer + perUnit(halfDone.heap, held.heap, locks/2)
	heapCtx := heldPer + perUnit(watched.heap, halfDone.heap, locks/2)
	t.Logf("heap per hold asked for Done: %.0f B; asked for a context: %.0f B", heapDone, heapCtx)
	if max(heapDone, heapCtx) > maxHeapPerWatchedHold {
		t.Errorf("heap per hold %.0f B (Done) and %.0f B (Context), want at most %d", heapDone, heapCtx, maxHeapPerWatchedHold)
	}
	if goWatched > 0.01 {
		t.Errorf("%.3f goroutines per watched hold, want at most 0.01", goWatched)
	}
	if heapWatched > maxHeapPerWatchedHold {
		t.Errorf("%.0f heap bytes per watched hold, want at most %d", heapWatched, maxHeapPerWatchedHold)
	}
	for _, cancel := range cancels {
		cancel()
	}
	start = sumStats(cs)
	took = each("Unlock", func(m *mutex.Mutex) error { return m.Unlock(ctx) })
	t.Logf("released in %v, %s", took.Round(time.Millisecond), perLock(sumStats(cs).Sub(start)))
	handles = nil

	if left := countNodes(t, raw, parent); left != 0 {
		t.Errorf("%d lock nodes left after every lock was released", left)
	}
	var after memSnapshot
	locktest.Eventually(t, 10*time.Second, "the goroutines back to the baseline", func() bool {
		after = snapshot()
		return after.goroutines <= before.goroutines+(idleWorkers+1)*sessions // and each client's dispatch of node events
	})
	grown := int64(after.heap) - int64(before.heap)
	t.Logf("after release: goroutines %d (baseline %d), heap %+d B (%.1f B/lock)",
		after.goroutines, before.goroutines, grown, float64(grown)/float64(locks))
	if slack := heapSlack * int64(max(1, locks/10000)); grown > slack {
		t.Errorf("heap grew by %d B after every lock was released, want at most %d", grown, slack)
	}
}

// warmGoroutines starts n goroutines at once and lets them end.
func warmGoroutines(n int) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { <-release })
	}
	close(release)
	wg.Wait()
}

// countNodes counts the lock nodes in the directories under parent.
func countNodes(t *testing.T, raw *zk.Conn, parent string) int {
	t.Helper()
	dirs, _, err := raw.Children(parent)
	if err != nil {
		t.Fatalf("children of %s: %v", parent, err)
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for d := range work {
				left, err := faults.ListNodes(raw, parent+"/"+d)
				if err != nil {
					t.Errorf("list %s: %v", d, err)
					continue
				}
				total.Add(int64(len(left)))
			}
		})
	}
	for _, d := range dirs {
		work <- d
	}
	close(work)
	wg.Wait()
	return int(total.Load())
}

// AcquireN is linear in n: one transaction creates the n nodes, one
// listing and one read verify them all, and the driver decides for each
// at its index in the shared listing. On a semaphore of 2^20 leases,
// AcquireN(n) for n up to 8,000 (SCALE_ACQUIREN_MAX; 1,000 by default)
// takes the same requests whatever n, and AcquireN(8,000) under a second.
func TestScaleAcquireN(t *testing.T) {
	maxN := 1000
	if os.Getenv("SCALE_ACQUIREN_MAX") != "" {
		var err error
		if maxN, err = strconv.Atoi(os.Getenv("SCALE_ACQUIREN_MAX")); err != nil {
			t.Fatal(err)
		}
	}
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	// A short path and node data, so that 8,000 creates fit in one
	// request of ZooKeeper's default 1 MiB.
	path := fmt.Sprintf("/an%x", time.Now().UnixNano()&0xffffff)
	s, err := semaphore.New(c, path, 1<<20, semaphore.WithData([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.AcquireN(ctx, 1); err != nil { // the directory exists from now on
		t.Fatal(err)
	}
	var took []time.Duration
	var ns []int
	for _, n := range []int{10, 100, 1000, 8000} {
		if n > maxN {
			break
		}
		before := c.Stats()
		start := time.Now()
		leases, err := s.AcquireN(ctx, n)
		d := time.Since(start)
		if err != nil {
			t.Fatalf("AcquireN(%d): %v", n, err)
		}
		st := c.Stats().Sub(before)
		t.Logf("AcquireN(%d) on 2^20 leases: %v, requests: %d create (one transaction), %d list, %d reads (a node, the directory's data)",
			n, d.Round(time.Millisecond), st.Creates, st.Lists, st.Reads)
		if st.Creates != 1 || st.Lists != 1 || st.Reads != 2 || st.Writes+st.Deletes != 0 {
			t.Errorf("AcquireN(%d): %d creates, %d lists, %d reads, %d writes, %d deletes; want 1, 1, 2, 0, 0",
				n, st.Creates, st.Lists, st.Reads, st.Writes, st.Deletes)
		}
		took, ns = append(took, d), append(ns, n)
		for _, l := range leases {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The server's share: the same transaction of creates sent raw, in
	// the same run. On a loaded machine it alone can take most of a
	// second for 8,000 nodes (one write of 1 MiB to the transaction log).
	last := len(ns) - 1
	raw := zktest.Connect(t, srv.Addr())
	ops := make([]any, ns[last])
	for i := range ops {
		ops[i] = &zk.CreateRequest{Path: path + "/_c_00000000-0000-0000-0000-000000000000-lease-", Data: []byte("x"),
			Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral | zk.FlagSequence}
	}
	start := time.Now()
	if _, err := raw.Multi(ops...); err != nil {
		t.Fatal(err)
	}
	server := time.Since(start)
	t.Logf("the same transaction of %d creates sent raw: %v; AcquireN's own share: %v",
		ns[last], server.Round(time.Millisecond), (took[last] - server).Round(time.Millisecond))
	if ns[last] == 8000 && took[last] > time.Second && took[last]-server > 500*time.Millisecond {
		t.Errorf("AcquireN(8000) took %v, %v more than its transaction alone; want under 1 s", took[last], took[last]-server)
	}
	// About linear: from the first size measured past 100 to the last, the
	// time grows no faster than n (with room for noise).
	for i := range ns {
		if ns[i] < 1000 || i == 0 {
			continue
		}
		if ratio, grow := float64(took[i])/float64(took[i-1]), float64(ns[i])/float64(ns[i-1]); ratio > 2*grow {
			t.Errorf("AcquireN(%d) took %.1fx AcquireN(%d), for %.0fx the nodes", ns[i], ratio, ns[i-1], grow)
		}
	}
}

// Participants is linear in the queue and honours its context: the
// queue of a mutex of 5,000 nodes (SCALE_PARTICIPANTS; 100,000 in make
// scale) is read and judged within 2 s (2 s per 10,000 beyond), and a
// context that ends early ends the call at once. Each node is one read,
// so the server's pace of reads bounds the call: the same reads made
// with go-zookeeper alone, as many in flight, are timed in the same run,
// and Participants may take at most twice as long (and a second: the
// race detector slows our side, not the server's).
// participantQueue makes a mutex queue of n nodes: a holder on c, then
// n-1 nodes made over raw; ctx ends with the test, within 5 minutes.
func participantQueue(t *testing.T, n int) (ctx context.Context, raw *zk.Conn, c *recipe.Client, m *mutex.Mutex, path string) {
	t.Helper()
	srv := zktest.Shared(t)
	raw = zktest.Connect(t, srv.Addr())
	c = locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	path = zktest.UniquePath(t)
	m, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	if err := m.Lock(ctx); err != nil { // the directory, and its first node
		t.Fatal(err)
	}
	fillQueue(t, raw, path+"/_c_00000000-0000-0000-0000-000000000000-lock-", n-1)
	return ctx, raw, c, m, path
}

func TestScaleParticipants(t *testing.T) {
	n := 5000 // CI runs it with the race detector
	if v := os.Getenv("SCALE_PARTICIPANTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, raw, c, m, path := participantQueue(t, n)
	before := c.Stats()
	start := time.Now()
	ps, err := m.Participants(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats().Sub(before)
	t.Logf("Participants of %d nodes: %v, %d list, %d reads", n, took.Round(time.Millisecond), st.Lists, st.Reads)
	if len(ps) != n || !ps[0].Holder || ps[0].Node != m.Node() || ps[n-1].Holder {
		t.Fatalf("%d participants, first %+v", len(ps), ps[0])
	}
	// Each node is one read, so the server's pace of reads bounds the
	// call: it is judged against the same reads made in the same run.
	floor := rawReads(t, raw, path, 64)
	t.Logf("the same %d reads made with go-zookeeper alone, 64 in flight: %v (%.0f reads/s); Participants took %.2fx that",
		n, floor.Round(time.Millisecond), float64(n)/floor.Seconds(), float64(took)/float64(floor))
	if took > floor*2+time.Second {
		t.Errorf("Participants of %d nodes took %v, the reads alone %v", n, took, floor)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	start = time.Now()
	_, err = m.Participants(short)
	took = time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) && err != nil {
		t.Fatalf("Participants with a 50ms context: %v", err)
	}
	t.Logf("Participants with a 50ms context: returned after %v: %v", took.Round(time.Millisecond), err)
	if err != nil && took > 500*time.Millisecond {
		t.Errorf("Participants returned %v after its context ended", took-50*time.Millisecond)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// ParticipantNodes is one listing however long the queue: a mutex queue
// of 20,000 nodes (SCALE_PARTICIPANTS; 100,000 in make scale) is listed,
// ordered and judged in one request. The server's listing bounds the
// call: the same listing made with go-zookeeper alone is timed in the same
// run, and ParticipantNodes may take at most four times as long and
// 400 ms: filtering, sorting and judging each node, which the race
// detector slows several times more than go-zookeeper's decoding of the
// listing (20,000 nodes: 110-250 ms against 16-36 ms, where a read per
// node would be seconds, and a quadratic judgement minutes). With
// SCALE_PARTICIPANTS set, each call must also end within 2 s.
func TestScaleParticipantNodes(t *testing.T) {
	n := scaleSize(t, "SCALE_PARTICIPANTS", 20000)
	ctx, raw, c, m, path := participantQueue(t, n)
	locktest.Settle(t, c)

	// The server's share: the same listing with go-zookeeper alone, on a
	// connection of its own, timed before and after each call; each side
	// is judged by the faster of its two (the first listing of a
	// directory this size can take several times the next).
	rawList := func() time.Duration {
		start := time.Now()
		names, _, err := raw.Children(path)
		if err != nil || len(names) != n {
			t.Fatalf("raw listing: %d names, %v", len(names), err)
		}
		return time.Since(start)
	}
	raws := []time.Duration{rawList()}
	var calls []time.Duration
	var nodes []recipe.ParticipantNode
	var st recipe.Stats
	var err error
	for range 2 {
		before := c.Stats()
		start := time.Now()
		nodes, err = m.ParticipantNodes(ctx)
		calls = append(calls, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		st = c.Stats().Sub(before)
		raws = append(raws, rawList())
	}
	took, floor := min(calls[0], calls[1]), min(raws[0], raws[1], raws[2])
	t.Logf("ParticipantNodes of %d nodes: %v, then %v; %d list, %d requests in all; the same listing with go-zookeeper alone: %v, %v, %v; ParticipantNodes took %.2fx that (best of each)",
		n, calls[0].Round(time.Millisecond), calls[1].Round(time.Millisecond), st.Lists, st.RoundTrips(),
		raws[0].Round(time.Millisecond), raws[1].Round(time.Millisecond), raws[2].Round(time.Millisecond), float64(took)/float64(floor))
	if st.Lists != 1 || st.RoundTrips() != 1 {
		t.Errorf("ParticipantNodes: %d lists, %d requests; want one listing and nothing else", st.Lists, st.RoundTrips())
	}
	if len(nodes) != n || !nodes[0].Holder || nodes[0].Node != m.Node() || nodes[1].Holder || nodes[n-1].Holder {
		t.Fatalf("%d nodes, first %+v, second %+v; want %d, the mutex's node holding and no other", len(nodes), nodes[0], nodes[1], n)
	}
	for i := 1; i < n; i++ {
		if nodes[i].Sequence <= nodes[i-1].Sequence {
			t.Fatalf("node %d (%s) after %s: not in queue order", i, nodes[i].Node, nodes[i-1].Node)
		}
	}
	if took > 4*floor+400*time.Millisecond {
		t.Errorf("ParticipantNodes of %d nodes took %v, the listing alone %v", n, took, floor)
	}
	if os.Getenv("SCALE_PARTICIPANTS") != "" && n <= 100000 && max(calls[0], calls[1]) > 2*time.Second {
		t.Errorf("ParticipantNodes of %d nodes took %v and %v; want each within 2 s", n, calls[0], calls[1])
	}

	short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
	defer cancelShort()
	start := time.Now()
	_, err = m.ParticipantNodes(short)
	took = time.Since(start)
	t.Logf("ParticipantNodes with a 1ms context: returned after %v: %v", took.Round(time.Millisecond), err)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ParticipantNodes with a 1ms context: %v", err)
	}
	if err != nil && took > floor+100*time.Millisecond {
		t.Errorf("ParticipantNodes returned %v after its context ended", took-time.Millisecond)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// fillQueue creates n ephemeral sequential nodes named prefix (one byte of
// data each) with go-zookeeper alone, in transactions of 4,000 creates.
func fillQueue(t *testing.T, raw *zk.Conn, prefix string, n int) {
	t.Helper()
	const batch = 4000
	for made := 0; made < n; made += batch {
		ops := make([]any, min(batch, n-made))
		for i := range ops {
			ops[i] = &zk.CreateRequest{Path: prefix, Data: []byte("x"),
				Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral | zk.FlagSequence}
		}
		if _, err := raw.Multi(ops...); err != nil {
			t.Fatalf("creating nodes %d..: %v", made, err)
		}
	}
}

// rawReads reads every child of dir with go-zookeeper alone, inFlight
// reads at a time, and returns how long that took.
func rawReads(t *testing.T, raw *zk.Conn, dir string, inFlight int) time.Duration {
	t.Helper()
	names, _, err := raw.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(names)) {
					return
				}
				if _, _, err := raw.Get(dir + "/" + names[i]); err != nil {
					t.Errorf("read %s: %v", names[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// scaleSize is the size a scale test runs at: def, or the environment
// variable env (make scale sets the largest sizes).
func scaleSize(t *testing.T, env string, def int) int {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", env, v)
	}
	return n
}

// A client that checks the ACL of its lock directories checks a
// directory once, however many handles acquire there: 2,000 handles
// (SCALE_HANDLES; 20,000 in make scale), made one after another on one
// directory, each locking and unlocking once, cost the requests of a
// client that does not check, and leave the heap as it was (the client
// keeps one entry and one watch for the directory, not one per handle).
func TestScaleDirectoryACLHandles(t *testing.T) {
	n := scaleSize(t, "SCALE_HANDLES", 2000)
	srv := zktest.Shared(t)
	auth := []recipe.Option{recipe.WithSessionTimeout(10 * time.Second), recipe.WithDigestAuth("alice", "secret"),
		recipe.WithACL(zk.DigestACL(zk.PermAll, "alice", "secret")...)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type result struct {
		took       time.Duration
		heapPer    float64
		st         recipe.Stats
		goroutines int
	}
	// The directory, persistent (so never reaped and checked again), and
	// alice's only; its parent open, so that the client creates nothing
	// with alice's ACL that other tests of the server would need.
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	parent := zktest.UniquePath(t)
	for i := 1; i <= len(parent); i++ {
		if i == len(parent) || parent[i] == '/' {
			if _, err := raw.Create(parent[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
	}
	dirs := 0
	t.Cleanup(func() {
		for i := range dirs {
			_ = raw.Delete(fmt.Sprintf("%s/l%d", parent, i), -1)
		}
		_ = raw.Delete(parent, -1)
	})
	run := func(c *recipe.Client) result {
		path := fmt.Sprintf("%s/l%d", parent, dirs)
		dirs++
		if _, err := raw.Create(path, nil, 0, zk.DigestACL(zk.PermAll, "alice", "secret")); err != nil {
			t.Fatal(err)
		}
		cycle := func() {
			m, err := mutex.New(c, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cycle() // the check of the directory's ACL
		before := snapshot()
		stats := c.Stats()
		start := time.Now()
		for range n {
			cycle()
		}
		took := time.Since(start)
		st := c.Stats().Sub(stats)
		after := snapshot()
		return result{took, perUnit(after.heap, before.heap, n), st, after.goroutines - before.goroutines}
	}
	checked := run(locktest.Client(t, []string{srv.Addr()}, auth...))
	plain := run(locktest.Client(t, []string{srv.Addr()}, append(auth, recipe.WithAnyDirectoryACL())...))
	for _, r := range []struct {
		name string
		result
	}{{"checking the directory's ACL", checked}, {"WithAnyDirectoryACL", plain}} {
		t.Logf("%d handles on one directory, one Lock and Unlock each, %s: %v, heap kept %+.0f B/handle, "+
			"%.2f reads and %.2f requests per handle",
			n, r.name, r.took.Round(time.Millisecond), r.heapPer, float64(r.st.Reads)/float64(n),
			float64(r.st.RoundTrips())/float64(n))
	}
	if checked.st.Reads > plain.st.Reads || checked.st.RoundTrips() > plain.st.RoundTrips() {
		t.Errorf("%d handles: %d reads, %d requests checking the ACL; %d, %d without", n,
			checked.st.Reads, checked.st.RoundTrips(), plain.st.Reads, plain.st.RoundTrips())
	}
	// What a handle leaves behind once dropped: nothing per handle.
	if checked.heapPer > 32 {
		t.Errorf("%.0f B of heap kept per handle dropped, want at most 32", checked.heapPer)
	}
}

// Attempts that time out behind one long holder leave little behind:
// 1,000 of them (SCALE_ATTEMPTS; 6,000 in make scale), 32 at a time
// (SCALE_ATTEMPTS_AT_ONCE; 1 in make scale, each right behind the holder),
// each queued behind the holder (of another client) until its context of
// 20ms ended. Once their nodes are gone, the heap is measured against the
// baseline while the holder still holds, and again once it left.
func TestScaleTimedOutAttempts(t *testing.T) {
	n := scaleSize(t, "SCALE_ATTEMPTS", 1000)
	workers := scaleSize(t, "SCALE_ATTEMPTS_AT_ONCE", 32)
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	holder, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	attempt := func() {
		m, err := mutex.New(c, path)
		if err != nil {
			t.Error(err)
			return
		}
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if err := m.Lock(short); !errors.Is(err, mutex.ErrNotAcquired) {
			t.Errorf("Lock behind a holder: %v, want ErrNotAcquired", err)
		}
	}
	attempt() // the client's first wait: its dispatch, its workers
	warmGoroutines(workers + 100)
	nodesLeft := func() int {
		names, err := faults.ListNodes(raw, path)
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	locktest.Eventually(t, time.Minute, "the first attempt's node gone", func() bool { return nodesLeft() == 1 })
	before := snapshot()
	stats := c.Stats()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && !t.Failed() {
				attempt()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	locktest.Eventually(t, time.Minute, "every timed-out attempt's node gone", func() bool { return nodesLeft() == 1 })
	var after memSnapshot
	locktest.Eventually(t, time.Minute, "the attempts' goroutines ended", func() bool {
		after = snapshot()
		return after.goroutines <= before.goroutines+idleWorkers
	})
	st := c.Stats().Sub(stats)
	heapPer := perUnit(after.heap, before.heap, n)
	t.Logf("%d attempts timed out behind one holder in %v: heap kept %+.0f B/attempt (%+.0f KiB in all), "+
		"%.2f requests per attempt", n, took.Round(time.Millisecond), heapPer,
		(float64(after.heap)-float64(before.heap))/1024, float64(st.RoundTrips())/float64(n))
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	released := snapshot()
	heapReleased := perUnit(released.heap, before.heap, n)
	t.Logf("after the holder left: heap %+.0f B/attempt against the baseline", heapReleased)
	// The attempts that waited right behind the holder leave their watch
	// on its node to the client, and the next ones join it: one watch on
	// the path is kept, not one per attempt (go-zookeeper v1.0.4 cannot
	// remove a watch). What grows is the room of the tables, a few
	// dozen KiB whatever n; before, each attempt kept about 187 B.
	if heapPer > 128 || heapReleased > 128 {
		t.Errorf("heap kept %.0f B per timed-out attempt (%.0f B once the holder left), want at most 128", heapPer, heapReleased)
	}
}
