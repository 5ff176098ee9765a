package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Kinds of scenarios whose result is not read as lock cycles.
const (
	kindHandoff   = "handoff"    // latency of a leader hand-off
	kindLostReply = "lost-reply" // cycles through a proxy that loses create replies
)

// handoffSessions is the number of participants of a hand-off scenario.
const handoffSessions = 3

// handoffWarmup is the number of unmeasured hand-offs before the measured.
const handoffWarmup = 2

// lostReplyHold is how long a lost-reply cycle holds the lock, so that
// two holds that overlap show.
const lostReplyHold = time.Millisecond

// Groups of the peers suite, in the order they run.
const (
	groupMutex1    = "mutex, 1 session"
	groupMutex     = "mutex, contended"
	groupSemaphore = "semaphore"
	groupRWLock    = "rwlock"
	groupResign    = "hand-off after resign"
	groupClose     = "hand-off after close"
	groupLostReply = "lost create replies"
)

// peerSuite is what make bench-peers measures: the floor, zk.Lock and our
// recipes next to Curator's and kazoo's, in groups compared round by
// round.
func peerSuite() []scenario {
	byID := map[string]scenario{}
	for _, s := range defaultScenarios() {
		byID[s.id] = s
	}
	ours := func(id, group string) scenario {
		s := byID[id]
		s.group = group
		return s
	}
	cyc := func(peer, id, title, scen, group string, contended bool) scenario {
		s := scenario{id: id, title: peer + " " + title, contended: contended, group: group, sessions: 1}
		s.run = func(ctx context.Context, e *env, path string) (result, error) {
			n := 1
			if contended {
				n = e.cfg.sessions
			}
			return peerCycling(peer, scen, n)(ctx, e, path)
		}
		return s
	}
	hand := func(id, title, group string, run func(context.Context, *env, string) (result, error)) scenario {
		return scenario{id: id, title: title, group: group, kind: kindHandoff, run: run}
	}
	lost := func(id, title string, run func(context.Context, *env, string) (result, error)) scenario {
		return scenario{id: id, title: title, group: groupLostReply, kind: kindLostReply, run: run}
	}
	return []scenario{
		byID[idFloor], byID[idZkLock], byID[idMutex],
		cyc(peerCurator, "curator-mutex", "InterProcessMutex", "mutex", groupMutex1, false),
		cyc(peerKazoo, "kazoo-mutex", "Lock", "mutex", groupMutex1, false),
		cyc(peerBaseline, "baseline-mutex", "mutex", "mutex", groupMutex1, false),

		ours(idZkLockContended, groupMutex),
		ours(idMutexContended, groupMutex),
		cyc(peerCurator, "curator-mutex-contended", "InterProcessMutex", "mutex", groupMutex, true),
		cyc(peerKazoo, "kazoo-mutex-contended", "Lock", "mutex", groupMutex, true),
		cyc(peerBaseline, "baseline-mutex-contended", "mutex", "mutex", groupMutex, true),

		ours(idSemContended, groupSemaphore),
		cyc(peerCurator, "curator-semaphore", "InterProcessSemaphoreV2(3)", "semaphore", groupSemaphore, true),
		cyc(peerKazoo, "kazoo-semaphore", "Semaphore(3)", "semaphore", groupSemaphore, true),
		cyc(peerBaseline, "baseline-semaphore", "semaphore(3)", "semaphore", groupSemaphore, true),

		ours(idRWLockReadHeavy, groupRWLock),
		cyc(peerCurator, "curator-rwlock", "InterProcessReadWriteLock 90% reads", "rwlock", groupRWLock, true),
		cyc(peerKazoo, "kazoo-rwlock", "ReadLock/WriteLock 90% reads", "rwlock", groupRWLock, true),
		cyc(peerBaseline, "baseline-rwlock", "rwlock 90% reads", "rwlock", groupRWLock, true),

		hand("leader-resign", "leader: Resign -> next Run callback", groupResign, ourHandoff(false)),
		hand("curator-leader-resign", "Curator LeaderLatch: close() -> next isLeader", groupResign, peerHandoff(peerCurator, "leader-resign")),
		hand("kazoo-leader-resign", "kazoo Election: return -> next run", groupResign, peerHandoff(peerKazoo, "leader-resign")),

		hand("leader-close", "leader: Client.Close -> next Run callback", groupClose, ourHandoff(true)),
		hand("curator-leader-close", "Curator LeaderLatch: client close -> next isLeader", groupClose, peerHandoff(peerCurator, "leader-close")),
		hand("kazoo-leader-close", "kazoo Election: client stop -> next run", groupClose, peerHandoff(peerKazoo, "leader-close")),

		lost("lost-reply", "mutex, lost create replies", goLostReply(openMutexes)),
		lost("zklock-lost-reply", "zk.Lock, lost create replies", goLostReply(openZkLockers)),
		lost("curator-lost-reply", "Curator InterProcessMutex, lost create replies", peerLostReply(peerCurator)),
		lost("kazoo-lost-reply", "kazoo Lock, lost create replies", peerLostReply(peerKazoo)),
	}
}

// peerHandoff returns the run of a peer's hand-off scenario.
func peerHandoff(peer, scen string) func(context.Context, *env, string) (result, error) {
	return func(ctx context.Context, e *env, path string) (result, error) {
		out, packets, err := e.runPeer(ctx, peerRun{
			peer:  peer,
			args:  e.peerArgs(scen, path, handoffSessions, "-handoffs", strconv.Itoa(e.cfg.handoffs)),
			limit: peerStartLimit + time.Duration(e.cfg.handoffs+handoffWarmup)*e.cfg.stall,
		})
		if err != nil {
			return result{}, err
		}
		return out.result(packets), nil
	}
}

// ourHandoff measures the time from a leader's Resign (closeClient: its
// client's Close) to the next leader's Run callback, over -handoffs
// hand-offs among handoffSessions participants, each running
// leader.Election.Run on its own session. The one that left campaigns
// again at the back (closeClient: on a new session).
func ourHandoff(closeClient bool) func(context.Context, *env, string) (result, error) {
	return func(ctx context.Context, e *env, path string) (result, error) {
		type elected struct {
			i int
			t time.Time
		}
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan elected)
		var wg sync.WaitGroup
		clients := make([]*recipe.Client, handoffSessions)
		elections := make([]*leader.Election, handoffSessions)
		defer func() {
			// Clients first, ctx after: no campaign is cut short by its
			// ctx while its create is in flight on an open client.
			for _, c := range clients {
				if c != nil {
					c.Close()
				}
			}
			cancel()
			wg.Wait()
		}()
		join := func(i int) error {
			c, err := e.client(ctx)
			if err != nil {
				return err
			}
			clients[i] = c
			el, err := leader.New(c, path)
			if err != nil {
				return err
			}
			elections[i] = el
			wg.Go(func() {
				_ = el.Run(ctx, func(term context.Context) error {
					select {
					case ch <- elected{i, time.Now()}:
					case <-term.Done():
						return nil
					}
					<-term.Done()
					return nil
				})
			})
			return nil
		}
		for i := range handoffSessions {
			if err := join(i); err != nil {
				return result{}, err
			}
		}
		p0, ok0 := e.serverPackets()
		start := time.Now()
		var m meter
		stalled := func() result {
			m.elapsed = time.Since(start)
			r := m.result()
			r.Status, r.Orphans = statusStalled, -1
			return r
		}
		poll := func() (elected, bool) {
			t := time.NewTimer(e.cfg.stall)
			defer t.Stop()
			select {
			case x := <-ch:
				return x, true
			case <-t.C:
				return elected{}, false
			}
		}
		cur, ok := poll()
		if !ok {
			return stalled(), nil
		}
		for h := range e.cfg.handoffs + handoffWarmup {
			t0 := time.Now()
			if closeClient {
				clients[cur.i].Close()
				if err := join(cur.i); err != nil {
					return result{}, err
				}
			} else if err := elections[cur.i].Resign(ctx); err != nil {
				return result{}, fmt.Errorf("resign: %w", err)
			}
			next, ok := poll()
			if !ok {
				return stalled(), nil
			}
			if h >= handoffWarmup {
				m.lat = append(m.lat, next.t.Sub(t0))
			}
			cur = next
		}
		m.elapsed = time.Since(start)
		p1, ok1 := e.serverPackets()
		m.packets, m.packetsOK = p1-p0, ok0 && ok1
		r := m.result()
		r.Orphans = -1
		return r, nil
	}
}

// peerLostReply returns the lost-reply run of a peer: its sessions
// connect through a fault proxy, which loses the reply to every
// -lost-every-th create once the run starts.
func peerLostReply(peer string) func(context.Context, *env, string) (result, error) {
	return func(ctx context.Context, e *env, path string) (result, error) {
		proxy, err := zktest.NewProxy(e.addr)
		if err != nil {
			return result{}, err
		}
		defer func() { _ = proxy.Close() }()
		pe := *e
		pe.addr = proxy.Addr()
		orphans := -1
		out, packets, err := e.runPeer(ctx, peerRun{
			peer: peer,
			args: pe.peerArgs("lost-reply", path, e.cfg.lostSessions,
				"-cycles", strconv.Itoa(e.cfg.lostCycles),
				"-deadline-ms", ms64(e.cfg.lostTimeout),
				"-hold-ms", ms64(lostReplyHold)),
			limit:       peerStartLimit + e.cfg.lostTimeout + e.cfg.stall,
			beforeGo:    func() { proxy.CutAfterCreates(e.cfg.lostEvery) },
			afterResult: func() { orphans = e.orphans(path) },
		})
		proxy.CutAfterCreates(0)
		if err != nil {
			return result{}, err
		}
		r := out.result(packets)
		r.Cycles = len(out.LatNs)
		r.Overlaps, r.Orphans = overlaps(out.HeldNs), orphans
		return r, nil
	}
}

// goLostReply returns the lost-reply run of an in-process lock opened by
// open: -lost-sessions sessions through a fault proxy, each running
// -lost-cycles Lock+Unlock cycles while the proxy loses the reply to
// every -lost-every-th create. Errors are counted and the cycles go on.
func goLostReply(open func(ctx context.Context, e *env, path string, n int) (*bench, error)) func(context.Context, *env, string) (result, error) {
	return func(ctx context.Context, e *env, path string) (result, error) {
		proxy, err := zktest.NewProxy(e.addr)
		if err != nil {
			return result{}, err
		}
		defer func() { _ = proxy.Close() }()
		pe := *e
		pe.addr = proxy.Addr()
		b, err := open(ctx, &pe, path, e.cfg.lostSessions)
		if err != nil {
			return result{}, err
		}
		defer b.close()
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()

		var (
			mu       sync.Mutex
			lat      []time.Duration
			held     [][2]int64
			errs     int
			progress atomic.Int64
			stop     atomic.Bool
			wg       sync.WaitGroup
		)
		base := time.Now()
		p0, ok0 := e.serverPackets()
		proxy.CutAfterCreates(e.cfg.lostEvery)
		defer proxy.CutAfterCreates(0)
		start := time.Now()
		for _, l := range b.lockers {
			wg.Go(func() {
				for range e.cfg.lostCycles {
					t0 := time.Now()
					if err := l.Lock(runCtx); err != nil {
						if stop.Load() {
							return
						}
						mu.Lock()
						errs++
						mu.Unlock()
						continue
					}
					from := time.Since(base)
					time.Sleep(lostReplyHold)
					to := time.Since(base)
					err := l.Unlock(runCtx)
					if stop.Load() {
						return
					}
					mu.Lock()
					if err != nil {
						errs++
					}
					lat = append(lat, time.Since(t0))
					held = append(held, [2]int64{int64(from), int64(to)})
					mu.Unlock()
					progress.Add(1)
				}
			})
		}
		allDone := make(chan struct{})
		go func() {
			wg.Wait()
			close(allDone)
		}()
		status := watchProgress(allDone, &progress, time.Now().Add(e.cfg.lostTimeout), e.cfg.stall)
		elapsed := time.Since(start)
		mu.Lock()
		m := meter{lat: slices.Clone(lat), elapsed: elapsed}
		heldNow, errsNow := slices.Clone(held), errs
		stop.Store(true)
		mu.Unlock()
		orphans := -1
		if status == "" {
			orphans = e.orphans(path)
		} else {
			// Make every blocked call return: go-zookeeper's take no
			// context, closing the sessions ends them.
			b.close()
			cancel()
		}
		<-allDone
		p1, ok1 := e.serverPackets()
		m.packets, m.packetsOK = p1-p0, ok0 && ok1
		r := m.result()
		r.Status, r.Errors, r.Overlaps, r.Orphans = status, errsNow, overlaps(heldNow), orphans
		return r, nil
	}
}

// watchProgress waits until done is closed (it returns ""), deadline
// passes (statusTimeout) or progress does not move for stall
// (statusStalled).
func watchProgress(done <-chan struct{}, progress *atomic.Int64, deadline time.Time, stall time.Duration) string {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, since := progress.Load(), time.Now()
	for {
		select {
		case <-done:
			return ""
		case now := <-tick.C:
			if p := progress.Load(); p != last {
				last, since = p, now
			}
			switch {
			case now.After(deadline):
				return statusTimeout
			case now.Sub(since) > stall:
				return statusStalled
			}
		}
	}
}

// overlaps counts the holds that began before an earlier-begun hold had
// ended: with a working lock, none.
func overlaps(held [][2]int64) int {
	h := slices.Clone(held)
	slices.SortFunc(h, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	n := 0
	var end int64
	for i, x := range h {
		if i > 0 && x[0] < end {
			n++
		}
		end = max(end, x[1])
	}
	return n
}

// orphanSettle is how long the runner waits, once every cycle of a
// lost-reply run is done, before it counts the nodes left behind: a
// deletion may still be on its way.
const orphanSettle = 300 * time.Millisecond

// orphans returns the number of nodes left under path, which nobody holds
// once every cycle is done, or -1 when it cannot tell.
func (e *env) orphans(path string) int {
	time.Sleep(orphanSettle)
	names, _, err := e.admin.Children(path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0
	case err != nil:
		return -1
	}
	return len(names)
}

// peerRatios are the comparisons of the peers suite. Throughput ratios are
// ours / theirs; the hand-off ones their p50 / ours: above 1, ours is
// faster either way. The targets are issue #12's.
func peerRatios() []ratio {
	r := func(name, num, den, target string, min float64) ratio {
		return ratio{Name: name, num: num, den: den, Target: target, min: min}
	}
	lat := func(name, num, den string) ratio {
		q := r(name, num, den, reportedOnly, 0)
		q.byLatency = true
		return q
	}
	return []ratio{
		r("mutex / Curator, 1 session", idMutex, "curator-mutex", reportedOnly, 0),
		r("mutex / kazoo, 1 session", idMutex, "kazoo-mutex", reportedOnly, 0),
		r("mutex / Curator, contended", idMutexContended, "curator-mutex-contended", reportedOnly, 0),
		r("mutex / kazoo, contended", idMutexContended, "kazoo-mutex-contended", reportedOnly, 0),
		r("semaphore(3) / Curator", idSemContended, "curator-semaphore", ">= 3.7", 3.7),
		r("semaphore(3) / kazoo", idSemContended, "kazoo-semaphore", reportedOnly, 0),
		r("rwlock 90% reads / Curator", idRWLockReadHeavy, "curator-rwlock", ">= 2.1", 2.1),
		r("rwlock 90% reads / kazoo", idRWLockReadHeavy, "kazoo-rwlock", reportedOnly, 0),
		// -baseline: ours now / ours at the baseline's revision.
		r("mutex / baseline, 1 session", idMutex, "baseline-mutex", reportedOnly, 0),
		r("mutex / baseline, contended", idMutexContended, "baseline-mutex-contended", reportedOnly, 0),
		r("semaphore(3) / baseline", idSemContended, "baseline-semaphore", reportedOnly, 0),
		r("rwlock 90% reads / baseline", idRWLockReadHeavy, "baseline-rwlock", reportedOnly, 0),
		lat("hand-off after resign, Curator p50 / ours", "leader-resign", "curator-leader-resign"),
		lat("hand-off after resign, kazoo p50 / ours", "leader-resign", "kazoo-leader-resign"),
		lat("hand-off after close, Curator p50 / ours", "leader-close", "curator-leader-close"),
		lat("hand-off after close, kazoo p50 / ours", "leader-close", "kazoo-leader-close"),
		r("lost replies: mutex / kazoo", "lost-reply", "kazoo-lost-reply", ">= 2.0", 2.0),
		r("lost replies: mutex / Curator", "lost-reply", "curator-lost-reply", reportedOnly, 0),
		r("lost replies: mutex / zk.Lock", "lost-reply", "zklock-lost-reply", reportedOnly, 0),
	}
}
