package recipe

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe/internal/simzk"
)

// Deterministic simulation. The client runs as production builds it
// (Connect: go-zookeeper, the wire tap, the host provider) against recipe/internal/simzk, a model ZooKeeper server that
// speaks the wire protocol over in-memory connections, inside a synctest
// bubble: time is virtual, so a 2-second session costs nothing, and the
// faults are drawn from a seed: connections that die after the server
// applied a request or before it read it, partitions both ways and one
// way, shorter and longer than the session, slow links, frames in pieces,
// expiry (also while cut off, seen only on reconnect), a server restart
// with its state kept, and pauses. Every schedule is checked: one holder
// at a time (at most N leases), the holder told before anyone else is
// granted, guarded writes only while held, no call past its context, no
// node left, and, once the last fault is over, a free lock taken by every
// client within simLiveBound.
//
// The seed fixes the workload and the fault schedule; Go does not fix the
// interleaving of goroutines within one instant of virtual time, so a
// failing seed may pass on replay. Failures found are kept as scripted
// cases in simCases, which replay the same faults at the same times.

var (
	simSchedules = flag.Int("sim.schedules", 2000, "schedules TestSimulate runs (200 under -short)")
	simSeed      = flag.Uint64("sim.seed", 0, "seed of the first schedule (0: from the clock)")
	simVerbose   = flag.Bool("sim.trace", false, "print every schedule's trace")
	simDuration  = flag.Duration("sim.duration", 0, "stop starting schedules after this long (0: run them all)")
	simReplays   = flag.Int("sim.replays", 20, "replays of each scripted case in TestSimulateCases")
	simHostile   = flag.Bool("sim.hostile", true, "add bad frames from the server (simHostileKinds) to every schedule")
	simHostileOf = flag.String("sim.hostile.kinds", "", "draw the bad frames from these kinds only (comma-separated; empty: all)")
)

// simConfig is one schedule's workload, drawn from its seed.
type simConfig struct {
	kind     string // "mutex", "semaphore", "rwlock", "leader"
	clients  int
	cycles   int
	session  time.Duration
	tolerant bool
	// servers is the number of addresses the clients dial (all of
	// simServers when 0).
	servers int
	// handles is the number of goroutines that share each client, each
	// with its own handles on the lock (1 when 0), so that many requests
	// meet on one connection.
	handles int
}

func drawConfig(rng *rand.Rand) simConfig {
	// (An election's nodes are the mutex's driver on latch- nodes: the
	// scripted cases run them, so that these draws, and with them every
	// seed's schedule, stay as they were.)
	kinds := []string{"mutex", "semaphore", "rwlock"}
	return simConfig{
		kind:     kinds[rng.IntN(len(kinds))],
		clients:  2 + rng.IntN(2),
		cycles:   3 + rng.IntN(4),
		session:  2 * time.Second,
		tolerant: rng.IntN(4) == 0,
		handles:  max(1, rng.IntN(4)-1), // 1 in 3 of 4, else 2
	}
}

// simRun is one schedule.
type simRun struct {
	seed  uint64
	cfg   simConfig
	mu    sync.Mutex
	world *simzk.World
	start time.Time
	trace []string
	fails []string
	holds []*simHold // every hold, in grant order
	// faults is the schedule of faults, in time order.
	faults []simFault
	// killed are the sessions the server expired on its own (see
	// simHold.killed).
	killed map[int64]bool
}

// simFault is one fault of a schedule.
type simFault struct {
	At     time.Duration // virtual time after the start
	Client int
	Kind   string        // one of simFaultKinds
	Dur    time.Duration // partitions, slow links, pauses, restarts
}

// simFaultKinds are the faults a schedule draws from:
//
//   - lose-reply: the connection dies once the server has applied the
//     client's next request, before the reply;
//   - drop-request: the connection dies as the next request arrives;
//   - drop: the client's connections are reset;
//   - partition, partition-up, partition-down: the client is cut off
//     both ways, from the server only, or the server's replies only;
//   - expire: the server expires the client's session;
//   - slow: the link delays every frame by Dur, one way, for 2s;
//   - pause: the process pauses (see inject);
//   - pieces: every frame, both ways, arrives in three pieces for 2s;
//   - expire-cut: the session expires while the client is cut off (1.5
//     sessions), so the client learns of it only on reconnecting;
//   - restart: the server is down for Dur and comes back with its state;
//   - lag: the two servers other than the client's are a second behind
//     for Dur, and the client's connections are reset: its reconnect
//     lands on them first, behind its last zxid, and is refused, until it
//     comes back to its own.
var simFaultKinds = []string{"lose-reply", "drop-request", "drop", "partition", "expire", "slow", "pause",
	"partition-up", "partition-down", "pieces", "expire-cut", "restart", "lag"}

// simHostileKinds are the bad frames a schedule draws from, after the
// faults above (so that a seed's other faults stay as they were), one or
// two a schedule (see simzk.Hostile for each): frames shorter than a
// reply header (short-event, short-header, short-unknown), a reply to an
// xid never sent (unknown-xid), a frame announcing 0xfffffff0 bytes
// (oversized), a string longer than its frame (bad-string), a frame cut
// by the server closing the connection (truncated), a listing of 2^31-1
// children (bad-listing), a reply whose zxid goes back to 1 (zxid-back),
// and connect responses granting 0, -1 or 1 ms or with a 4 KiB password
// (connect-*: the client's connections are reset, so that it connects
// again). Each is armed for simWindow and sent once, on the first frame
// it fits. The client must end the connection when the frame reaches it
// (simzk.World.HostileKept) and carry on as after any lost connection.
var simHostileKinds = simzk.Hostiles()

// simHostileKind returns the kind named name, if it is one.
func simHostileKind(name string) (simzk.Hostile, bool) {
	for _, k := range simHostileKinds {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

// drawHostile draws one or two bad frames over the first span of
// virtual time.
func drawHostile(rng *rand.Rand, cfg simConfig, span time.Duration) []simFault {
	kinds := simHostileKinds
	if *simHostileOf != "" {
		kinds = nil
		for name := range strings.SplitSeq(*simHostileOf, ",") {
			if k, ok := simHostileKind(strings.TrimSpace(name)); ok {
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	out := make([]simFault, 1+rng.IntN(2))
	for i := range out {
		out[i] = simFault{At: time.Duration(rng.Int64N(int64(span))), Client: rng.IntN(cfg.clients),
			Kind: kinds[rng.IntN(len(kinds))].String()}
	}
	return out
}

// simWindow is how long slow and pieces last.
const simWindow = 2 * time.Second

// over is when the fault is over, for a session of the given timeout.
func (f simFault) over(session time.Duration) time.Duration {
	if _, ok := simHostileKind(f.Kind); ok {
		return f.At + simWindow
	}
	switch f.Kind {
	case "slow", "pieces":
		return f.At + simWindow
	case "expire-cut":
		return f.At + session*3/2
	}
	return f.At + f.Dur
}

func (f simFault) String() string {
	s := fmt.Sprintf("%v client %d %s", f.At, f.Client, f.Kind)
	if f.Dur > 0 {
		s += " " + f.Dur.String()
	}
	return s
}

// drawFaults draws a schedule of faults over the first span of virtual
// time.
func drawFaults(rng *rand.Rand, cfg simConfig, span time.Duration) []simFault {
	kinds := simFaultKinds
	n := 1 + rng.IntN(4)
	out := make([]simFault, n)
	for i := range out {
		f := simFault{At: time.Duration(rng.Int64N(int64(span))), Client: rng.IntN(cfg.clients), Kind: kinds[rng.IntN(len(kinds))]}
		switch f.Kind {
		case "partition", "pause", "partition-up", "partition-down", "restart", "lag":
			// shorter and longer than the loss timeout and the session
			f.Dur = []time.Duration{cfg.session / 4, cfg.session * 3 / 4, cfg.session + cfg.session/2}[rng.IntN(3)]
		case "slow":
			f.Dur = time.Duration(1+rng.IntN(50)) * time.Millisecond
		}
		out[i] = f
	}
	slices.SortFunc(out, func(a, b simFault) int { return int(a.At - b.At) })
	return out
}

func (r *simRun) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trace = append(r.trace, fmt.Sprintf("%8v  ", time.Since(r.start))+fmt.Sprintf(format, args...))
}

func (r *simRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.fails = append(r.fails, msg)
	r.trace = append(r.trace, fmt.Sprintf("%8v  FAIL ", time.Since(r.start))+msg)
}

// simClient is one client of a schedule: a Client on a host of the world.
type simClient struct {
	id    int
	c     *Client
	host  *simzk.Host
	pause chan time.Duration // a pause of the process, for its holder
}

// simServers are the addresses of the ensemble the clients dial; nothing
// resolves them. The model serves them all from one tree (see
// simzk.World.Lag for how one may lag).
var simServers = []string{"simzk1:2181", "simzk2:2181", "simzk3:2181"}

// simBufferSize sizes go-zookeeper's buffers in the simulation: the
// largest frame a schedule sees is a listing of a few dozen nodes.
const simBufferSize = 16 << 10

// servers returns the addresses the schedule's clients dial.
func (r *simRun) servers() []string {
	if n := r.cfg.servers; n > 0 && n < len(simServers) {
		return simServers[:n]
	}
	return simServers
}

// newSimClient connects a client to the world, as Connect does for users,
// with the schedule's seed for its node ids and small buffers.
func (r *simRun) newSimClient(id int) (*simClient, error) {
	h := r.world.NewHost(fmt.Sprintf("client%d", id))
	opts := []Option{WithDialer(h.Dial), WithSessionTimeout(r.cfg.session)}
	if r.cfg.tolerant {
		opts = append(opts, WithSuspensionTolerance())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooks := &testHooks{bufferSize: simBufferSize, rand: newLockedRand(r.seed<<8 | uint64(id))}
	c, err := connect(ctx, r.servers(), hooks, opts)
	if err != nil {
		return nil, err
	}
	return &simClient{id: id, c: c, host: h, pause: make(chan time.Duration, 1)}, nil
}

// simHold is one hold as its holder saw it.
type simHold struct {
	h       *Hold
	client  int
	token   int64
	node    string
	mode    byte // 'x' exclusive, 's' shared, 'l' lease
	done    <-chan struct{}
	release bool // the holder began its release
	// killed: the server expired the session on its own (World.Expire, an
	// operator's kill): the holder cannot be told first, as with a node
	// deleted by another client; the register still may not take its
	// writes. A hold granted on a killed session, from replies read
	// before the kill, is killed too.
	killed  bool
	session int64
}

const simPath = "/sim/lock"

// simFree holds the free locks of the liveness check.
const simFree = "/sim/free"

// simBound bounds a schedule's workload in virtual time: far more than
// its cycles' deadlines add up to.
const simBound = 10 * time.Minute
const simRegister = "/sim/register"

// lockFor returns the lock client cl contends for in cycle i, and the
// mode of its holds.
func (r *simRun) lockFor(cl *simClient, i int) (*Lock, byte, error) {
	switch r.cfg.kind {
	case "semaphore":
		d, _ := driver.Leases(2)
		l, err := NewLock(cl.c, simPath, LockSpec{Recipe: "semaphore", LockName: "lease-", Driver: d}, nil)
		return l, 'l', err
	case "rwlock":
		if (cl.id+i)%3 == 0 {
			l, err := NewLock(cl.c, simPath, LockSpec{Recipe: "rwlock", LockName: "write-", Driver: driver.Write(), Queue: []string{"read-", "write-"}}, nil)
			return l, 'x', err
		}
		l, err := NewLock(cl.c, simPath, LockSpec{Recipe: "rwlock", LockName: "read-", Driver: driver.Read("write-"), Queue: []string{"read-", "write-"}}, nil)
		return l, 's', err
	}
	if r.cfg.kind == "leader" { // an election's nodes: the mutex's driver on latch- nodes
		l, err := NewLock(cl.c, simPath, LockSpec{Recipe: "leader", LockName: "latch-", Driver: driver.Mutex()}, nil)
		return l, 'x', err
	}
	l, err := NewLock(cl.c, simPath, LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, nil)
	return l, 'x', err
}

// granted checks a new hold against every hold not yet released: an
// exclusive hold may not start while another is in force, nor a shared
// one while an exclusive one is, nor a lease beyond the second. A hold
// counts as in force until its holder was told (its Done channel closed,
// or, for a client that tolerates suspensions, a suspension began) or
// began to release it.
func (r *simRun) granted(h *simHold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.killed = r.killed[h.session]; h.killed {
		r.holds = append(r.holds, h)
		return
	}
	leases := 1
	for _, o := range r.holds {
		if o.release || o.killed || isClosed(o.done) || o.h.suspendedNow() {
			continue
		}
		switch {
		case h.mode == 'l' && o.mode == 'l':
			leases++
			if leases > 2 {
				r.fails = append(r.fails, fmt.Sprintf("client %d granted %s (token %d): a third lease in force with %s (client %d)", h.client, h.node, h.token, o.node, o.client))
			}
		case h.mode == 'x' || o.mode == 'x':
			r.fails = append(r.fails, fmt.Sprintf("client %d granted %s (token %d) while %s (client %d, token %d) was in force and not told", h.client, h.node, h.token, o.node, o.client, o.token))
		}
	}
	r.holds = append(r.holds, h)
}

// suspendedNow reports, without the side effects of Suspended (which
// judges the silence first), whether a suspension the hold has not come
// through is in progress: a holder that tolerates suspensions has been
// told to stop acting.
func (h *Hold) suspendedNow() bool {
	h.mu.Lock()
	in := h.inSusp
	h.mu.Unlock()
	return in || (h.l.c.cfg.tolerateSuspension && h.pending())
}

// cycleLoop is one client's workload: acquire with a random timeout, hold
// for a random time while making guarded writes, release.
func (r *simRun) cycleLoop(cl *simClient, rng *rand.Rand) {
	for i := range r.cfg.cycles {
		lk, mode, err := r.lockFor(cl, i)
		if err != nil {
			r.fail("client %d: NewLock: %v", cl.id, err)
			return
		}
		timeout := []time.Duration{50 * time.Millisecond, time.Second, 3 * r.cfg.session}[rng.IntN(3)]
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		begin := time.Now()
		h, err := lk.Acquire(ctx)
		cancel()
		if over := time.Since(begin) - timeout; over > cl.c.cfg.cleanupGrace+10*time.Millisecond {
			r.fail("client %d: acquire returned %v after its context ended (%v)", cl.id, over, err)
		}
		if err != nil {
			if !errors.Is(err, ErrNotAcquired) {
				r.fail("client %d: acquire: an undocumented error: %v", cl.id, err)
			}
			r.logf("client %d: not acquired: %v", cl.id, err)
			time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
			continue
		}
		sh := &simHold{h: h, client: cl.id, session: h.ep.session, token: h.Token(), node: h.Node(), mode: mode, done: h.Done()}
		r.granted(sh)
		r.logf("client %d: holds %s (token %d)", cl.id, h.Node(), h.Token())
		r.hold(cl, h, sh, rng)
		r.mu.Lock()
		sh.release = true
		r.mu.Unlock()
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		rbegin := time.Now()
		err = h.Release(rctx)
		rcancel()
		if over := time.Since(rbegin) - time.Second; over > 10*time.Millisecond {
			r.fail("client %d: release returned %v after its context ended (%v)", cl.id, over, err)
		}
		r.logf("client %d: released %s: %v", cl.id, h.Node(), err)
	}
}

// hold keeps h for a random time, writing to the register through Commit
// every 20ms, until the time is up or Done closes.
func (r *simRun) hold(cl *simClient, h *Hold, sh *simHold, rng *rand.Rand) {
	end := time.After(time.Duration(rng.IntN(300)) * time.Millisecond)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	entry := CreateSequential(fmt.Sprintf("%s/%d~%c~%s~", simRegister, sh.token, sh.mode, sh.node), nil)
	for {
		select {
		case <-end:
			return
		case <-sh.done:
			r.logf("client %d: lost %s: %v", cl.id, h.Node(), h.Err())
			// One write after the loss: it must be refused.
			if _, err := h.Commit(context.Background(), entry); err == nil {
				r.fail("client %d: a guarded write under %s committed after its Done closed", cl.id, h.Node())
			}
			return
		case d := <-cl.pause:
			// Paused between its check and its write: on resume the
			// write goes out at once, whatever happened meanwhile.
			time.Sleep(d)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err := h.Commit(ctx, entry)
			cancel()
			r.logf("client %d: write after a pause of %v: %v", cl.id, d, err)
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err := h.Commit(ctx, entry)
			cancel()
			if err != nil && !errors.Is(err, ErrLost) && !errors.Is(err, ErrCommitUnknown) && !errors.Is(err, ErrNotHeld) {
				r.fail("client %d: Commit: an undocumented error: %v", cl.id, err)
			}
		}
	}
}

// inject applies the schedule's faults at their times.
func (r *simRun) inject(clients []*simClient) {
	for _, f := range r.faults {
		if d := f.At - time.Since(r.start); d > 0 {
			time.Sleep(d)
		}
		cl := clients[f.Client]
		r.logf("fault: %v", f)
		if k, ok := simHostileKind(f.Kind); ok {
			cl.host.Hostile(k, simWindow)
			if strings.HasPrefix(f.Kind, "connect-") {
				cl.host.Drop()
			}
			continue
		}
		switch f.Kind {
		case "lose-reply":
			cl.host.DieAfterApply(simzk.AnyOp)
		case "drop-request":
			cl.host.DieBeforeRead(simzk.AnyOp)
		case "drop":
			cl.host.Drop()
		case "partition":
			cl.host.Partition(f.Dur, true, true)
		case "partition-up":
			cl.host.Partition(f.Dur, true, false)
		case "partition-down":
			cl.host.Partition(f.Dur, false, true)
		case "pause":
			// A paused process is, to the ensemble, a client whose
			// traffic stops both ways: a partition. To itself, its holder
			// stops between a check and a write and sends the write on
			// resume, whatever happened meanwhile. (Its own timers keep
			// running here, as they do not in a real pause: the pause's
			// threat, a write that goes out after the session expired,
			// is what the register checks.)
			cl.host.Partition(f.Dur, true, true)
			select {
			case cl.pause <- f.Dur:
			default:
			}
		case "expire":
			r.expire(cl)
		case "expire-cut":
			cl.host.Partition(r.cfg.session*3/2, true, true)
			r.expire(cl)
		case "slow":
			cl.host.Slow(f.Dur, simWindow)
		case "pieces":
			cl.host.Pieces(3, simWindow)
		case "restart":
			r.world.Restart(f.Dur)
		case "lag":
			r.lag(cl, f.Dur)
		}
	}
}

// lag makes the servers other than the client's lag a second behind for
// d, and resets the client's connections: its reconnect tries them first.
func (r *simRun) lag(cl *simClient, d time.Duration) {
	cur := cl.host.Address()
	for _, s := range r.servers() {
		if s != cur {
			r.world.Lag(s, time.Second, d)
		}
	}
	cl.host.Drop()
}

// expire makes the server expire the client's session now: its holds, and
// any granted later from replies read before, are killed.
func (r *simRun) expire(cl *simClient) {
	sid := cl.host.Session()
	r.mu.Lock()
	r.killed[sid] = true
	for _, h := range r.holds {
		if h.session == sid {
			h.killed = true
		}
	}
	r.mu.Unlock()
	r.world.Expire(sid)
}

// simLiveBound is the bound B of the liveness check: once a schedule's
// last fault is over, a take of a free lock succeeds within it. For a
// session timeout S it is 1.5 S + 1s: the client may need the loss
// timeout and the session timeout to learn that its session is gone,
// and a round of reconnects paced by its retry policy.
func simLiveBound(session time.Duration) time.Duration { return session*3/2 + time.Second }

// checkLiveness waits until the last fault is over, then has every
// client take, and release, a free lock of its own; each take must
// succeed within simLiveBound.
func (r *simRun) checkLiveness(clients []*simClient) {
	var end time.Duration
	for _, f := range r.faults {
		end = max(end, f.over(r.cfg.session))
	}
	if d := end - time.Since(r.start); d > 0 {
		time.Sleep(d)
	}
	bound := simLiveBound(r.cfg.session)
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			path := fmt.Sprintf("%s/%d", simFree, cl.id)
			l, err := NewLock(cl.c, path, LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, nil)
			if err != nil {
				r.fail("client %d: NewLock: %v", cl.id, err)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			begin := time.Now()
			h, err := l.Acquire(ctx)
			if err != nil {
				r.fail("liveness: client %d did not take a free lock within %v after the last fault: %v", cl.id, bound, err)
				return
			}
			r.logf("client %d: took the free lock %v after the last fault", cl.id, time.Since(begin))
			rctx, rcancel := context.WithTimeout(context.Background(), bound)
			defer rcancel()
			if err := h.Release(rctx); err != nil {
				r.logf("client %d: released the free lock: %v", cl.id, err)
			}
		})
	}
	wg.Wait()
}

// checkRegister checks the register's history (the sequence numbers give
// the order of the commits) as the fault suite does: an exclusive hold's
// writes are never interleaved with another's, and after an exclusive
// hold's first write no lower token writes.
func (r *simRun) checkRegister() {
	type write struct {
		token int64
		mode  byte
		seq   int
	}
	var hist []write
	for p := range r.world.Snapshot() {
		name, ok := strings.CutPrefix(p, simRegister+"/")
		if !ok {
			continue
		}
		f := strings.Split(name, "~")
		if len(f) != 4 {
			continue
		}
		token, _ := strconv.ParseInt(f[0], 10, 64)
		seq, _ := strconv.Atoi(f[3])
		hist = append(hist, write{token, f[1][0], seq})
	}
	slices.SortFunc(hist, func(a, b write) int { return a.seq - b.seq })
	last := map[int64]int{}
	for i, w := range hist {
		last[w.token] = i
	}
	seen := map[int64]bool{}
	for i, w := range hist {
		if w.mode != 'x' || seen[w.token] {
			continue
		}
		seen[w.token] = true
		for j := i + 1; j < len(hist); j++ {
			o := hist[j]
			switch {
			case o.token < w.token:
				r.fail("register: write %d of token %d after the first write of exclusive token %d", o.seq, o.token, w.token)
			case j < last[w.token] && o.token != w.token:
				r.fail("register: write %d of token %d between writes of exclusive token %d", o.seq, o.token, w.token)
			}
		}
	}
}

// checkNodes checks that nothing is left in the lock directory by the
// time bound has passed (it looks every 100ms, and returns as soon as the
// directory is empty).
func (r *simRun) checkNodes(when string, bound time.Duration) {
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		var left []string
		for p, n := range r.world.Snapshot() {
			if strings.HasPrefix(p, simPath+"/") {
				left = append(left, fmt.Sprintf("%s (owner 0x%x)", p, n.EphemeralOwner))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(left)
			r.fail("%s: nodes left after %v: %v", when, bound, left)
			return
		}
	}
}

// run runs the schedule in the current bubble.
func (r *simRun) run() {
	r.world = simzk.New(r.seed)
	defer r.world.Close()
	r.start = time.Now()
	r.killed = map[int64]bool{}
	for _, p := range []string{"/sim", simRegister, simFree} {
		if err := r.world.CreateNode(p, nil); err != nil {
			r.fail("setup: %v", err)
		}
	}
	clients := make([]*simClient, 0, r.cfg.clients)
	defer func() {
		for _, cl := range clients {
			cl.c.Close()
		}
	}()
	for i := range r.cfg.clients {
		cl, err := r.newSimClient(i)
		if err != nil {
			r.fail("client %d: connect: %v", i, err)
			return
		}
		clients = append(clients, cl)
	}
	var wg sync.WaitGroup
	for i, cl := range clients {
		for h := range max(r.cfg.handles, 1) {
			rng := rand.New(rand.NewPCG(r.seed, uint64(i+h<<8)))
			wg.Go(func() { r.cycleLoop(cl, rng) })
		}
	}
	wg.Go(func() { r.inject(clients) })
	wg.Go(func() { r.checkLiveness(clients) })
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(simBound):
		// Every call has a deadline: a workload still running now has a
		// call that waits past its context.
		r.fail("the workload did not finish within %v of virtual time", simBound)
		for _, cl := range clients {
			cl.c.Close()
		}
		<-finished
		return
	}
	// The clients are open and the faults over: within the session
	// timeout and the cleanup's backoff, every node must be gone.
	r.checkNodes("clients open", 2*r.cfg.session+5*time.Second)
	for _, cl := range clients {
		cl.c.Close()
	}
	r.checkNodes("clients closed", r.cfg.session+2*time.Second)
	r.checkRegister()
	for _, v := range r.world.Violations() {
		r.fail("protocol: %s", v)
	}
	for _, v := range r.world.HostileKept() {
		r.fail("hostile wire: %s", v)
	}
	for _, cl := range clients {
		if n := cl.host.HostileSent(); n > 0 {
			opened, _ := cl.host.Dials()
			r.logf("client %d: %d bad frames sent, %d refused, %d connections opened", cl.id, n, cl.c.Stats().RefusedFrames, opened)
		}
	}
	if n := r.world.LagRefusals(); n > 0 {
		r.logf("server: %d reconnects refused by lagging followers", n)
	}
}

// runSchedule runs the schedule of seed in a bubble of its own and
// returns its failures and trace.
func runSchedule(t *testing.T, seed uint64) (fails, trace []string) {
	rng := rand.New(rand.NewPCG(seed, 0))
	cfg := drawConfig(rng)
	faults := drawFaults(rng, cfg, 3*time.Second)
	if *simHostile {
		faults = append(faults, drawHostile(rng, cfg, 3*time.Second)...)
		slices.SortStableFunc(faults, func(a, b simFault) int { return int(a.At - b.At) })
	}
	return runScripted(t, seed, cfg, faults)
}

// runScripted runs a workload and a schedule of faults given in full
// (seed only draws the clients' hold times and timeouts).
func runScripted(t *testing.T, seed uint64, cfg simConfig, faults []simFault) (fails, trace []string) {
	r := &simRun{seed: seed, cfg: cfg, faults: faults}
	synctest.Test(t, func(t *testing.T) { r.run() })
	head := fmt.Sprintf("seed %d: %s, %d clients (%d goroutines each) x %d cycles, session %v, tolerant %v, %d servers; faults %v",
		seed, cfg.kind, cfg.clients, max(cfg.handles, 1), cfg.cycles, cfg.session, cfg.tolerant, cmp.Or(cfg.servers, len(simServers)), r.faults)
	return r.fails, append([]string{head}, r.trace...)
}

// simCases are schedules that once failed, kept as scripts: the faults
// at their times, whatever the request path becomes. Each names what it
// caught.
var simCases = []struct {
	name   string
	seed   uint64
	cfg    simConfig
	faults []simFault
}{
	{
		// A session killed by the server while its client was cut off:
		// the client, back, is granted from replies read before the
		// kill, then learns of the expiry (first found as seed 3226).
		"kill during a partition", 3226,
		simConfig{kind: "semaphore", clients: 3, cycles: 5, session: 2 * time.Second, tolerant: true},
		[]simFault{{At: 95 * time.Millisecond, Client: 1, Kind: "partition", Dur: 500 * time.Millisecond},
			{At: 126 * time.Millisecond, Client: 0, Kind: "pause", Dur: 1500 * time.Millisecond},
			{At: 190 * time.Millisecond, Client: 1, Kind: "expire"}},
	},
	{
		// A reader suspended by a pause longer than the session, with a
		// writer waiting: the writer is granted while the reader is
		// suspended, not before (seed 285).
		"reader paused past its session", 285,
		simConfig{kind: "rwlock", clients: 3, cycles: 6, session: 2 * time.Second, tolerant: true},
		[]simFault{{At: 275 * time.Millisecond, Client: 1, Kind: "pause", Dur: 3 * time.Second},
			{At: 410 * time.Millisecond, Client: 2, Kind: "pause", Dur: 1500 * time.Millisecond},
			{At: 1776 * time.Millisecond, Client: 1, Kind: "slow", Dur: 50 * time.Millisecond},
			{At: 2475 * time.Millisecond, Client: 1, Kind: "expire"}},
	},
	{
		// A mutex holder paused past its session while tolerant, a lost
		// reply and a kill after it (seed 160).
		"holder paused past its session, then a lost reply and a kill", 160,
		simConfig{kind: "mutex", clients: 3, cycles: 6, session: 2 * time.Second, tolerant: true},
		[]simFault{{At: 786 * time.Millisecond, Client: 0, Kind: "pause", Dur: 500 * time.Millisecond},
			{At: 1687 * time.Millisecond, Client: 1, Kind: "pause", Dur: 3 * time.Second},
			{At: 2436 * time.Millisecond, Client: 1, Kind: "lose-reply"},
			{At: 2778 * time.Millisecond, Client: 2, Kind: "expire"}},
	},
	{
		// An election: the leader paused past its session while two
		// others wait, a lost reply and a dropped connection after it.
		"leader paused past its session", 11,
		simConfig{kind: "leader", clients: 3, cycles: 4, session: 2 * time.Second},
		[]simFault{{At: 150 * time.Millisecond, Client: 0, Kind: "pause", Dur: 3 * time.Second},
			{At: 900 * time.Millisecond, Client: 1, Kind: "lose-reply"},
			{At: 1400 * time.Millisecond, Client: 2, Kind: "drop"}},
	},
	{
		// The server kills a holder's session with no other fault: its
		// holder cannot be told first, and its writes must not land.
		"holder killed", 7,
		simConfig{kind: "mutex", clients: 2, cycles: 4, session: 2 * time.Second},
		[]simFault{{At: 303 * time.Millisecond, Client: 1, Kind: "expire"},
			{At: 1362 * time.Millisecond, Client: 1, Kind: "drop-request"},
			{At: 2382 * time.Millisecond, Client: 1, Kind: "partition", Dur: 1500 * time.Millisecond}},
	},
	// Some cases below catch a bug planted on purpose (the patches in
	// testdata/plants, run by scripts/plants.sh): each fails 20 replays in
	// 20 with its bug and passes without it.
	{
		// Two sessions expire while their clients are cut off, so each
		// learns of it on reconnecting, to the one server, and leaves the
		// connection go-zookeeper leaves open after an expired connect
		// response (once the cause of a free lock never taken again).
		"expiry learned on reconnect, on two clients", 7,
		simConfig{kind: "semaphore", clients: 3, cycles: 6, session: 2 * time.Second, servers: 1},
		[]simFault{{At: 200 * time.Millisecond, Client: 0, Kind: "expire-cut"},
			{At: 300 * time.Millisecond, Client: 1, Kind: "expire-cut"}},
	},
	{
		// A holder paused past its session while another waits: it must
		// be told before the server expires its session and the waiter
		// is granted (plant loss-timeout: the silence judged on the whole
		// session timeout).
		"holder paused past its session, a waiter behind it", 10,
		simConfig{kind: "mutex", clients: 2, cycles: 6, session: 2 * time.Second},
		[]simFault{{At: 100 * time.Millisecond, Client: 0, Kind: "pause", Dur: 3 * time.Second}},
	},
	{
		// Creates with the reads behind them, a one-way partition (once
		// the case of a reply handed to another call).
		"one-way partition of a tolerant client", 1,
		simConfig{kind: "semaphore", clients: 2, cycles: 5, session: 2 * time.Second, tolerant: true},
		[]simFault{{At: 1666 * time.Millisecond, Client: 0, Kind: "partition-up", Dur: 500 * time.Millisecond}},
	},
	{
		// Eight goroutines share each client, so many requests meet on
		// one connection, and resets.
		"eight goroutines on each client, and resets", 1,
		simConfig{kind: "semaphore", clients: 2, cycles: 8, session: 2 * time.Second, handles: 8},
		[]simFault{{At: 300 * time.Millisecond, Client: 0, Kind: "drop"},
			{At: 600 * time.Millisecond, Client: 1, Kind: "drop"}},
	},
	// Bad frames from the server (simHostileKinds): each must end the
	// connection it came on, and the clients carry on.
	{
		"bad frames on a mutex", 2,
		simConfig{kind: "mutex", clients: 2, cycles: 6, session: 2 * time.Second, handles: 2},
		[]simFault{{At: 200 * time.Millisecond, Client: 0, Kind: "short-event"},
			{At: 500 * time.Millisecond, Client: 1, Kind: "unknown-xid"},
			{At: 900 * time.Millisecond, Client: 0, Kind: "oversized"},
			{At: 1200 * time.Millisecond, Client: 1, Kind: "bad-listing"},
			{At: 1500 * time.Millisecond, Client: 0, Kind: "zxid-back"},
			{At: 1800 * time.Millisecond, Client: 1, Kind: "truncated"}},
	},
	{
		// A reply's zxid going back, while both clients cycle (plant
		// zxidback: the tap takes it as it comes, with the connection
		// open).
		"zxids going backwards, mid-run", 4,
		simConfig{kind: "mutex", clients: 2, cycles: 8, session: 2 * time.Second, handles: 2},
		[]simFault{{At: 30 * time.Millisecond, Client: 0, Kind: "zxid-back"},
			{At: 40 * time.Millisecond, Client: 1, Kind: "zxid-back"},
			{At: 90 * time.Millisecond, Client: 0, Kind: "zxid-back"}},
	},
	{
		"bad connect responses and short frames on a semaphore", 3,
		simConfig{kind: "semaphore", clients: 3, cycles: 5, session: 2 * time.Second},
		[]simFault{{At: 300 * time.Millisecond, Client: 0, Kind: "connect-timeout-0"},
			{At: 800 * time.Millisecond, Client: 1, Kind: "connect-timeout-neg"},
			{At: 1300 * time.Millisecond, Client: 2, Kind: "connect-timeout-1ms"},
			{At: 1800 * time.Millisecond, Client: 0, Kind: "connect-passwd"},
			{At: 2100 * time.Millisecond, Client: 1, Kind: "short-header"},
			{At: 2400 * time.Millisecond, Client: 2, Kind: "short-unknown"},
			{At: 2700 * time.Millisecond, Client: 0, Kind: "bad-string"}},
	},
	{
		// A bad listing held up by a partition of the server's replies,
		// on a reader-writer lock whose waiters list often.
		"bad listing behind a one-way partition", 4,
		simConfig{kind: "rwlock", clients: 3, cycles: 5, session: 2 * time.Second, tolerant: true},
		[]simFault{{At: 400 * time.Millisecond, Client: 0, Kind: "bad-listing"},
			{At: 410 * time.Millisecond, Client: 0, Kind: "partition-down", Dur: 500 * time.Millisecond},
			{At: 1000 * time.Millisecond, Client: 2, Kind: "oversized"}},
	},
}

// simStuck is how long, in real time, a schedule may run before it is
// taken to be stuck: a goroutine of its bubble waits on something that is
// not durably blocking (a mutex held across a wait), so virtual time
// stops, and the bubble would wait for ever.
const simStuck = 2 * time.Minute

// panicStuck ends the test binary with every goroutine's stack.
func panicStuck(seed uint64) {
	debug.SetTraceback("all")
	panic(fmt.Sprintf("schedule of seed %d has run for %v of real time: stuck (replay: -sim.seed=%d -sim.schedules=1 -sim.trace)", seed, simStuck, seed))
}

// flagSet reports whether the flag called name was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// skipUnpatchedRace skips the simulation under the race detector when
// go-zookeeper is the release as the module proxy serves it: v1.0.4 reads
// and writes Conn.lastZxid unsynchronised at every reconnect with watches
// set (upstream go-zookeeper/zk PR #35), which nearly every schedule makes,
// so the race detector would fail the first schedule on go-zookeeper's
// race rather than on ours. The make targets build against the release
// with patches/ applied (make patched-zk), where it runs.
func skipUnpatchedRace(t *testing.T) {
	if !raceDetector {
		return
	}
	file, _ := runtime.FuncForPC(reflect.ValueOf(zk.Connect).Pointer()).FileLine(reflect.ValueOf(zk.Connect).Pointer())
	if strings.Contains(filepath.ToSlash(file), "/github.com/go-zookeeper/zk@") {
		t.Skip("simulation skipped under -race: go-zookeeper v1.0.4 as released races on Conn.lastZxid at reconnects " +
			"(upstream PR #35); run it without -race, with make simulate or make test (patched, see patches/), " +
			"or through cmd/zkrace (docs/testing.md)")
	}
}

// TestSimulateCases replays the scripted schedules, each -sim.replays
// times (the interleaving within an instant of virtual time is Go's
// choice), and reports how many replays of each failed.
func TestSimulateCases(t *testing.T) {
	skipUnpatchedRace(t)
	for _, sc := range simCases {
		t.Run(sc.name, func(t *testing.T) {
			failed, first := 0, ""
			for range *simReplays {
				if fails, trace := runScripted(t, sc.seed, sc.cfg, sc.faults); len(fails) > 0 {
					if failed++; first == "" {
						first = fmt.Sprintf("%s\n    %s", strings.Join(fails, "; "), strings.Join(trace, "\n    "))
					}
				}
			}
			if failed > 0 {
				t.Errorf("failed %d of %d replays; the first: %s", failed, *simReplays, first)
			}
		})
	}
}

func TestSimulate(t *testing.T) {
	skipUnpatchedRace(t)
	schedules := *simSchedules
	if testing.Short() && !flagSet("sim.schedules") {
		schedules = 200
	}
	seed := *simSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("first seed %d (rerun with -args -sim.seed=%d -sim.schedules=N)", seed, seed)
	// Schedules allocate briskly and keep little: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	begin := time.Now()
	var mu sync.Mutex
	failed, ran := 0, 0
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for s := range next {
				stuck := time.AfterFunc(simStuck, func() { panicStuck(s) })
				fails, trace := runSchedule(t, s)
				stuck.Stop()
				mu.Lock()
				ran++
				if *simVerbose {
					t.Log(strings.Join(trace, "\n"))
				}
				if len(fails) > 0 {
					failed++
					t.Errorf("schedule failed: %s\n  replay: go test -run TestSimulate ./recipe/ -args -sim.seed=%d -sim.schedules=1 -sim.trace\n  trace:\n    %s",
						strings.Join(fails, "; "), s, strings.Join(trace, "\n    "))
				}
				mu.Unlock()
			}
		})
	}
	for i := range schedules {
		mu.Lock()
		stop := failed >= 3 || (*simDuration > 0 && time.Since(begin) > *simDuration)
		mu.Unlock()
		if stop {
			break
		}
		next <- seed + uint64(i)
	}
	close(next)
	wg.Wait()
	d := time.Since(begin)
	t.Logf("%d schedules in %v on %d workers: %.0f schedules/s, %d failed", ran, d.Round(time.Millisecond), runtime.GOMAXPROCS(0), float64(ran)/d.Seconds(), failed)
}
