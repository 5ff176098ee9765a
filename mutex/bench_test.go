package mutex_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// These benchmarks run against the test binary's shared server, which does
// not fsync (see zktest.WithForceSync): they measure the client's cost
// and loopback round trips, not disk latency. For realistic write latency
// and side-by-side ratios, run `go run ./internal/bench`
// (docs/performance.md).

// benchSessions is the number of sessions of the contended benchmark.
const benchSessions = 8

// benchTimeout bounds a whole benchmark function.
const benchTimeout = 10 * time.Minute

// warmUp is how long a benchmark cycles before it measures, so that a
// freshly started server's JIT compiler has done its work.
const warmUp = 500 * time.Millisecond

// warm runs cycle until warmUp has passed.
func warm(b *testing.B, cycle func() error) {
	for start := time.Now(); time.Since(start) < warmUp; {
		if err := cycle(); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
}

// lockCycle locks and unlocks m, failing the benchmark on error.
func lockCycle(ctx context.Context, b *testing.B, m *mutex.Mutex) {
	if err := cycleErr(ctx, m); err != nil {
		b.Fatal(err)
	}
}

// cycleErr locks and unlocks m.
func cycleErr(ctx context.Context, m *mutex.Mutex) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(ctx)
}

// reportRoundTrips reports the requests the clients sent between before
// and now, per operation.
func reportRoundTrips(b *testing.B, n int, before recipe.Stats, now recipe.Stats) {
	d := now.Sub(before)
	b.ReportMetric(float64(d.RoundTrips())/float64(n), "roundtrips/op")
	b.ReportMetric(float64(d.Lists+d.Reads)/float64(n), "reads/op")
	if d.Retries != 0 {
		b.Errorf("%d operations were retried after connection loss", d.Retries)
	}
}

// Lock+Unlock on one session, nobody else on the path: create, list and
// read (in parallel), delete.
func BenchmarkLockUnlockUncontended(b *testing.B) {
	srv := zktest.Shared(b)
	c := locktest.Client(b, []string{srv.Addr()})
	m := newMutex(b, c, zktest.UniquePath(b))
	ctx := locktest.Ctx(b, benchTimeout)
	warm(b, func() error { return cycleErr(ctx, m) })
	before := c.Stats()
	b.ReportAllocs()
	for b.Loop() {
		lockCycle(ctx, b, m)
	}
	reportRoundTrips(b, b.N, before, c.Stats())
}

// Every create's reply is lost: the proxy cuts the connection right after
// forwarding it, so every cycle crosses a reconnect, finds its node again by
// its UUID and goes on. cycle-p50-ms and cycle-p99-ms are the percentiles of
// a whole Lock+Unlock cycle; recovered/op counts nodes found again.
func BenchmarkLostCreateReply(b *testing.B) {
	srv := zktest.Shared(b)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	c := locktest.Client(b, []string{proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	m := newMutex(b, c, zktest.UniquePath(b))
	ctx := locktest.Ctx(b, benchTimeout)
	lockCycle(ctx, b, m) // creates the directory, whose reply is not lost
	proxy.CutAfterCreates(1)
	defer proxy.CutAfterCreates(0)
	before := c.Stats()
	var cycles []time.Duration
	for b.Loop() {
		t := time.Now()
		lockCycle(ctx, b, m)
		cycles = append(cycles, time.Since(t))
	}
	d := c.Stats().Sub(before)
	b.ReportMetric(float64(d.Recovered)/float64(b.N), "recovered/op")
	slices.Sort(cycles)
	pct := func(p float64) float64 {
		return float64(cycles[min(int(p*float64(len(cycles))), len(cycles)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "cycle-p50-ms")
	b.ReportMetric(pct(0.99), "cycle-p99-ms")
}

// benchSessions goroutines, each with its own session and handle on one
// path, cycle Lock+Unlock. ns/op is the wall time per cycle of all
// sessions together (the inverse of the throughput); lock-p50-ms and
// lock-p99-ms are percentiles of the time a Lock call waits.
func BenchmarkLockUnlockContended(b *testing.B) {
	srv := zktest.Shared(b)
	path := zktest.UniquePath(b)
	// A failed cycle cancels ctx, so that no session waits for a node
	// that its failed owner left behind.
	ctx, cancel := context.WithCancel(locktest.Ctx(b, benchTimeout))
	defer cancel()
	procs := runtime.GOMAXPROCS(0)
	parallelism := (benchSessions + procs - 1) / procs
	goroutines := parallelism * procs // RunParallel's count; benchSessions when procs divides it
	var (
		clients []*recipe.Client
		handles []*mutex.Mutex
	)
	for range goroutines {
		c := locktest.Client(b, []string{srv.Addr()})
		clients = append(clients, c)
		handles = append(handles, newMutex(b, c, path))
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	for _, m := range handles {
		wg.Go(func() { warm(b, func() error { return cycleErr(ctx, m) }) })
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	stats := func() (sum recipe.Stats) {
		for _, c := range clients {
			s := c.Stats()
			sum.Creates += s.Creates
			sum.Deletes += s.Deletes
			sum.Lists += s.Lists
			sum.Reads += s.Reads
			sum.Wakeups += s.Wakeups
			sum.Retries += s.Retries
		}
		return sum
	}
	var (
		next    atomic.Int32
		mu      sync.Mutex
		waits   []time.Duration
		failure atomic.Pointer[error]
	)
	before := stats()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := handles[int(next.Add(1)-1)%len(handles)]
		var mine []time.Duration
		defer func() {
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		}()
		for pb.Next() {
			t := time.Now()
			if err := m.Lock(ctx); err != nil {
				failure.CompareAndSwap(nil, &err)
				cancel()
				return
			}
			mine = append(mine, time.Since(t))
			if err := m.Unlock(ctx); err != nil {
				failure.CompareAndSwap(nil, &err)
				cancel()
				return
			}
		}
	})
	b.StopTimer()
	if p := failure.Load(); p != nil {
		b.Fatal(*p)
	}
	after := stats()
	reportRoundTrips(b, b.N, before, after)
	b.ReportMetric(float64(after.Sub(before).Wakeups)/float64(b.N), "wakeups/op")
	if len(waits) > 0 {
		slices.Sort(waits)
		pct := func(p float64) float64 {
			i := min(int(p*float64(len(waits))), len(waits)-1)
			return float64(waits[i]) / float64(time.Millisecond)
		}
		b.ReportMetric(pct(0.50), "lock-p50-ms")
		b.ReportMetric(pct(0.99), "lock-p99-ms")
	}
}

// The least a lock cycle costs, with raw go-zookeeper on one session:
// create an ephemeral sequential node, list the directory, delete the node.
func BenchmarkFloorCreateListDelete(b *testing.B) {
	srv := zktest.Shared(b)
	conn := zktest.Connect(b, srv.Addr())
	dir := zktest.UniquePath(b)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/zktest", dir} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			b.Fatalf("create %s: %v", p, err)
		}
	}
	b.Cleanup(func() { _ = conn.Delete(dir, -1) })
	prefix := dir + "/lock-"
	cycle := func() error {
		p, err := conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			return err
		}
		if _, _, err := conn.Children(dir); err != nil {
			return err
		}
		return conn.Delete(p, -1)
	}
	warm(b, cycle)
	b.ReportAllocs()
	for b.Loop() {
		if err := cycle(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(3, "roundtrips/op")
}

// Lock+Unlock on a handle that already holds the lock only counts: no I/O.
func BenchmarkReentrantLock(b *testing.B) {
	srv := zktest.Shared(b)
	c := locktest.Client(b, []string{srv.Addr()})
	m := newMutex(b, c, zktest.UniquePath(b))
	ctx := locktest.Ctx(b, benchTimeout)
	if err := m.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	before := c.Stats()
	b.ReportAllocs()
	for b.Loop() {
		lockCycle(ctx, b, m)
	}
	reportRoundTrips(b, b.N, before, c.Stats())
	if err := m.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}
