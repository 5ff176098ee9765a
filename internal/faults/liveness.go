package faults

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Liveness: once a fault is over, every worker of every cell is granted
// again, by the same client, within the bound B of docs/failure-model.md
// plus the holds queued ahead of it.

// DefaultMaxSleep is the longest sleep of retry.Default(), the policy of
// every client of this package: its pace caps at 2s.
const DefaultMaxSleep = 2 * time.Second

// Bound is B of docs/failure-model.md for a client with session timeout
// session whose retry policy sleeps at most maxSleep between two tries:
// the longest pause of that schedule (the pace of the reconnects, of an
// operation's retries and of the background loops, which run side by
// side, so one pause is all that separates the end of a fault from the
// next try), plus half the session timeout for the round trips that
// follow (a reconnect that learns its session expired and opens a new
// one, the acquire's own requests, the watchdog's tick, and the lock
// handed over by a holder whose hold ended in the fault). For 2s
// sessions and retry.Default() it is 3s.
func Bound(session, maxSleep time.Duration) time.Duration { return maxSleep + session/2 }

// HandoffAllowance is the time allowed, on top of B and of the holds
// themselves, for each hold queued ahead of a worker: the release's round
// trip and the next waiter's wake-up.
const HandoffAllowance = 50 * time.Millisecond

// OverAt returns when the fault on tg is over: the moment a freshly
// connected control client gets its first request answered (an exists of
// the root), trying every 20ms for up to a minute.
func OverAt(ctx context.Context, tg *Target) (time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := recipe.Connect(cctx, tg.Addrs, recipe.WithSessionTimeout(tg.SessionTimeout))
	if err != nil {
		return time.Time{}, fmt.Errorf("control client: %w", err)
	}
	defer c.Close()
	for {
		_, _, err := c.Conn().Exists("/")
		if err == nil {
			return time.Now(), nil
		}
		if !locktest.Sleep(cctx, 20*time.Millisecond) {
			return time.Time{}, fmt.Errorf("control client: no answer: %w", err)
		}
	}
}

// Recovery is the end of a fault as the workers of env's cells saw it.
type Recovery struct {
	// Over is when the fault was over (OverAt); zero if it could not be
	// told, and then Err says why.
	Over  time.Time
	Bound time.Duration
	// Limit is when the wait for every worker's re-take ended.
	Limit time.Time
	Err   error
}

// RecoveryLimit is how long, after the fault is over, the workers are
// given to be granted again before the episode ends: the bound, a long
// hold queued ahead for every worker of a cell and a margin of 5s, so
// that a worker that is late is reported with its lateness rather than
// cut off at the bound.
func RecoveryLimit(bound time.Duration, cfg Config) time.Duration {
	return bound + time.Duration(cfg.Workers+1)*(cfg.LongHold+HandoffAllowance) + 5*time.Second
}

// awaitRecovery waits until the fault on env's target is over, switches
// env's cells to recovery (long acquire timeouts, see Worker.loop) and
// waits until every worker was granted after that, or until the limit.
func (e *Env) awaitRecovery(ctx context.Context, f *Fault) Recovery {
	tg := e.Target
	rec := Recovery{Bound: tg.bound()}
	over, err := OverAt(ctx, tg)
	if err != nil {
		rec.Err = err
		return rec
	}
	rec.Over = over
	for _, c := range e.Cells {
		lim := over.Add(RecoveryLimit(rec.Bound, c.Config))
		rec.Limit = later(rec.Limit, lim)
		c.recoverUntil.Store(lim.UnixNano())
		c.recovering.Store(true)
	}
	for time.Now().Before(rec.Limit) && !e.recovered(over) {
		if !locktest.Sleep(ctx, 20*time.Millisecond) {
			break
		}
	}
	return rec
}

// recovered reports whether every worker of env's cells was granted after
// over.
func (e *Env) recovered(over time.Time) bool {
	for _, c := range e.Cells {
		for _, w := range c.Workers {
			if w.granted.Load() < over.UnixNano() {
				return false
			}
		}
	}
	return true
}

// noteStuck notes, for every cell with a worker not granted again by
// the end of the recovery, what its lock directory held then and the
// workers' sessions: what the worker was waiting for.
func (e *Env) noteStuck(rec Recovery) {
	if rec.Over.IsZero() {
		return
	}
	for _, c := range e.Cells {
		var stuck, sessions, logs []string
		for _, w := range c.Workers {
			st := w.Client.Stats()
			sessions = append(sessions, fmt.Sprintf("worker %d 0x%x (epochs ended %d, suspensions %d, retries %d, refused frames %d)",
				w.ID, w.Client.SessionID(), st.EpochsEnded, st.Suspensions, st.Retries, st.RefusedFrames))
			if w.granted.Load() < rec.Over.UnixNano() {
				stuck = append(stuck, fmt.Sprint(w.ID))
				if w.trace != nil {
					logs = append(logs, fmt.Sprintf("worker %d's log since 5s before the fault's end:\n      %s", w.ID,
						strings.Join(w.trace.since(rec.Over.Add(-5*time.Second)), "\n      ")))
				}
			}
		}
		if len(stuck) == 0 {
			continue
		}
		nodes, err := ListNodes(c.Target.Raw, c.Path)
		var names []string
		for _, n := range nodes {
			names = append(names, n.String())
		}
		dump := dumpGoroutines()
		ep := c.log()
		ep.mu.Lock()
		ep.notes = append(ep.notes, fmt.Sprintf("workers %v not granted again at %v after the fault's end; the directory held %v (err %v); sessions: %v; goroutines: %s",
			stuck, time.Since(rec.Over).Round(time.Millisecond), names, err, sessions, dump)+"\n"+strings.Join(logs, "\n"))
		ep.mu.Unlock()
	}
}

// dumpGoroutines writes every goroutine's stack to a file and returns its
// name (or why it could not).
func dumpGoroutines() string {
	f, err := os.CreateTemp("", "faults-stuck-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return err.Error()
	}
	return f.Name()
}

// bound is B for the target's clients.
func (tg *Target) bound() time.Duration {
	if tg.Bound > 0 {
		return tg.Bound
	}
	return Bound(tg.SessionTimeout, DefaultMaxSleep)
}

// span is the time one node was held by one worker: from its grant to its
// release or loss, across the suspensions it rode out.
type span struct {
	worker     int
	start, end time.Time
}

// spans groups intervals by worker and node.
func spans(ivs []Interval) []span {
	type key struct {
		w    int
		node string
	}
	at := map[key]int{}
	var out []span
	for _, iv := range ivs {
		k := key{iv.Worker, iv.Node}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, span{worker: iv.Worker, start: iv.Start, end: iv.End})
			continue
		}
		out[i].start = earlier(out[i].start, iv.Start)
		out[i].end = later(out[i].end, iv.End)
	}
	return out
}

// ahead is the time worker w may have waited, in [from, to], for holds
// queued ahead of it: for every other holder, its longest hold in that
// window (a queue holds at most one node of each other worker ahead of
// ours; the holds granted to them before ours was queued overlap the time
// B allows for getting there), and how many holders that is.
func ahead(ss []span, w int, from, to time.Time) (time.Duration, int) {
	longest := map[int]time.Duration{}
	for _, s := range ss {
		if s.worker == w {
			continue
		}
		d := earlier(s.end, to).Sub(later(s.start, from))
		if d > longest[s.worker] {
			longest[s.worker] = d
		}
	}
	var sum time.Duration
	for _, d := range longest {
		sum += d
	}
	return sum, len(longest)
}

// checkLiveness checks the cell's episode against the liveness rule and
// adds its findings to r: every worker granted again after rec.Over, and
// no acquire in progress after it waiting longer than B plus the holds
// ahead of it (and their handoffs, and SchedulingAllowance) while its
// context allowed, whether it was granted, timed out, or was still
// waiting when the episode ended.
func (c *Cell) checkLiveness(rec Recovery, r *Result) {
	if rec.Over.IsZero() {
		return
	}
	ep := c.log()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	r.Bound = rec.Bound
	ss := spans(append(slices.Clone(ep.intervals), ep.extra...))
	over := rec.Over
	for _, w := range c.Workers {
		first := time.Time{}
		for _, cl := range ep.calls {
			if cl.worker != w.ID || !cl.acquire {
				continue
			}
			if cl.class == classOK && !cl.end.Before(over) && (first.IsZero() || cl.end.Before(first)) {
				first = cl.end
			}
			c.checkCall(cl, ss, rec, ep.stopAt, r)
		}
		if first.IsZero() {
			r.Problems = append(r.Problems, fmt.Sprintf("liveness: worker %d was not granted again within %v of the fault's end (B %v)",
				w.ID, rec.Limit.Sub(over).Round(time.Millisecond), rec.Bound))
			r.Recovery = append(r.Recovery, -1)
			continue
		}
		r.Recovery = append(r.Recovery, first.Sub(over))
		// The re-take itself: the worker's own holds and pauses since
		// the fault's end count as queued ahead, as a hold of each other
		// worker's does.
		queued, n := ahead(ss, noWorker, over, first)
		beyond := first.Sub(over) - queued
		r.Beyond = max(r.Beyond, beyond)
		if beyond > rec.Bound && w.trace != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("worker %d granted again %v after the fault's end (%v beyond the queue); its log from 3s before the end:\n      %s",
				w.ID, first.Sub(over).Round(time.Millisecond), beyond.Round(time.Millisecond),
				strings.Join(w.trace.since(over.Add(-3*time.Second)), "\n      ")))
		}
		if allow := rec.Bound + SchedulingAllowance + time.Duration(n)*HandoffAllowance + cyclePause; beyond > allow {
			r.Problems = append(r.Problems, fmt.Sprintf("liveness: worker %d granted again %v after the fault was over: %v beyond the %v of holds of %d holders ahead, past B %v + allowance %v",
				w.ID, first.Sub(over).Round(time.Millisecond), beyond.Round(time.Millisecond), queued.Round(time.Millisecond), n, rec.Bound, allow-rec.Bound))
		}
	}
}

// noWorker is no worker's number: ahead counts every worker's holds.
const noWorker = -1 << 30

// cyclePause bounds a worker's own pause between two acquires: 50ms after
// a failed one, PauseMax (20ms) after a hold.
const cyclePause = 50 * time.Millisecond

// checkCall checks one acquire call against the liveness rule.
func (c *Cell) checkCall(cl call, ss []span, rec Recovery, stopAt time.Time, r *Result) {
	if cl.end.Before(rec.Over) {
		return
	}
	from := later(cl.start, rec.Over)
	to, what := cl.end, "granted"
	switch cl.class {
	case classOK:
	case classTimeout:
		to, what = cl.deadline, "timed out"
	case classCancelled:
		if stopAt.IsZero() {
			return
		}
		to, what = earlier(cl.end, stopAt), "still waiting when the episode ended"
	default:
		return
	}
	if !to.After(from) {
		return
	}
	queued, n := ahead(ss, cl.worker, from, to)
	beyond := to.Sub(from) - queued
	r.Beyond = max(r.Beyond, beyond)
	allow := rec.Bound + SchedulingAllowance + time.Duration(n)*HandoffAllowance
	if beyond > allow {
		r.Problems = append(r.Problems, fmt.Sprintf("liveness: worker %d %s %v after the fault was over (call began %v after it): %v beyond the %v of holds of %d holders ahead, past B %v + allowance %v",
			cl.worker, what, to.Sub(rec.Over).Round(time.Millisecond), cl.start.Sub(rec.Over).Round(time.Millisecond),
			beyond.Round(time.Millisecond), queued.Round(time.Millisecond), n, rec.Bound, allow-rec.Bound))
	}
}

// A Ghost is a client of a cell that takes the lock before the episode
// and vanishes in the fault (its proxy black-holes it and is never
// healed): a predecessor gone mid-fault, whose node stays until the
// server expires its session. The workers queued behind it must be
// granted within B of that, and none before it. Its hold counts as a
// hold ahead of every worker.
type Ghost struct {
	cell   *Cell
	Client *recipe.Client
	Proxy  *zktest.Proxy
	held   *Held
	grant  time.Time

	mu       sync.Mutex
	vanished time.Time
	gone     chan ghostEnd // when the server deleted its node
	// CloseTook is how long Client.Close took, called while the ghost was
	// cut off.
	CloseTook time.Duration
}

// AddGhost connects a ghost to c's target through a proxy of its own (to
// the first server) and has it take c's lock.
func (c *Cell) AddGhost(ctx context.Context) (*Ghost, error) {
	tg := c.Target
	p, err := zktest.NewProxy(tg.Addrs[0])
	if err != nil {
		return nil, err
	}
	cl, err := connect(ctx, []string{p.Addr()}, tg.SessionTimeout, c.Config)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s ghost: %w", c.Adapter.Name, err)
	}
	g := &Ghost{cell: c, Client: cl, Proxy: p, gone: make(chan ghostEnd, 1)}
	acq, err := c.Adapter.New(cl, c.Path)
	if err == nil {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		g.held, err = acq(actx, rand.New(largest{}))
		cancel()
	}
	if err != nil {
		g.close()
		return nil, fmt.Errorf("%s ghost: %w", c.Adapter.Name, err)
	}
	g.grant = time.Now()
	c.mu.Lock()
	c.ghosts = append(c.ghosts, g)
	c.mu.Unlock()
	return g, nil
}

// vanish cuts the ghost off for good and follows its node until the server
// deletes it.
func (g *Ghost) vanish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.vanished.IsZero() {
		return
	}
	g.vanished = time.Now()
	g.Proxy.Partition()
	raw := g.cell.Target.Raw
	var nodes []string
	for _, p := range g.held.Parts {
		nodes = append(nodes, g.cell.Path+"/"+p.Node)
	}
	go func() {
		// The session expires a timeout after the server last heard of
		// it, and a restarting server hears nothing until it is back: the
		// wait counts from the last moment the server could not answer,
		// within a hard limit.
		wait := 4*g.cell.Target.SessionTimeout + 60*time.Second
		deadline, hard := time.Now().Add(wait), time.Now().Add(5*time.Minute)
		var present time.Time
		for now := time.Now(); now.Before(deadline) && now.Before(hard); now = time.Now() {
			left := 0
			for _, n := range nodes {
				ok, _, err := raw.Exists(n)
				if err != nil {
					deadline = time.Now().Add(wait)
				}
				if err == nil && ok {
					present = now
				}
				if err != nil || ok {
					left++
				}
			}
			if left == 0 {
				g.gone <- ghostEnd{present: present, gone: time.Now()}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(g.gone)
	}()
}

// Vanish cuts off the ghosts of env's cells.
func (e *Env) Vanish() {
	for _, c := range e.Cells {
		for _, g := range c.Ghosts() {
			g.vanish()
		}
	}
}

// Ghosts returns the cell's ghosts.
func (c *Cell) Ghosts() []*Ghost {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ghosts)
}

// settleGhosts waits for the nodes of the vanished ghosts to go, records
// their holds (as worker -1-i) for the liveness check, checks that no
// worker was granted before they went, and closes the ghosts.
func (e *Env) settleGhosts() {
	for _, c := range e.Cells {
		for i, g := range c.Ghosts() {
			c.settle(g, i)
		}
	}
}

// settle records ghost number i of c.
func (c *Cell) settle(g *Ghost, i int) {
	g.mu.Lock()
	vanished := !g.vanished.IsZero()
	g.mu.Unlock()
	ep := c.log()
	if !vanished {
		g.close()
		return
	}
	end, ok := <-g.gone
	gone := end.gone
	g.close()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !ok {
		ep.problems = append(ep.problems, "ghost: its node was never deleted")
		return
	}
	if g.CloseTook > CloseBound {
		ep.problems = append(ep.problems, fmt.Sprintf("ghost: Client.Close took %v while cut off (bound %v)", g.CloseTook, CloseBound))
	}
	for _, p := range g.held.Parts {
		ep.extra = append(ep.extra, Interval{Worker: -1 - i, Mode: g.held.Mode, Start: g.grant, End: gone, Node: p.Node})
	}
	ep.notes = append(ep.notes, fmt.Sprintf("ghost: vanished %v after its grant, node deleted %v later; Close took %v",
		g.vanished.Sub(g.grant).Round(time.Millisecond), gone.Sub(g.vanished).Round(time.Millisecond), g.CloseTook.Round(time.Millisecond)))
	if g.held.Mode == Shared || g.held.Mode == Lease {
		return
	}
	ep.violations = append(ep.violations, ghostViolations(g.grant, end, ep.intervals)...)
}

// ghostViolations lists the holds of intervals granted after a ghost's
// grant while its node was still there.
func ghostViolations(grant time.Time, end ghostEnd, intervals []Interval) []string {
	var out []string
	for _, iv := range intervals {
		if iv.Start.After(grant) && iv.Start.Before(end.present) {
			out = append(out, fmt.Sprintf("worker %d granted %v while the ghost's node was still there (found there %v later; deleted by %v later)",
				iv.Worker, iv.Node, end.present.Sub(iv.Start).Round(time.Millisecond), end.gone.Sub(iv.Start).Round(time.Millisecond)))
		}
	}
	return out
}

// ghostEnd is what the watcher of a ghost's nodes saw of their end: a
// poll begun at present still found one of them (the server answered
// after that moment), and they were all gone at gone. A worker granted
// before present held while a ghost's node was there: the server only
// tells a worker of a deletion it has made. A worker granted between
// the two may have learnt of the deletion before the watcher, whose
// connection may have been slower to come back after a fault.
type ghostEnd struct {
	present, gone time.Time
}

// close closes the ghost's client, timing it, and its proxy.
func (g *Ghost) close() {
	start := time.Now()
	g.Client.Close()
	g.CloseTook = time.Since(start)
	g.Proxy.Close()
}

// CloseBound is the longest a Client.Close may take, even cut off from
// every server: the second go-zookeeper waits for the server to confirm
// the end of the session, and SchedulingAllowance.
const CloseBound = time.Second + SchedulingAllowance

// largest is a random source that always draws its largest value: a
// ghost takes the exclusive form of its recipe (the write lock of a
// read/write lock, one lease of a semaphore).
type largest struct{}

func (largest) Uint64() uint64 { return math.MaxUint64 }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
