package leader_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// term is one term of leadership as its participant saw it: it starts when
// Run calls the function and ends when the function's context is cancelled
// or the participant decides to give up the term (before Run resigns).
type term struct {
	slot  int
	id    string
	token int64
	start time.Time
	end   time.Time
	cause error // context.Cause of the term's context; nil if given up

	resign chan struct{} // closed by the test: give up the term
}

// cluster runs participants in slots, each through leader.Election.Run on
// a client of its own, and records every term. A participant whose client
// is closed is replaced in its slot by a new one (a new client and id).
type cluster struct {
	t     *testing.T
	path  string
	addrs func(slot int) []string
	opts  []recipe.Option

	started chan *term
	terms   locktest.Log[term]
	wg      sync.WaitGroup

	mu      sync.Mutex
	clients map[int]*recipe.Client
	active  map[int]*term
}

func newCluster(t *testing.T, path string, addrs func(slot int) []string, opts ...recipe.Option) *cluster {
	return &cluster{
		t: t, path: path, addrs: addrs, opts: opts,
		started: make(chan *term, 1024),
		clients: make(map[int]*recipe.Client),
		active:  make(map[int]*term),
	}
}

// start runs n participants until ctx ends; wait waits for them to end.
func (cl *cluster) start(ctx context.Context, n int) {
	for slot := range n {
		cl.wg.Add(1)
		go cl.runSlot(ctx, slot)
	}
}

func (cl *cluster) wait() { cl.wg.Wait() }

func (cl *cluster) runSlot(ctx context.Context, slot int) {
	defer cl.wg.Done()
	for gen := 0; ctx.Err() == nil; gen++ {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		c, err := recipe.Connect(cctx, cl.addrs(slot), cl.opts...)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				cl.t.Errorf("slot %d: connect: %v", slot, err)
			}
			return
		}
		id := fmt.Sprintf("p%d.%d", slot, gen)
		e, err := leader.New(c, cl.path, leader.WithData([]byte(id)))
		if err != nil {
			cl.t.Errorf("slot %d: %v", slot, err)
			c.Close()
			return
		}
		cl.mu.Lock()
		cl.clients[slot] = c
		cl.mu.Unlock()
		err = e.Run(ctx, func(tctx context.Context) error {
			tm := &term{slot: slot, id: id, token: e.Token(), start: time.Now(), resign: make(chan struct{})}
			cl.mu.Lock()
			cl.active[slot] = tm
			cl.mu.Unlock()
			select {
			case cl.started <- tm:
			default:
				cl.t.Error("too many terms for the test's buffer")
			}
			select {
			case <-tctx.Done():
				tm.cause = context.Cause(tctx)
			case <-tm.resign:
			}
			tm.end = time.Now()
			cl.mu.Lock()
			delete(cl.active, slot)
			cl.mu.Unlock()
			cl.terms.Add(term{slot: slot, id: id, token: tm.token, start: tm.start, end: tm.end, cause: tm.cause})
			return nil
		})
		c.Close()
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, recipe.ErrClosed) {
			cl.t.Errorf("participant %s: Run = %v, want an error wrapping recipe.ErrClosed", id, err)
			return
		}
	}
}

func (cl *cluster) client(slot int) *recipe.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.clients[slot]
}

// leading returns the terms in progress.
func (cl *cluster) leading() []*term {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []*term
	for _, tm := range cl.active {
		out = append(out, tm)
	}
	return out
}

// settle waits until all n participants are in line, before the test
// stops them: a participant still reconnecting after being cut off would
// leave the deletion of its node to the background while its client closes.
func (cl *cluster) settle(t *testing.T, watcher *leader.Election, n int) {
	t.Helper()
	locktest.Eventually(t, 20*time.Second, "every participant in line", func() bool {
		p, err := watcher.Participants(context.Background())
		return err == nil && len(p) == n
	})
}

// next waits for the next term to start.
func (cl *cluster) next(t *testing.T, timeout time.Duration, what string) *term {
	t.Helper()
	select {
	case tm := <-cl.started:
		return tm
	case <-time.After(timeout):
		t.Fatalf("no participant started a term within %v %s", timeout, what)
	}
	return nil
}

// ended waits until the term with token has ended and returns it.
func (cl *cluster) ended(t *testing.T, token int64) term {
	t.Helper()
	var found term
	locktest.Eventually(t, 10*time.Second, fmt.Sprintf("the end of term %#x", token), func() bool {
		for _, tm := range cl.terms.Items() {
			if tm.token == token {
				found = tm
				return true
			}
		}
		return false
	})
	return found
}

// checkOneLeader fails the test if two terms overlapped, as the
// participants saw them, or if tokens did not increase from term to term.
func checkOneLeader(t *testing.T, terms []term) {
	t.Helper()
	if len(terms) == 0 {
		t.Fatal("no terms recorded")
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
	t0 := terms[0].start
	rel := func(at time.Time) time.Duration { return at.Sub(t0).Round(time.Microsecond) }
	latest := terms[0]
	gap := time.Duration(-1)
	for i, tm := range terms {
		if tm.end.Before(tm.start) {
			t.Errorf("term %s %#x ends at +%v before it starts at +%v", tm.id, tm.token, rel(tm.end), rel(tm.start))
		}
		if i == 0 {
			continue
		}
		if d := tm.start.Sub(latest.end); gap < 0 || d < gap {
			gap = d
		}
		if tm.start.Before(latest.end) {
			t.Errorf("two leaders: %s (token %#x) started at +%v while %s (token %#x) led from +%v until +%v",
				tm.id, tm.token, rel(tm.start), latest.id, latest.token, rel(latest.start), rel(latest.end))
		}
		if prev := terms[i-1]; tm.token <= prev.token {
			t.Errorf("term %s has token %#x after %s's %#x: tokens must strictly increase", tm.id, tm.token, prev.id, prev.token)
		}
		if tm.end.After(latest.end) {
			latest = tm
		}
	}
	t.Logf("%d terms, never two leaders; smallest gap between one term's end and the next one's start: %v", len(terms), gap)
}

// observe collects what an observer delivers until its channel closes.
// It takes Observe's results as they are; Observe fails only on a nil ctx.
func observe(ch <-chan leader.Participant, err error) (seen func() []leader.Participant, done <-chan struct{}) {
	if err != nil {
		panic(err)
	}
	var log locktest.Log[leader.Participant]
	d := make(chan struct{})
	go func() {
		defer close(d)
		for info := range ch {
			log.Add(info)
		}
	}()
	return log.Items, d
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Five participants, fifty forced changes of leader: the leader gives up
// its term (Run resigns), closes its client without resigning, or is cut
// off by its proxy until the server expires its session. Never two
// leaders; tokens increase; an observer outside the election sees every
// leader, in order, once; the next participant leads within one watch
// round trip after a resignation or a close, and within the session
// timeout plus a second after a leader was cut off.
func TestForcedChanges(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const participants, changes = 5, 50
	const session = 2 * time.Second
	proxies := make([]*zktest.Proxy, participants)
	for i := range proxies {
		p, err := zktest.NewProxy(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies[i] = p
	}
	// Each address is listed twice: go-zookeeper pauses a second before
	// retrying a server list it has cycled through.
	cl := newCluster(t, path, func(slot int) []string { a := proxies[slot].Addr(); return []string{a, a} },
		recipe.WithSessionTimeout(session))

	watcher := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	octx, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	seen, observed := observe(watcher.Observe(octx))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl.start(ctx, participants)
	defer cl.wait()
	defer cancel()

	kinds := []string{"resign", "close", "resign", "cut off", "resign", "close", "cut off", "resign", "close", "resign"}
	cur := cl.next(t, 30*time.Second, "at the start")
	leaders := []*term{cur}
	latency := map[string][]time.Duration{}
	for i := range changes {
		kind := kinds[i%len(kinds)]
		time.Sleep(30 * time.Millisecond) // the leader's work
		var limit time.Duration
		at := time.Now()
		switch kind {
		case "resign":
			close(cur.resign)
		case "close":
			cl.client(cur.slot).Close()
		case "cut off":
			limit = cl.client(cur.slot).SessionTimeout() + time.Second
			at = time.Now()
			proxies[cur.slot].Partition()
		}
		next := cl.next(t, 15*time.Second, fmt.Sprintf("after change %d (%s of %s)", i, kind, cur.id))
		took := next.start.Sub(at)
		if kind == "cut off" {
			proxies[cur.slot].Heal()
			if took > limit {
				t.Errorf("change %d: the next participant led %v after the leader was cut off, want at most the session timeout + 1s = %v", i, took, limit)
			}
		} else if took > 5*time.Second {
			t.Errorf("change %d: the next participant led %v after a %s", i, took, kind)
		}
		if next.slot == cur.slot {
			t.Errorf("change %d (%s): slot %d led again at once", i, kind, cur.slot)
		}
		latency[kind] = append(latency[kind], took)
		leaders = append(leaders, next)
		cur = next
	}
	for _, kind := range []string{"resign", "close", "cut off"} {
		d := latency[kind]
		t.Logf("failover after %-7s n=%2d  p50 %8v  p99 %8v  max %8v", kind, len(d),
			percentile(d, 0.5).Round(time.Microsecond), percentile(d, 0.99).Round(time.Microsecond),
			slices.Max(d).Round(time.Microsecond))
	}
	fast := append(slices.Clone(latency["resign"]), latency["close"]...)
	t.Logf("failover after resign or close (one watch round trip) n=%d  p50 %v  p99 %v",
		len(fast), percentile(fast, 0.5).Round(time.Microsecond), percentile(fast, 0.99).Round(time.Microsecond))

	// The observer has caught up with the last leader.
	locktest.Eventually(t, 10*time.Second, "the observer sees the last leader", func() bool {
		s := seen()
		return len(s) > 0 && s[len(s)-1].Token == cur.token
	})
	stopObserving()
	<-observed
	cl.settle(t, watcher, participants)
	cancel()
	cl.wait()

	checkOneLeader(t, cl.terms.Items())
	got := seen()
	if len(got) != len(leaders) {
		t.Errorf("the observer saw %d leaders, the participants %d", len(got), len(leaders))
	}
	for i := range min(len(got), len(leaders)) {
		if got[i].Token != leaders[i].token || string(got[i].Data) != leaders[i].id {
			t.Errorf("leader %d: observed %s %#x, participants say %s %#x", i, string(got[i].Data), got[i].Token, leaders[i].id, leaders[i].token)
			break
		}
	}
	t.Logf("%d changes, %d terms recorded, %d leaders observed", changes, len(cl.terms.Items()), len(got))
}

// The leader's traffic is black-holed: its term's context is cancelled
// before any other participant starts a term, in every trial.
func TestPartitionedLeaderStopsFirst(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const participants, trials = 3, 20
	const session = 2 * time.Second
	proxies := make([]*zktest.Proxy, participants)
	for i := range proxies {
		p, err := zktest.NewProxy(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies[i] = p
	}
	cl := newCluster(t, path, func(slot int) []string { a := proxies[slot].Addr(); return []string{a, a} },
		recipe.WithSessionTimeout(session))
	watcher := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl.start(ctx, participants)
	defer cl.wait()
	defer cancel()

	cur := cl.next(t, 30*time.Second, "at the start")
	var margins, failovers []time.Duration
	for trial := range trials {
		locktest.Eventually(t, 20*time.Second, "every participant in line", func() bool {
			p, err := watcher.Participants(ctx)
			return err == nil && len(p) == participants
		})
		limit := cl.client(cur.slot).SessionTimeout() + time.Second
		at := time.Now()
		proxies[cur.slot].Partition()
		next := cl.next(t, 15*time.Second, fmt.Sprintf("after trial %d cut off %s", trial, cur.id))
		proxies[cur.slot].Heal()
		lost := cl.ended(t, cur.token)
		margin := next.start.Sub(lost.end)
		t.Logf("trial %2d: %s cut off; its term context cancelled after %v; %s leads after %v; margin %v",
			trial, cur.id, lost.end.Sub(at).Round(time.Millisecond),
			next.id, next.start.Sub(at).Round(time.Millisecond), margin.Round(time.Millisecond))
		if !lost.end.Before(next.start) {
			t.Errorf("trial %d: %s's term context was cancelled at %v, after %s started leading at %v",
				trial, cur.id, lost.end, next.id, next.start)
		}
		if !errors.Is(lost.cause, leader.ErrLost) || !errors.Is(lost.cause, recipe.ErrConnectionSuspended) {
			t.Errorf("trial %d: cause %v, want ErrLost and recipe.ErrConnectionSuspended", trial, lost.cause)
		}
		if took := next.start.Sub(at); took > limit {
			t.Errorf("trial %d: next leader after %v, want at most %v", trial, took, limit)
		}
		margins = append(margins, margin)
		failovers = append(failovers, next.start.Sub(at))
		cur = next
	}
	t.Logf("%d trials: cut-off leader told before the next led in every one; margin min %v p50 %v; failover p50 %v max %v",
		trials, slices.Min(margins).Round(time.Millisecond), percentile(margins, 0.5).Round(time.Millisecond),
		percentile(failovers, 0.5).Round(time.Millisecond), slices.Max(failovers).Round(time.Millisecond))
	cl.settle(t, watcher, participants)
	cancel()
	cl.wait()
	checkOneLeader(t, cl.terms.Items())
}

// Killing the leader of a 3-server ensemble, twice (the killed server is
// started again in between): the election carries on (a participant leads
// afterwards, and Run still hands leadership over), and there are never
// two leaders.
func TestEnsembleLeaderKilled(t *testing.T) {
	start := time.Now()
	ens := zktest.StartEnsemble(t, 3)
	t.Logf("ensemble started in %v", time.Since(start).Round(time.Millisecond))
	path := zktest.UniquePath(t)
	const participants, rounds = 3, 2
	const session = 4 * time.Second
	// Every connection the participants open, for proof that the
	// ensemble's failover did reach them.
	var dials atomic.Int64
	countDials := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
	cl := newCluster(t, path, func(int) []string { return ens.Addrs() },
		recipe.WithSessionTimeout(session), recipe.WithDialer(countDials))
	watcher := newElection(t, locktest.Client(t, ens.Addrs(), recipe.WithSessionTimeout(session)), path)
	octx, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	seen, observed := observe(watcher.Observe(octx))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl.start(ctx, participants)
	defer cl.wait()
	defer cancel()

	cur := cl.next(t, 30*time.Second, "at the start")
	for round := range rounds {
		cl.settle(t, watcher, participants)
		// Every client is disconnected when the ensemble loses its leader
		// (the followers drop their clients until a new leader is elected).
		dialed := dials.Load()
		zkLeader, err := ens.Leader()
		if err != nil {
			t.Fatal(err)
		}
		if err := ens.Servers[zkLeader].Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := ens.WaitQuorum(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: ZooKeeper server %d (the ensemble's leader) killed; new quorum after %v",
			round, zkLeader, time.Since(killed).Round(time.Millisecond))

		var now *term
		locktest.Eventually(t, 30*time.Second, "a leader after the ensemble's leader was killed", func() bool {
			l := cl.leading()
			if len(l) != 1 {
				return false
			}
			info, err := watcher.Leader(ctx)
			if err != nil || info.Token != l[0].token {
				return false
			}
			now = l[0]
			return true
		})
		if dials.Load() == dialed {
			t.Errorf("round %d: no participant reconnected: the test proved nothing", round)
		}
		if now.token == cur.token {
			t.Logf("round %d: %s kept its term (token %#x) through the ensemble's failover", round, now.id, now.token)
		} else {
			t.Logf("round %d: %s led (token %#x); %s leads after the ensemble's failover (token %#x)", round, cur.id, cur.token, now.id, now.token)
		}

		// Run still hands leadership over.
		close(now.resign)
		var next *term
		locktest.Eventually(t, 20*time.Second, "the next leader after a resignation", func() bool {
			for _, tm := range cl.leading() {
				if tm.token > now.token {
					next = tm
					return true
				}
			}
			return false
		})
		if next.slot == now.slot {
			t.Errorf("round %d: %s led again right after resigning", round, next.id)
		}
		t.Logf("round %d: after %s resigned, %s leads (token %#x)", round, now.id, next.id, next.token)
		cur = next
		if err := ens.Restart(zkLeader); err != nil {
			t.Fatal(err)
		}
	}
	locktest.Eventually(t, 10*time.Second, "the observer sees the last leader", func() bool {
		s := seen()
		return len(s) > 0 && s[len(s)-1].Token == cur.token
	})
	stopObserving()
	<-observed
	cl.settle(t, watcher, participants)
	cancel()
	cl.wait()
	terms := cl.terms.Items()
	checkOneLeader(t, terms)
	got := seen()
	for i := 1; i < len(got); i++ {
		if got[i].Token <= got[i-1].Token {
			t.Errorf("observer delivered %s %#x after %s %#x: tokens must strictly increase", string(got[i].Data), got[i].Token, string(got[i-1].Data), got[i-1].Token)
		}
	}
	t.Logf("%d terms; the observer saw %d leaders", len(terms), len(got))
}
