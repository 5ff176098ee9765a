package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// scenario is one thing to measure.
type scenario struct {
	id        string // short name, used by -only, in paths and in JSON
	title     string // name in the report
	contended bool   // -sessions sessions on one lock; else one session
	// open sets up the scenario's sessions on a fresh path.
	open func(ctx context.Context, e *env, path string) (*bench, error)

	// Scenarios that measure themselves (peers in their own processes,
	// leader hand-offs, the lost-reply run) set run instead of open: it
	// measures one round on a fresh path. They run after the interleaved
	// uncontended scenarios, one group at a time, the order within a group
	// rotating from round to round, and not in the warm-up round.
	run func(ctx context.Context, e *env, path string) (result, error)
	// group names the scenarios compared with each other; "" for those
	// of the default suite.
	group string
	// sessions overrides the number of sessions shown in the report.
	sessions int
	// kind says how to read the result: "" for lock cycles, kindHandoff,
	// kindLostReply, or the scale suite's kindEntity and kindDrain.
	kind string
	// scale measures a scenario of the scale suite, size by size.
	scale *scaleRun
}

// bench is an opened scenario, ready to be measured.
type bench struct {
	// cycle runs one cycle of an uncontended scenario.
	cycle func(ctx context.Context) error
	// lockers are the handles of a contended scenario, one per session.
	lockers []locker
	// count reports what the clients did so far; nil if they do not count.
	count counter
	// close closes the sessions. It may be called more than once, and
	// concurrently: a contended measurement calls it to make blocked
	// Lock calls return when it must stop early.
	close func()
}

// counter reports the running totals of what a scenario's clients did.
type counter func() recipe.Stats

// locker is one session's handle on a contended lock.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// Scenario ids.
const (
	idFloor           = "floor"
	idZkLock          = "zklock"
	idMutex           = "mutex"
	idZkLockContended = "zklock-contended"
	idMutexContended  = "mutex-contended"
	idSemaphore       = "semaphore"
	idSemContended    = "semaphore-contended"
	idRWLockReadHeavy = "rwlock-readheavy"
	idMutexNoSample   = "mutex-traced-never"
	idMutexSampled    = "mutex-traced-always"
)

// semLeases is the number of leases of the semaphore scenarios.
const semLeases = 3

// rwReadShare is the share of reads in the read-heavy rwlock scenario.
const rwReadShare = 0.9

// suites are the sets of scenarios -suite selects.
var suites = map[string]func() []scenario{
	"default": defaultScenarios,
	"peers":   peerSuite,
	"scale":   scaleSuite,
	"service": serviceSuite,
}

// allScenarios returns every scenario of every suite.
func allScenarios() []scenario {
	seen := map[string]bool{}
	var out []scenario
	for _, s := range slices.Concat(defaultScenarios(), peerSuite(), scaleSuite(), serviceSuite()) {
		if !seen[s.id] {
			seen[s.id] = true
			out = append(out, s)
		}
	}
	return out
}

// defaultScenarios is what the runner measures without -suite.
func defaultScenarios() []scenario {
	return []scenario{
		{id: idFloor, title: "floor: create+list+delete", open: openFloor},
		{id: idZkLock, title: "zk.Lock uncontended", open: openZkLock},
		{id: idMutex, title: "mutex uncontended", open: openMutex},
		{id: idZkLockContended, title: "zk.Lock contended", contended: true, open: openZkLockContended},
		{id: idMutexContended, title: "mutex contended", contended: true, open: openMutexContended},
		{id: idMutexNoSample, title: "mutex, tracing sampling nothing", open: openMutexTraced(sdktrace.NeverSample())},
		{id: idMutexSampled, title: "mutex, tracing sampling all", open: openMutexTraced(sdktrace.AlwaysSample())},
		{id: idSemaphore, title: "semaphore(3) uncontended", open: openSemaphore},
		{id: idSemContended, title: "semaphore(3) contended", contended: true, open: openSemaphoreContended},
		{id: idRWLockReadHeavy, title: "rwlock 90% reads", contended: true, open: openRWLockReadHeavy},
	}
}

// scenarioIDs lists the scenario ids, comma-separated.
func scenarioIDs() string {
	var ids []string
	for _, s := range allScenarios() {
		ids = append(ids, s.id)
	}
	return strings.Join(ids, ", ")
}

// selectScenarios returns the scenarios of suite named in only
// (comma-separated ids), in their usual order, or all of them when only is
// empty.
func selectScenarios(suite, only string) ([]scenario, error) {
	mk, ok := suites[suite]
	if !ok {
		return nil, fmt.Errorf("-suite: unknown suite %q (default, peers, scale, service)", suite)
	}
	all := mk()
	if only == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		want[strings.TrimSpace(id)] = true
	}
	var out []scenario
	for _, s := range all {
		if want[s.id] {
			out = append(out, s)
			delete(want, s.id)
		}
	}
	for id := range want {
		return nil, fmt.Errorf("-only: no scenario %q in suite %s", id, suite)
	}
	return out, nil
}

// openFloor cycles the three requests every lock cycle needs at least:
// create an ephemeral sequential node, list the directory (to find out
// whether the node is first), delete the node.
func openFloor(ctx context.Context, e *env, path string) (*bench, error) {
	if err := e.mkdirAll(path); err != nil {
		return nil, err
	}
	conn, err := e.rawConn(ctx)
	if err != nil {
		return nil, err
	}
	acl := zk.WorldACL(zk.PermAll)
	prefix := path + "/lock-"
	var cycles atomic.Int64 // cycles started; each sends 3 requests
	return &bench{
		cycle: func(context.Context) error {
			cycles.Add(1)
			p, err := conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, acl)
			if err != nil {
				return fmt.Errorf("create: %w", err)
			}
			if _, _, err := conn.Children(path); err != nil {
				return fmt.Errorf("children: %w", err)
			}
			if err := conn.Delete(p, -1); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			return nil
		},
		count: func() recipe.Stats {
			n := cycles.Load()
			return recipe.Stats{Creates: n, Lists: n, Deletes: n}
		},
		close: conn.Close,
	}, nil
}

// openZkLock cycles go-zookeeper's zk.Lock on one session. go-zookeeper
// does not count requests, so only the server's count is reported.
func openZkLock(ctx context.Context, e *env, path string) (*bench, error) {
	b, err := openZkLockers(ctx, e, path, 1)
	if err != nil {
		return nil, err
	}
	b.cycle = cycleOf(b.lockers[0])
	return b, nil
}

// openMutex cycles this module's mutex on one session.
func openMutex(ctx context.Context, e *env, path string) (*bench, error) {
	b, err := openMutexes(ctx, e, path, 1)
	if err != nil {
		return nil, err
	}
	b.cycle = cycleOf(b.lockers[0])
	return b, nil
}

// openZkLockContended cycles zk.Lock on -sessions sessions at once.
func openZkLockContended(ctx context.Context, e *env, path string) (*bench, error) {
	return openZkLockers(ctx, e, path, e.cfg.sessions)
}

// openMutexContended cycles the mutex on -sessions sessions at once.
func openMutexContended(ctx context.Context, e *env, path string) (*bench, error) {
	return openMutexes(ctx, e, path, e.cfg.sessions)
}

// zkLocker adapts go-zookeeper's zk.Lock, which takes no context.
type zkLocker struct{ l *zk.Lock }

// Lock acquires the lock; ctx is not used.
func (z zkLocker) Lock(context.Context) error { return z.l.Lock() }

// Unlock releases the lock; ctx is not used.
func (z zkLocker) Unlock(context.Context) error { return z.l.Unlock() }

// openZkLockers opens n go-zookeeper sessions with a zk.Lock on path each.
func openZkLockers(ctx context.Context, e *env, path string, n int) (*bench, error) {
	return openZkLockersWith(ctx, e, path, n, func(_ *zk.Conn, l *zk.Lock) locker { return zkLocker{l} })
}

// openZkLockersWith is openZkLockers with the locker mk makes of each
// session and its zk.Lock.
func openZkLockersWith(ctx context.Context, e *env, path string, n int, mk func(*zk.Conn, *zk.Lock) locker) (*bench, error) {
	if err := e.mkdirAll(path); err != nil {
		return nil, err
	}
	conns := make([]*zk.Conn, 0, n)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	b := &bench{}
	for range n {
		conn, err := e.rawConn(ctx)
		if err != nil {
			closeAll()
			return nil, err
		}
		conns = append(conns, conn)
		b.lockers = append(b.lockers, mk(conn, zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))))
	}
	b.close = closeAll
	return b, nil
}

// openMutexes opens n recipe clients with a mutex on path each.
func openMutexes(ctx context.Context, e *env, path string, n int) (*bench, error) {
	return openMutexesWith(ctx, e, path, n, nil)
}

// openMutexesWith is openMutexes with client options.
func openMutexesWith(ctx context.Context, e *env, path string, n int, opts []recipe.Option) (*bench, error) {
	return openRecipeWith(ctx, e, path, n, opts, func(c *recipe.Client, _ int) (locker, error) {
		return mutex.New(c, path)
	})
}

// openMutexTraced cycles the mutex on one session whose client traces
// with an SDK tracer provider using sampler; sampled spans are exported to
// a batching processor with an exporter that discards them, so the cost
// measured is the library's and the SDK's, not an exporter's I/O.
func openMutexTraced(sampler sdktrace.Sampler) func(context.Context, *env, string) (*bench, error) {
	return func(ctx context.Context, e *env, path string) (*bench, error) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler),
			sdktrace.WithBatcher(discardExporter{}))
		b, err := openRecipeWith(ctx, e, path, 1, []recipe.Option{recipe.WithTracerProvider(tp)},
			func(c *recipe.Client, _ int) (locker, error) { return mutex.New(c, path) })
		if err != nil {
			_ = tp.Shutdown(context.Background())
			return nil, err
		}
		b.cycle = cycleOf(b.lockers[0])
		closeClients := b.close
		b.close = func() {
			closeClients()
			_ = tp.Shutdown(context.Background())
		}
		return b, nil
	}
}

// discardExporter drops every span.
type discardExporter struct{}

// ExportSpans drops the spans.
func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }

// Shutdown does nothing.
func (discardExporter) Shutdown(context.Context) error { return nil }

// openSemaphore cycles a semaphore's lease on one session.
func openSemaphore(ctx context.Context, e *env, path string) (*bench, error) {
	b, err := openSemaphores(ctx, e, path, 1)
	if err != nil {
		return nil, err
	}
	b.cycle = cycleOf(b.lockers[0])
	return b, nil
}

// openSemaphoreContended cycles leases on -sessions sessions at once.
func openSemaphoreContended(ctx context.Context, e *env, path string) (*bench, error) {
	return openSemaphores(ctx, e, path, e.cfg.sessions)
}

func openSemaphores(ctx context.Context, e *env, path string, n int) (*bench, error) {
	return openRecipe(ctx, e, path, n, func(c *recipe.Client, _ int) (locker, error) {
		s, err := semaphore.New(c, path, semLeases)
		if err != nil {
			return nil, err
		}
		return &semLocker{s: s}, nil
	})
}

// semLocker adapts a semaphore to locker: Lock takes a lease, Unlock
// releases it. One goroutine uses it at a time.
type semLocker struct {
	s     *semaphore.Semaphore
	lease *semaphore.Lease
}

// Lock takes a lease.
func (l *semLocker) Lock(ctx context.Context) (err error) {
	l.lease, err = l.s.Acquire(ctx)
	return err
}

// Unlock releases the lease.
func (l *semLocker) Unlock(ctx context.Context) error { return l.lease.Release(ctx) }

// openRWLockReadHeavy cycles a read/write lock on -sessions sessions, each
// cycle a read with probability rwReadShare, else a write.
func openRWLockReadHeavy(ctx context.Context, e *env, path string) (*bench, error) {
	return openRecipe(ctx, e, path, e.cfg.sessions, func(c *recipe.Client, i int) (locker, error) {
		rw, err := rwlock.New(c, path)
		if err != nil {
			return nil, err
		}
		return &rwLocker{rw: rw, rng: rand.New(rand.NewPCG(uint64(i), 7))}, nil
	})
}

// rwLocker adapts a read/write lock to locker: each Lock picks read or
// write at random. One goroutine uses it at a time.
type rwLocker struct {
	rw   *rwlock.RWLock
	rng  *rand.Rand
	read bool
}

// Lock takes the read lock with probability rwReadShare, else the write lock.
func (l *rwLocker) Lock(ctx context.Context) error {
	l.read = l.rng.Float64() < rwReadShare
	if l.read {
		return l.rw.RLock(ctx)
	}
	return l.rw.Lock(ctx)
}

// Unlock releases what Lock took.
func (l *rwLocker) Unlock(ctx context.Context) error {
	if l.read {
		return l.rw.RUnlock(ctx)
	}
	return l.rw.Unlock(ctx)
}

// openRecipe opens n recipe clients with a locker made by mk on each.
func openRecipe(ctx context.Context, e *env, path string, n int, mk func(*recipe.Client, int) (locker, error)) (*bench, error) {
	return openRecipeWith(ctx, e, path, n, nil, mk)
}

// openRecipeWith is openRecipe with client options.
func openRecipeWith(ctx context.Context, e *env, path string, n int, opts []recipe.Option, mk func(*recipe.Client, int) (locker, error)) (*bench, error) {
	clients := make([]*recipe.Client, 0, n)
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	b := &bench{}
	for i := range n {
		c, err := e.client(ctx, opts...)
		if err != nil {
			closeAll()
			return nil, err
		}
		clients = append(clients, c)
		l, err := mk(c, i)
		if err != nil {
			closeAll()
			return nil, err
		}
		b.lockers = append(b.lockers, l)
	}
	b.count = func() recipe.Stats {
		var sum recipe.Stats
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
	b.close = closeAll
	return b, nil
}

// cycleOf returns a Lock+Unlock cycle of l.
func cycleOf(l locker) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := l.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}
}
