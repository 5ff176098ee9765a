package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The scale suite (-suite scale) measures how the locks behave as the
// number of locks and of waiters grows:
//
//   - per-entity locks: one session, G goroutines (-goroutines), each
//     cycling Lock+Unlock on a lock of its own (its own lock directory),
//     for the floor, zk.Lock, our mutex and Curator's InterProcessMutex
//     (one CuratorFramework, G threads);
//   - queue drain: N waiters (-waiters) queued on one lock, spread over
//     drainSessions sessions, behind a holder; once all are queued, the
//     heap per waiter is read, then the holder unlocks and the queue
//     drains, each waiter unlocking as soon as it holds. Our mutex,
//     zk.Lock, Curator's InterProcessMutex and kazoo's Lock.
//
// Every round runs every implementation once per size, in an order that
// rotates from round to round; the per-entity rounds all come first and
// the queue drains after them, in a phase of their own, so that the
// drains' heap readings start from a process that has settled.

// Kinds of the scale suite's scenarios.
const (
	kindEntity = "entity" // per-entity locks
	kindDrain  = "drain"  // queue drain
)

// Groups of the scale suite.
const (
	groupEntity = "per-entity locks"
	groupDrain  = "queue drain"
)

// Implementations, as charts and tables name them.
const (
	implFloor   = "floor"
	implZkLock  = "zk.Lock"
	implMutex   = "mutex (ours)"
	implCurator = "Curator"
	implKazoo   = "kazoo"
)

// drainSessions is the number of sessions the waiters of a queue drain
// are spread over.
const drainSessions = 4

// Default sizes of the scale suite.
var (
	defaultGoroutines = []int{1, 16, 128, 512}
	defaultWaiters    = []int{10, 100, 1000}
)

// scaleRun is how a scale scenario measures one size.
type scaleRun struct {
	impl string
	// entity measures g goroutines on locks of their own under path.
	entity func(ctx context.Context, e *env, path string, g int) (result, error)
	// drain measures the drain of n waiters queued on path.
	drain func(ctx context.Context, e *env, path string, n int) (drainRound, error)
}

// scaleSuite is what -suite scale measures.
func scaleSuite() []scenario {
	ent := func(id, impl, title string, run func(context.Context, *env, string, int) (result, error)) scenario {
		return scenario{id: id, title: title, group: groupEntity, kind: kindEntity, scale: &scaleRun{impl: impl, entity: run}}
	}
	drn := func(id, impl, title string, run func(context.Context, *env, string, int) (drainRound, error)) scenario {
		return scenario{id: id, title: title, group: groupDrain, kind: kindDrain, scale: &scaleRun{impl: impl, drain: run}}
	}
	return []scenario{
		ent("entity-floor", implFloor, "floor: create+list+delete", goEntity(openEntityFloor)),
		ent("entity-zklock", implZkLock, "zk.Lock", goEntity(openEntityZkLock)),
		ent("entity-mutex", implMutex, "mutex", goEntity(openEntityMutex)),
		ent("entity-curator", implCurator, peerCurator+" InterProcessMutex", peerEntity(peerCurator)),

		drn("drain-mutex", implMutex, "mutex", goDrain(openDrainMutex)),
		drn("drain-zklock", implZkLock, "zk.Lock", goDrain(openDrainZkLock)),
		drn("drain-curator", implCurator, peerCurator+" InterProcessMutex", peerDrain(peerCurator)),
		drn("drain-kazoo", implKazoo, peerKazoo+" Lock", peerDrain(peerKazoo)),
	}
}

// parseSizes parses a comma-separated list of positive integers.
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sizesFlag is a flag.Value of comma-separated sizes.
type sizesFlag struct{ v *[]int }

func (f sizesFlag) String() string {
	if f.v == nil {
		return ""
	}
	var s string
	for i, n := range *f.v {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(n)
	}
	return s
}

func (f sizesFlag) Set(s string) error {
	v, err := parseSizes(s)
	if err != nil {
		return err
	}
	*f.v = v
	return nil
}

// runScale runs the scale suite's rounds against e and prints the report
// (and writes the charts, with -charts).
func runScale(ctx context.Context, e *env, scenarios []scenario, base, fsync string, out io.Writer, progress func(string, ...any)) error {
	cfg := e.cfg
	var ents, drains []scenario
	for _, s := range scenarios {
		if s.kind == kindEntity {
			ents = append(ents, s)
		} else {
			drains = append(drains, s)
		}
	}
	rep := newScaleReport(cfg, e.addr, fsync, e.serverVersion(), scenarios)
	for _, s := range drains {
		if s.id == "drain-mutex" || s.id == "drain-zklock" {
			// Before any goroutines of the suite end, so that few
			// descriptors are free.
			rep.Settings.Descriptor = descriptorOnce()
			break
		}
	}
	seq := 0
	next := func(kind string) string {
		seq++
		return fmt.Sprintf("%s/%s%d", base, kind, seq)
	}

	// An unmeasured pass first, so that the server's JIT compiler has done
	// its work before round 1: the in-process implementations at the
	// second number of goroutines (the only one, when there is one) and
	// the first number of waiters.
	warm := *e
	warm.cfg.duration = max(cfg.warmup, 500*time.Millisecond)
	for _, s := range ents {
		if s.id == "entity-curator" {
			continue
		}
		g := cfg.goroutines[min(1, len(cfg.goroutines)-1)]
		progress("warm-up: %s, %d goroutines", s.title, g)
		p := next("warm")
		if _, err := s.scale.entity(ctx, &warm, p, g); err != nil {
			return fmt.Errorf("warm-up, %s: %w", s.title, err)
		}
		e.removeTree(p)
	}
	for _, s := range drains {
		if s.id == "drain-mutex" || s.id == "drain-zklock" {
			progress("warm-up: %s drain, %d waiters", s.title, cfg.waiters[0])
			p := next("warm")
			if _, err := s.scale.drain(ctx, &warm, p, cfg.waiters[0]); err != nil {
				return fmt.Errorf("warm-up, %s drain: %w", s.title, err)
			}
			e.removeTree(p)
		}
	}

	for n := range cfg.rounds {
		label := fmt.Sprintf("round%d", n+1)
		for _, g := range cfg.goroutines {
			for i := range ents {
				s := ents[(i+n)%len(ents)]
				progress("%s: %s, %d goroutines", label, s.title, g)
				p := next("entity")
				res, err := s.scale.entity(ctx, e, p, g)
				if err != nil {
					return fmt.Errorf("%s, %s, %d goroutines: %w", label, s.title, g, err)
				}
				e.removeTree(p)
				rep.addEntity(s.id, g, res)
				progress("  %-28s %s", s.title, res.brief())
			}
		}
	}
	for n := range cfg.rounds {
		label := fmt.Sprintf("round%d", n+1)
		for _, w := range cfg.waiters {
			for i := range drains {
				s := drains[(i+n)%len(drains)]
				progress("%s: %s, %d waiters", label, s.title, w)
				p := next("drain")
				res, err := s.scale.drain(ctx, e, p, w)
				if err != nil {
					return fmt.Errorf("%s, %s drain, %d waiters: %w", label, s.title, w, err)
				}
				e.removeTree(p)
				rep.addDrain(s.id, w, res)
				progress("  %-28s %s", s.title, res.brief())
			}
		}
	}
	rep.finish()
	if cfg.charts != "" {
		files, err := rep.writeCharts(cfg.charts)
		if err != nil {
			return err
		}
		rep.Charts = files
		progress("charts: %v", files)
	}
	if cfg.json {
		return rep.writeJSON(out)
	}
	return rep.writeText(out)
}

// entityPaths returns the lock paths of g goroutines under path.
func entityPaths(path string, g int) []string {
	out := make([]string, g)
	for i := range out {
		out[i] = fmt.Sprintf("%s/e%d", path, i)
	}
	return out
}

// goEntity returns the per-entity run of an in-process implementation
// whose lockers (one per path, on one session) open makes.
func goEntity(open func(ctx context.Context, e *env, paths []string) (*bench, error)) func(context.Context, *env, string, int) (result, error) {
	return func(ctx context.Context, e *env, path string, g int) (result, error) {
		if err := e.mkdirAll(path); err != nil {
			return result{}, err
		}
		b, err := open(ctx, e, entityPaths(path, g))
		if err != nil {
			return result{}, err
		}
		defer b.close()
		return e.cycleAll(ctx, b), nil
	}
}

// peerEntity returns the per-entity run of a peer: one session, g threads,
// cycling unmeasured for -peer-warmup (a new JVM compiles Curator's code
// meanwhile; half a second leaves it at a fraction of its speed), then
// pausing (as cycleAll does) until the runner has read the request count,
// then measured.
func peerEntity(peer string) func(context.Context, *env, string, int) (result, error) {
	return func(ctx context.Context, e *env, path string, g int) (result, error) {
		if err := e.mkdirAll(path); err != nil {
			return result{}, err
		}
		out, packets, err := e.runPeer(ctx, peerRun{
			peer: peer,
			args: e.peerArgs("entity", path, 1, "-threads", strconv.Itoa(g),
				"-warmup-ms", ms64(e.cfg.peerWarmup), "-duration-ms", ms64(e.cfg.duration)),
			limit: peerStartLimit + e.cfg.peerWarmup + e.cfg.duration + 3*e.cfg.stall,
		})
		if err != nil {
			return result{}, err
		}
		return out.result(packets), nil
	}
}

// openEntityFloor opens one go-zookeeper session with a floor cycle on
// each path: create an EPHEMERAL_SEQUENTIAL child, list the directory,
// delete the child.
func openEntityFloor(ctx context.Context, e *env, paths []string) (*bench, error) {
	if err := e.mkdirs(paths); err != nil {
		return nil, err
	}
	conn, err := e.rawConn(ctx)
	if err != nil {
		return nil, err
	}
	var cycles atomic.Int64 // cycles started; each sends 3 requests
	b := &bench{
		count: func() recipe.Stats {
			n := cycles.Load()
			return recipe.Stats{Creates: n, Lists: n, Deletes: n}
		},
		close: conn.Close,
	}
	for _, p := range paths {
		b.lockers = append(b.lockers, &floorLocker{conn: conn, dir: p, prefix: p + "/lock-", cycles: &cycles})
	}
	return b, nil
}

// floorLocker is the floor's cycle as a locker: Lock creates the node and
// lists the directory, Unlock deletes the node. One goroutine uses it.
type floorLocker struct {
	conn        *zk.Conn
	dir, prefix string
	node        string
	cycles      *atomic.Int64
}

// Lock creates the node and lists the directory.
func (f *floorLocker) Lock(context.Context) error {
	f.cycles.Add(1)
	p, err := f.conn.Create(f.prefix, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f.node = p
	if _, _, err := f.conn.Children(f.dir); err != nil {
		return fmt.Errorf("children: %w", err)
	}
	return nil
}

// Unlock deletes the node.
func (f *floorLocker) Unlock(context.Context) error {
	if err := f.conn.Delete(f.node, -1); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// openEntityZkLock opens one go-zookeeper session with a zk.Lock on each
// path.
func openEntityZkLock(ctx context.Context, e *env, paths []string) (*bench, error) {
	if err := e.mkdirs(paths); err != nil {
		return nil, err
	}
	conn, err := e.rawConn(ctx)
	if err != nil {
		return nil, err
	}
	b := &bench{close: conn.Close}
	for _, p := range paths {
		b.lockers = append(b.lockers, zkLocker{zk.NewLock(conn, p, zk.WorldACL(zk.PermAll))})
	}
	return b, nil
}

// openEntityMutex opens one recipe client with a mutex on each path (whose
// directory the mutex creates, as in the default suite).
func openEntityMutex(ctx context.Context, e *env, paths []string) (*bench, error) {
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	b := &bench{close: func() { _ = c.Close() }, count: c.Stats}
	for _, p := range paths {
		m, err := mutex.New(c, p)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		b.lockers = append(b.lockers, m)
	}
	return b, nil
}

// cycleAll runs one goroutine per locker of b, each cycling Lock+Unlock:
// first for -warmup, then measured for -duration. It measures the
// goroutines' combined throughput (cycles started in the measured time)
// and the latency of whole cycles. A run in which no cycle completes for
// -stall ends as statusStalled, one in which a call fails as statusError;
// b is closed then, so that every blocked call returns.
//
// Between the warm-up and the measurement every goroutine pauses once its
// cycle is done, and the request counts are read while nothing is in
// flight; the second reading comes once every measured cycle has ended.
// So the requests counted are those of the measured cycles: with hundreds
// of cycles in flight, completing in bursts as the server syncs its log,
// counts read on the fly would be off by a burst.
func (e *env) cycleAll(ctx context.Context, b *bench) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		phase    atomic.Int32
		progress atomic.Int64
		paused   atomic.Int64
		resume   = make(chan struct{})
		wg       sync.WaitGroup
		lat      = make([][]time.Duration, len(b.lockers))
		failed   = make(chan struct{})
		failOnce sync.Once
		firstErr error
	)
	fail := func(err error) {
		failOnce.Do(func() {
			firstErr = err
			close(failed)
		})
	}
	phase.Store(phaseWarmup)
	for i, l := range b.lockers {
		wg.Go(func() {
			for {
				p := phase.Load()
				switch p {
				case phaseStop:
					return
				case phasePause:
					paused.Add(1)
					select {
					case <-resume:
					case <-ctx.Done():
						return
					}
					continue
				}
				t := time.Now()
				if err := l.Lock(ctx); err != nil {
					fail(fmt.Errorf("goroutine %d: lock: %w", i, err))
					return
				}
				if err := l.Unlock(ctx); err != nil {
					fail(fmt.Errorf("goroutine %d: unlock: %w", i, err))
					return
				}
				d := time.Since(t)
				progress.Add(1)
				if p == phaseMeasure {
					lat[i] = append(lat[i], d)
				}
			}
		})
	}
	allDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(allDone)
	}()
	// wait waits until d has passed, or until done() (checked every few
	// milliseconds): "" then, else why the run ends early.
	wait := func(d time.Duration, done func() bool) string {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		end := time.Now().Add(d)
		last, since := progress.Load(), time.Now()
		for {
			select {
			case <-failed:
				return statusError
			case <-ctx.Done():
				return statusError
			case now := <-tick.C:
				if done != nil && done() {
					return ""
				}
				if p := progress.Load(); p != last {
					last, since = p, now
				} else if now.Sub(since) > e.cfg.stall {
					return statusStalled
				}
				if done == nil && !now.Before(end) {
					return ""
				}
			}
		}
	}
	abort := func(status string) result {
		phase.Store(phaseStop)
		b.close()
		cancel()
		<-allDone
		r := result{Status: status, ClientRequests: -1, ServerRequests: -1, Orphans: -1}
		if status == statusError {
			r.Detail = fmt.Sprint(firstErr)
			if firstErr == nil {
				r.Detail = fmt.Sprint(ctx.Err())
			}
		}
		return r
	}

	if st := wait(e.cfg.warmup, nil); st != "" {
		return abort(st)
	}
	phase.Store(phasePause)
	if st := wait(0, func() bool { return paused.Load() == int64(len(b.lockers)) }); st != "" {
		return abort(st)
	}
	s0 := e.snapshot(b)
	phase.Store(phaseMeasure)
	start := time.Now()
	close(resume)
	if st := wait(e.cfg.duration, nil); st != "" {
		return abort(st)
	}
	elapsed := time.Since(start)
	phase.Store(phaseStop)
	if st := wait(0, func() bool {
		select {
		case <-allDone:
			return true
		default:
			return false
		}
	}); st != "" {
		return abort(st)
	}
	var m meter
	m.add(e, b, s0, slices.Concat(lat...), elapsed)
	r := m.result()
	r.Orphans = -1
	return r
}

// drainRound is one round's queue drain of one implementation.
type drainRound struct {
	// Handoffs is the number of hand-offs measured: one per waiter, the
	// first from the holder.
	Handoffs int `json:"handoffs"`
	// Seconds is the drain's time: from the holder's Unlock call to the
	// last waiter's Unlock returning.
	Seconds float64 `json:"seconds"`
	// Rate is Handoffs / Seconds.
	Rate float64 `json:"handoffs_per_sec"`
	// P50Ms and P99Ms are percentiles of the hand-off latency: from the
	// previous holder's Unlock returning to the next holder's Lock
	// returning.
	P50Ms float64 `json:"handoff_p50_ms"`
	P99Ms float64 `json:"handoff_p99_ms"`
	// Early counts the hand-offs in which the next holder's Lock returned
	// before the previous holder's Unlock did (they are on different
	// sessions, and the deletion's reply came after the next one's
	// notification): their latency is negative.
	Early int `json:"early,omitempty"`
	// ServerRequests is the number of request packets per hand-off the
	// server received during the drain (mntr).
	ServerRequests *float64 `json:"server_requests_per_handoff,omitempty"`
	// Per waiter, from the readings before the waiters started and once
	// all were queued, each after two garbage collections: the Go heap's
	// HeapInuse and HeapAlloc, the goroutine stacks' StackInuse and the
	// number of goroutines (in-process implementations); the JVM's used
	// heap after System.gc() (Curator).
	//
	// The runtime keeps the descriptor of an ended goroutine for the next
	// one and never frees it, so a heap reading counts a new goroutine's
	// descriptor only when none was free. goDrain makes sure one always
	// is (warmGoroutines): HeapAlloc never includes the waiters'
	// descriptors, Descriptors adds them, the goroutines per waiter times
	// the size of a new one (measured by goroutineDescriptor), and Total
	// is the two together, what a waiter costs the heap of a process that
	// has not run as many goroutines before. StackInuse counts the
	// waiters' stacks (the runtime frees the stacks of ended goroutines
	// at a collection); StackUsed is the part of them the blocked call
	// chains use, from the bytes of stack the last collection scanned.
	HeapInuse   *float64 `json:"heap_inuse_per_waiter,omitempty"`
	HeapAlloc   *float64 `json:"heap_alloc_per_waiter,omitempty"`
	Descriptors *float64 `json:"goroutine_descriptors_per_waiter,omitempty"`
	Total       *float64 `json:"heap_and_descriptors_per_waiter,omitempty"`
	StackInuse  *float64 `json:"stack_inuse_per_waiter,omitempty"`
	StackUsed   *float64 `json:"stack_used_per_waiter,omitempty"`
	Goroutines  *float64 `json:"goroutines_per_waiter,omitempty"`
	JVMHeap     *float64 `json:"jvm_heap_per_waiter,omitempty"`
	// Unsettled is set when the server kept receiving requests for
	// queueSettleLimit after the last waiter's node appeared: the heap
	// was read while some waiters were still setting up.
	Unsettled bool `json:"unsettled,omitempty"`

	Status string `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// usable reports whether the round's figures count.
func (d drainRound) usable() bool { return d.Status == "" }

// brief returns a one-line summary for progress output.
func (d drainRound) brief() string {
	if d.Status != "" {
		return d.Status + " " + d.Detail
	}
	s := fmt.Sprintf("%d hand-offs in %.2fs: %.0f/s, p50 %.2fms, p99 %.2fms", d.Handoffs, d.Seconds, d.Rate, d.P50Ms, d.P99Ms)
	if d.ServerRequests != nil {
		s += fmt.Sprintf(", %.2f requests/hand-off", *d.ServerRequests)
	}
	if d.HeapAlloc != nil {
		s += fmt.Sprintf(", heap/waiter %.0f B alloc, %.0f B in use, %.0f B with goroutine descriptors, stack %.0f B (%.0f B used), %.2f goroutines",
			*d.HeapAlloc, *d.HeapInuse, *d.Total, *d.StackInuse, *d.StackUsed, *d.Goroutines)
	}
	if d.JVMHeap != nil {
		s += fmt.Sprintf(", JVM heap/waiter %.0f B", *d.JVMHeap)
	}
	if d.Unsettled {
		s += " (unsettled)"
	}
	return s
}

// drainFigures computes a drain's figures: n waiters, the holder's Unlock
// called and returned at release, held the times each waiter's Lock and
// Unlock returned (all on one monotonic clock), packets the server's
// request count over the drain (-1: unknown).
func drainFigures(n int, release [2]int64, held [][2]int64, packets int64) drainRound {
	hand := handoffTimes(release[1], held)
	d := drainRound{Handoffs: len(hand)}
	end := release[1]
	for _, h := range held {
		end = max(end, h[1])
	}
	d.Seconds = time.Duration(end - release[0]).Seconds()
	if d.Seconds > 0 {
		d.Rate = float64(len(hand)) / d.Seconds
	}
	for _, h := range hand {
		if h < 0 {
			d.Early++
		}
	}
	slices.Sort(hand)
	d.P50Ms, d.P99Ms = ms(percentile(hand, 50)), ms(percentile(hand, 99))
	if packets >= 0 && n > 0 {
		v := float64(packets) / float64(n)
		d.ServerRequests = &v
	}
	return d
}

// handoffTimes returns the hand-off latencies of a drain, in the order the
// waiters held: from the previous holder's Unlock returning (the first
// holder's at release) to the next holder's Lock returning. held are the
// times each waiter's Lock and Unlock returned.
func handoffTimes(release int64, held [][2]int64) []time.Duration {
	h := slices.Clone(held)
	slices.SortFunc(h, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := make([]time.Duration, 0, len(h))
	prev := release
	for _, x := range h {
		out = append(out, time.Duration(x[0]-prev))
		prev = x[1]
	}
	return out
}

// drainSetup is an opened queue drain: its sessions, the holder, and how
// to make a waiter's handle.
type drainSetup struct {
	holder    locker
	newWaiter func(i int) (locker, error)
	close     func()
}

// openDrainMutex opens drainSessions recipe clients; the holder's mutex is
// on the first, waiter i's on client i mod drainSessions.
func openDrainMutex(ctx context.Context, e *env, path string) (*drainSetup, error) {
	clients := make([]*recipe.Client, 0, drainSessions)
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	for range drainSessions {
		c, err := e.client(ctx)
		if err != nil {
			closeAll()
			return nil, err
		}
		clients = append(clients, c)
	}
	holder, err := mutex.New(clients[0], path)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &drainSetup{
		holder: holder,
		newWaiter: func(i int) (locker, error) {
			return mutex.New(clients[i%drainSessions], path)
		},
		close: closeAll,
	}, nil
}

// openDrainZkLock opens drainSessions go-zookeeper sessions; the holder's
// zk.Lock is on the first, waiter i's on session i mod drainSessions.
func openDrainZkLock(ctx context.Context, e *env, path string) (*drainSetup, error) {
	if err := e.mkdirAll(path); err != nil {
		return nil, err
	}
	conns := make([]*zk.Conn, 0, drainSessions)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range drainSessions {
		c, err := e.rawConn(ctx)
		if err != nil {
			closeAll()
			return nil, err
		}
		conns = append(conns, c)
	}
	acl := zk.WorldACL(zk.PermAll)
	return &drainSetup{
		holder: zkLocker{zk.NewLock(conns[0], path, acl)},
		newWaiter: func(i int) (locker, error) {
			return zkLocker{zk.NewLock(conns[i%drainSessions], path, acl)}, nil
		},
		close: closeAll,
	}, nil
}

// heapSample is the process's memory after two garbage collections.
type heapSample struct {
	inuse, alloc, stack, scanned uint64
	goroutines                   int
}

func sampleHeap() heapSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	scanned := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}}
	metrics.Read(scanned)
	var sc uint64
	if scanned[0].Value.Kind() == metrics.KindUint64 {
		sc = scanned[0].Value.Uint64()
	}
	return heapSample{inuse: m.HeapInuse, alloc: m.HeapAlloc, stack: m.StackInuse, scanned: sc,
		goroutines: runtime.NumGoroutine()}
}

// warmGoroutines starts n goroutines at once and lets them end, so that
// the runtime has n goroutine descriptors free for the next ones.
func warmGoroutines(n int) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { <-release })
	}
	close(release)
	wg.Wait()
}

// descriptorOnce measures goroutineDescriptor once per process.
var descriptorOnce = sync.OnceValue(goroutineDescriptor)

// goroutineDescriptor returns the heap a new goroutine's descriptor
// takes (its runtime g, and its place in the runtime's list of them),
// which the runtime keeps for reuse once the goroutine ends: the heap per
// goroutine of descriptorProbe goroutines blocked on a channel, less that
// of as many more blocked the same way once the first ended (they reuse
// the descriptors). Run first in a process, before it has had that many
// goroutines: a descriptor already free makes the figure smaller by its
// share.
func goroutineDescriptor() float64 {
	block := func() float64 {
		release := make(chan struct{})
		var wg sync.WaitGroup
		before := sampleHeap()
		for range descriptorProbe {
			wg.Go(func() { <-release })
		}
		for end := time.Now().Add(5 * time.Second); blockedGoroutines() < descriptorProbe && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		after := sampleHeap()
		close(release)
		wg.Wait()
		return (float64(after.alloc) - float64(before.alloc)) / descriptorProbe
	}
	fresh := block()
	return fresh - block()
}

// descriptorProbe is the number of goroutines goroutineDescriptor starts.
const descriptorProbe = 4096

// blockedGoroutines is the runtime's approximate count of goroutines
// waiting on a resource.
func blockedGoroutines() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines/waiting:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return descriptorProbe // not known: do not wait
	}
	return s[0].Value.Uint64()
}

// perWaiter returns (after - before) / n.
func perWaiter[T uint64 | int64 | int](before, after T, n int) *float64 {
	v := (float64(after) - float64(before)) / float64(n)
	return &v
}

// goDrain returns the queue drain of an in-process implementation opened
// by open: the holder locks, the heap is read, n goroutines each make a
// waiter's handle and Lock; once all n are queued (the lock directory
// has n+1 children and the server has gone quiet) the heap is read again
// and the holder unlocks; each waiter unlocks as soon as it holds.
//
// No OpenTelemetry provider is installed (the clients use the global
// no-op one), and the run starts once the goroutines of the previous one
// have ended.
func goDrain(open func(ctx context.Context, e *env, path string) (*drainSetup, error)) func(context.Context, *env, string, int) (drainRound, error) {
	return func(ctx context.Context, e *env, path string, n int) (drainRound, error) {
		g0 := runtime.NumGoroutine()
		d, err := open(ctx, e, path)
		if err != nil {
			return drainRound{}, err
		}
		ctx, cancel := context.WithCancel(ctx)
		closed := false
		shut := func() {
			if !closed {
				closed = true
				d.close()
				cancel()
			}
		}
		defer func() {
			shut()
			awaitGoroutines(g0, 5*time.Second)
		}()
		if err := d.holder.Lock(ctx); err != nil {
			return drainRound{}, fmt.Errorf("holder: lock: %w", err)
		}
		var (
			lockAt   = make([]int64, n)
			unlockAt = make([]int64, n)
			ok       = make([]bool, n)
			progress atomic.Int64
			errMu    sync.Mutex
			errs     int
			firstErr error
			wg       sync.WaitGroup
			allDone  = make(chan struct{})
		)
		// A free descriptor for every goroutine the waiting starts, so
		// that the readings never count them (see drainRound).
		warmGoroutines(n + n/4 + 256)
		base := time.Now()
		before := sampleHeap()
		for i := range n {
			wg.Go(func() {
				defer progress.Add(1)
				l, err := d.newWaiter(i)
				if err == nil {
					err = l.Lock(ctx)
					lockAt[i] = int64(time.Since(base))
					if err == nil {
						err = l.Unlock(ctx)
						unlockAt[i] = int64(time.Since(base))
						ok[i] = err == nil
					}
				}
				if err != nil {
					errMu.Lock()
					errs++
					if firstErr == nil {
						firstErr = fmt.Errorf("waiter %d: %w", i, err)
					}
					errMu.Unlock()
				}
			})
		}
		go func() {
			wg.Wait()
			close(allDone)
		}()
		stopped := func(status, detail string) (drainRound, error) {
			shut()
			<-allDone
			return drainRound{Status: status, Detail: detail}, nil
		}
		deadline := time.Now().Add(e.cfg.drainTimeout)
		settled, err := e.awaitQueued(ctx, path, n+1, deadline)
		if err != nil {
			return stopped(statusStalled, err.Error())
		}
		after := sampleHeap()
		p0, ok0 := e.serverPackets()
		r0 := int64(time.Since(base))
		if err := d.holder.Unlock(ctx); err != nil {
			return stopped(statusError, "holder: unlock: "+err.Error())
		}
		r1 := int64(time.Since(base))
		if status := watchProgress(allDone, &progress, deadline, e.cfg.stall); status != "" {
			return stopped(status, fmt.Sprintf("%d of %d waiters done", progress.Load(), n))
		}
		p1, ok1 := e.serverPackets()
		if errs > 0 {
			return drainRound{Status: statusError, Detail: fmt.Sprintf("%d waiters failed; the first: %v", errs, firstErr)}, nil
		}
		held := make([][2]int64, 0, n)
		for i := range n {
			if ok[i] {
				held = append(held, [2]int64{lockAt[i], unlockAt[i]})
			}
		}
		packets := int64(-1)
		if ok0 && ok1 {
			packets = p1 - p0
		}
		r := drainFigures(n, [2]int64{r0, r1}, held, packets)
		r.HeapInuse = perWaiter(before.inuse, after.inuse, n)
		r.HeapAlloc = perWaiter(before.alloc, after.alloc, n)
		r.StackInuse = perWaiter(before.stack, after.stack, n)
		r.StackUsed = perWaiter(before.scanned, after.scanned, n)
		r.Goroutines = perWaiter(before.goroutines, after.goroutines, n)
		desc := *r.Goroutines * descriptorOnce()
		total := *r.HeapAlloc + desc
		r.Descriptors, r.Total = &desc, &total
		r.Unsettled = !settled
		return r, nil
	}
}

// awaitGoroutines waits up to limit for the process to be down to n
// goroutines: the sessions closed by a run take a moment to end theirs.
func awaitGoroutines(n int, limit time.Duration) {
	for end := time.Now().Add(limit); runtime.NumGoroutine() > n && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// peerDrain returns the queue drain of a peer: the peer opens its
// sessions, lets drains of 10 waiters run unmeasured for -peer-warmup (a
// new JVM loads and compiles the code of waiting meanwhile), locks the
// holder, reads its heap, starts its waiters and says
// "started"; the runner waits until they are all queued (awaitQueued) and
// says "measure"; the peer reads its heap again and says "ready"; on "go"
// it unlocks the holder and reports the times of the drain.
func peerDrain(peer string) func(context.Context, *env, string, int) (drainRound, error) {
	return func(ctx context.Context, e *env, path string, n int) (drainRound, error) {
		settled := true
		out, packets, err := e.runPeer(ctx, peerRun{
			peer: peer,
			args: e.peerArgs("queue", path, drainSessions, "-waiters", strconv.Itoa(n),
				"-warmup-ms", ms64(e.cfg.peerWarmup), "-deadline-ms", ms64(e.cfg.drainTimeout)),
			limit: peerStartLimit + e.cfg.peerWarmup + 2*e.cfg.drainTimeout + 2*e.cfg.stall,
			queued: func() error {
				var err error
				settled, err = e.awaitQueued(ctx, path, n+1, time.Now().Add(e.cfg.drainTimeout))
				return err
			},
		})
		if err != nil {
			return drainRound{}, err
		}
		if out.Status != "" {
			return drainRound{Status: out.Status, Detail: out.Error}, nil
		}
		if len(out.HeldNs) != n {
			return drainRound{Status: statusError, Detail: fmt.Sprintf("%d of %d waiters held; %d errors: %s", len(out.HeldNs), n, out.Errors, out.Error)}, nil
		}
		r := drainFigures(n, out.ReleaseNs, out.HeldNs, packets)
		if out.HeapBefore != nil && out.HeapAfter != nil {
			r.JVMHeap = perWaiter(*out.HeapBefore, *out.HeapAfter, n)
		}
		r.Unsettled = !settled
		return r, nil
	}
}

// errNotQueued is the error of awaitQueued when the waiters do not all
// queue.
var errNotQueued = errors.New("the waiters did not all queue")

// How awaitQueued decides that the waiters are done queuing: once the
// lock directory has all their nodes, the server receives no more than
// queueQuietPackets requests (a ping or two) in queueSettleStep; it gives
// up waiting after queueSettleLimit.
const (
	queueSettleStep   = 100 * time.Millisecond
	queueQuietPackets = drainSessions + 1
	queueSettleLimit  = 3 * time.Second
)

// awaitQueued waits until the node at path has want children, polling its
// child count, and then until the server has gone quiet: each waiter has
// sent everything it sends before it waits (listed the queue, set its
// watch). It reports whether the server went quiet within
// queueSettleLimit. It fails with errNotQueued when the count stops
// growing for -stall or deadline passes first.
func (e *env) awaitQueued(ctx context.Context, path string, want int, deadline time.Time) (bool, error) {
	last, since := -1, time.Now()
	for {
		_, st, err := e.admin.Exists(path)
		if err != nil {
			return false, fmt.Errorf("exists %s: %w", path, err)
		}
		n := 0
		if st != nil {
			n = int(st.NumChildren)
		}
		if n >= want {
			break
		}
		now := time.Now()
		if n != last {
			last, since = n, now
		}
		switch {
		case now.Sub(since) > e.cfg.stall:
			return false, fmt.Errorf("%w: %d of %d nodes, none added for %v", errNotQueued, n, want, e.cfg.stall)
		case now.After(deadline):
			return false, fmt.Errorf("%w: %d of %d nodes by the time limit", errNotQueued, n, want)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return false, err
		}
	}
	p0, ok := e.serverPackets()
	for end := time.Now().Add(queueSettleLimit); ok; {
		if err := sleepCtx(ctx, queueSettleStep); err != nil {
			return false, err
		}
		var p1 int64
		if p1, ok = e.serverPackets(); !ok {
			break
		}
		if p1-p0 <= queueQuietPackets {
			return true, nil
		}
		p0 = p1
		if time.Now().After(end) {
			return false, nil
		}
	}
	return false, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mkdirs creates the persistent nodes paths (siblings whose parent
// exists), many at a time.
func (e *env) mkdirs(paths []string) error {
	return e.concurrently(paths, func(p string) error {
		_, err := e.admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
		return nil
	})
}

// removeTree deletes p and everything below it, as far as it can, many
// nodes at a time: the scale suite's runs leave hundreds of lock
// directories.
func (e *env) removeTree(p string) {
	names, _, err := e.admin.Children(p)
	if err != nil {
		return
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = p + "/" + n
	}
	_ = e.concurrently(paths, func(c string) error {
		if err := e.admin.Delete(c, -1); errors.Is(err, zk.ErrNotEmpty) {
			e.removeAll(c)
		}
		return nil
	})
	_ = e.admin.Delete(p, -1)
}

// concurrently calls f on every item, up to 64 calls at a time (they
// share the admin session, whose requests go out pipelined), and returns
// the first error.
func (e *env) concurrently(items []string, f func(string) error) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(it); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
