package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The step matrix: one acquire-hold-release cycle of a subject, with a
// second contender, run once without a fault to record the subject's
// requests, then once for every request k of it with a single fault: the
// reply to request k lost (the server applies it), or request k dropped
// before it reaches the server. In both cases the subject's connection is
// cut right then and its client reconnects at once, in the same session.
//
// The cycle of a queued subject: the contender (a direct connection)
// acquires; the subject (behind a proxy) starts its acquire, queues behind
// the contender and waits (its connection idle); the contender releases;
// the subject is granted, holds, and releases while the contender acquires
// again and waits; the contender is granted and releases. A subject that
// comes first acquires on a fresh path (creating the lock directory),
// holds while the contender queues, and releases; the contender is granted
// and releases. Checked: the holds obey the recipe's rule, no node is
// left, no call returns later than its context's bound, the subject's
// release sees success or a documented error, its acquire succeeds (one
// fault, healed at once, must not cost a grant the lock is free for), and
// the contender is granted after the subject's cycle whatever the subject
// saw.

// StepRecipe is one form of a recipe in the step matrix.
type StepRecipe struct {
	Name string
	// Subject takes the faults; Contender holds first, so that the
	// subject queues and waits, or comes second when First.
	Subject, Contender *Adapter
	First              bool
}

// StepRecipes are the forms the step matrix runs.
var StepRecipes = []*StepRecipe{
	{Name: "mutex, first", Subject: Mutex, Contender: Mutex, First: true},
	{Name: "mutex, queued", Subject: Mutex, Contender: Mutex},
	{Name: "rwlock write, first", Subject: RWLockWrite, Contender: RWLockRead, First: true},
	{Name: "rwlock write, queued", Subject: RWLockWrite, Contender: RWLockRead},
	{Name: "rwlock read, first", Subject: RWLockRead, Contender: RWLockWrite, First: true},
	{Name: "rwlock read, queued", Subject: RWLockRead, Contender: RWLockWrite},
	{Name: "semaphore Acquire, first", Subject: SemaphoreOne, Contender: SemaphoreBoth, First: true},
	{Name: "semaphore Acquire, queued", Subject: SemaphoreOne, Contender: SemaphoreBoth},
	{Name: "semaphore AcquireN, first", Subject: SemaphoreBoth, Contender: SemaphoreOne, First: true},
	{Name: "semaphore AcquireN, queued", Subject: SemaphoreBoth, Contender: SemaphoreOne},
	{Name: "leader, first", Subject: Leader, Contender: Leader, First: true},
	{Name: "leader, queued", Subject: Leader, Contender: Leader},
	{Name: "leader Run, first", Subject: LeaderRun, Contender: Leader, First: true},
	{Name: "leader Run, queued", Subject: LeaderRun, Contender: Leader},
}

// StepFaults are the faults injected at every step.
var StepFaults = []zktest.Fault{zktest.LoseReply, zktest.DropRequest}

// Phases of the subject's cycle a request belongs to.
const (
	PhaseAcquire = "acquire" // acquire of a subject that comes first
	PhaseQueue   = "queue"   // acquire, before the contender released
	PhaseWake    = "wake"    // acquire, after the contender released
	PhaseHold    = "hold"    // between the acquire and the release calls
	PhaseRelease = "release" // release
)

// Step is one request of the subject's cycle, as the clean run recorded
// it.
type Step struct {
	N     int // 1-based position among the subject's requests (pings aside)
	Op    zktest.Op
	Phase string
}

func (s Step) String() string { return fmt.Sprintf("%d %s %s", s.N, s.Phase, s.Op) }

// StepResult is one run of a cycle.
type StepResult struct {
	Recipe string
	Step   Step         // zero for the clean run
	Fault  zktest.Fault // 0 for the clean run
	// Fired reports whether the fault hit (the cycle reached step N),
	// and Hit the kind of request it hit: the requests a recipe sends at
	// once (a listing and a read) may leave in either order.
	Fired bool
	Hit   zktest.Op
	// Acquire and Release are the classes of the subject's results
	// ("ok", "timeout", "gave-up", "lost", ...; Release "-" when nothing
	// was acquired). Lost names the reason when the subject's hold was
	// lost while held.
	Acquire, Release, Lost string
	// Retries and Recovered are the subject's client counters over the
	// cycle: requests retried after a connection loss, and nodes found
	// again by their UUID after a lost create reply.
	Retries, Recovered int64
	// Requests are the subject's requests in this run, pings aside, as
	// "op" or "op(fault)", with "|" where the connection changed.
	Requests string
	// Problems are the properties the run broke.
	Problems []string
	Took     time.Duration
}

// StepRig is where the step matrix runs: one server, and the timeouts of
// the cycle.
type StepRig struct {
	Addr string
	// Raw is a direct connection for listing nodes.
	Raw                                            *zk.Conn
	SessionTimeout, AcquireTimeout, ReleaseTimeout time.Duration
	// Idle is how long the subject's connection must carry no request for
	// the subject to count as queued and waiting.
	Idle time.Duration
	// Hold is how long the subject holds.
	Hold time.Duration
}

// Record runs the cycle without a fault on a fresh path and returns its
// result and the subject's requests.
func (g *StepRig) Record(ctx context.Context, sr *StepRecipe, path string) (StepResult, []Step, error) {
	return g.cycle(ctx, sr, path, Step{}, 0)
}

// Run runs the cycle on a fresh path with fault f at step s.
func (g *StepRig) Run(ctx context.Context, sr *StepRecipe, path string, s Step, f zktest.Fault) (StepResult, error) {
	r, _, err := g.cycle(ctx, sr, path, s, f)
	return r, err
}

// outcome is what an acquire goroutine returns.
type outcome struct {
	h   *Held
	err error
	at  time.Time
}

func (g *StepRig) cycle(ctx context.Context, sr *StepRecipe, path string, s Step, f zktest.Fault) (StepResult, []Step, error) {
	res := StepResult{Recipe: sr.Name, Step: s, Fault: f, Release: "-"}
	begin := time.Now()
	p, err := zktest.NewProxy(g.Addr)
	if err != nil {
		return res, nil, err
	}
	defer p.Close()
	connect := func(addrs ...string) (*recipe.Client, error) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return recipe.Connect(cctx, addrs, recipe.WithSessionTimeout(g.SessionTimeout))
	}
	// Listed twice: go-zookeeper reconnects at once.
	sc, err := connect(p.Addr(), p.Addr())
	if err != nil {
		return res, nil, err
	}
	defer sc.Close()
	cc, err := connect(g.Addr)
	if err != nil {
		return res, nil, err
	}
	defer cc.Close()
	subject, err := sr.Subject.New(sc, path)
	if err != nil {
		return res, nil, err
	}
	contender, err := sr.Contender.New(cc, path)
	if err != nil {
		return res, nil, err
	}
	rng := rand.New(rand.NewPCG(1, 1)) // the adapters' modes are fixed
	acquire := func(a Acquirer, timeout time.Duration) <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			h, err := a(actx, rng)
			ch <- outcome{h, err, time.Now()}
		}()
		return ch
	}
	var ivs []Interval
	problem := func(format string, args ...any) {
		res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
	}
	release := func(who string, h *Held) (time.Time, string) {
		rctx, cancel := context.WithTimeout(ctx, g.ReleaseTimeout)
		defer cancel()
		start := time.Now()
		class := classOK
		for i, err := range h.Release(rctx) {
			c := classifyRelease(err)
			if c == classUndocumented {
				problem("%s: release of %s returned an undocumented error: %v", who, h.Parts[i].Node, err)
			}
			if c != classOK {
				class = c
			}
		}
		if over := time.Since(start) - g.ReleaseTimeout; over > ReleaseBound {
			problem("%s: release returned %v after its context ended", who, over.Round(time.Millisecond))
		}
		return start, class
	}
	requests := func() int {
		st := p.Stats()
		return st.Requests + st.Dropped
	}

	// subjectHolds holds what the subject acquired for g.Hold (while the
	// contender queues), then releases it.
	released := 0
	subjectHolds := func(a outcome) {
		lost := watchDone(a.h)
		locktest.Sleep(ctx, g.Hold)
		released = requests()
		ended := lost() // a release closes Done too
		var relStart time.Time
		relStart, res.Release = release("subject", a.h)
		ivs = append(ivs, heldIntervals(0, a.h, a.at, relStart, ended)...)
		for i, e := range ended {
			if e.IsZero() {
				continue
			}
			err := a.h.Parts[i].Err()
			res.Lost = lossReason(err)
			if res.Lost == "" {
				problem("subject: Done of %s closed while held but Err() = %v, not a documented loss", a.h.Parts[i].Node, err)
			}
		}
	}
	subjectAcquired := func(a outcome, start, free time.Time) {
		res.Acquire = classifyAcquire(sr.Subject, a.err)
		switch {
		case res.Acquire == classUndocumented:
			problem("subject: acquire returned an undocumented error: %v", a.err)
		case a.err != nil:
			// One fault, healed at once (the client reconnects in the same
			// session), and a context of seconds: failing is missing the
			// grant.
			problem("subject: acquire failed after %v although the lock was free from +%v: %v",
				a.at.Sub(start).Round(time.Millisecond), free.Sub(start).Round(time.Millisecond), a.err)
		}
		if over := a.at.Sub(start) - g.AcquireTimeout; over > AcquireBound {
			problem("subject: acquire returned %v after its context ended", over.Round(time.Millisecond))
		}
	}
	b2Timeout := g.AcquireTimeout + g.Hold + g.ReleaseTimeout
	var bch <-chan outcome
	wake := 0 // requests of the subject before the contender released
	granted := 0
	subjectStats := sc.Stats()
	if sr.First {
		// The subject acquires on a fresh path, then the contender queues.
		p.Record()
		if f != 0 {
			p.Arm(f, s.N)
		}
		aStart := time.Now()
		a := <-acquire(subject, g.AcquireTimeout)
		granted = requests()
		subjectAcquired(a, aStart, aStart)
		bch = acquire(contender, b2Timeout)
		if a.err == nil {
			g.waitNodes(path, len(a.h.Parts))
			subjectHolds(a)
		}
	} else {
		// The contender holds.
		b1 := <-acquire(contender, g.AcquireTimeout)
		if b1.err != nil {
			return res, nil, fmt.Errorf("%s: the contender's first acquire: %w", sr.Name, b1.err)
		}
		// The subject queues behind it.
		p.Record()
		if f != 0 {
			p.Arm(f, s.N)
		}
		aStart := time.Now()
		ach := acquire(subject, g.AcquireTimeout)
		a, got := g.waitQueued(ach, requests, path, len(b1.h.Parts))
		wake = requests()
		// The contender releases; the subject is granted.
		b1End, b1Class := release("contender", b1.h)
		free := time.Now()
		if b1Class != classOK {
			problem("contender: first release: %s", b1Class)
		}
		ivs = append(ivs, heldIntervals(1, b1.h, b1.at, b1End, nil)...)
		if !got {
			a = <-ach
		}
		granted = requests()
		subjectAcquired(a, aStart, free)
		// The contender queues again while the subject holds.
		bch = acquire(contender, b2Timeout)
		if a.err == nil {
			subjectHolds(a)
		}
	}
	if released == 0 {
		released = granted
	}
	rec := p.Recorded()
	var trace []string
	conn := 0
	for _, r := range rec {
		if r.Fault != 0 {
			res.Hit = r.Op
		}
		if r.Op == zktest.OpPing {
			continue
		}
		t := r.Op.String()
		if r.Fault != 0 {
			t += "(" + r.Fault.String() + ")"
		}
		if conn != 0 && r.Conn != conn {
			t = "| " + t
		}
		conn = r.Conn
		trace = append(trace, t)
	}
	res.Requests = strings.Join(trace, " ")
	st := sc.Stats().Sub(subjectStats)
	res.Retries, res.Recovered = st.Retries, st.Recovered

	// The contender is granted whatever the subject saw.
	b2 := <-bch
	if b2.err != nil {
		left, _ := ListNodes(g.Raw, path)
		problem("contender: acquire after the subject's cycle: %v (nodes: %v)", b2.err, left)
	} else {
		b2End, b2Class := release("contender", b2.h)
		if b2Class != classOK {
			problem("contender: second release: %s", b2Class)
		}
		ivs = append(ivs, heldIntervals(1, b2.h, b2.at, b2End, nil)...)
	}
	for _, v := range CheckIntervals(ivs, sr.Subject.MaxLeases) {
		problem("safety: %s", v)
	}
	left, err := WaitEmpty(g.Raw, path, g.SessionTimeout+time.Second)
	if err != nil {
		problem("listing %s: %v", path, err)
	}
	for _, n := range left {
		problem("node left: %s", n)
	}
	ps := p.Stats()
	res.Fired = (f == zktest.LoseReply && ps.Cuts > 0) || (f == zktest.DropRequest && ps.Dropped > 0)
	res.Took = time.Since(begin)

	var steps []Step
	for _, r := range rec {
		if r.Op == zktest.OpPing {
			continue
		}
		n := len(steps) + 1
		phase := PhaseRelease
		switch {
		case sr.First && n <= granted:
			phase = PhaseAcquire
		case n <= wake:
			phase = PhaseQueue
		case n <= granted:
			phase = PhaseWake
		case n <= released:
			phase = PhaseHold
		}
		steps = append(steps, Step{N: n, Op: r.Op, Phase: phase})
	}
	return res, steps, nil
}

// waitQueued waits until the subject's acquire returned (got) or the
// subject is queued: it has more nodes in path than the contender's
// holding ones and its connection carried no request for g.Idle. It
// gives up waiting after a few seconds.
func (g *StepRig) waitQueued(ach <-chan outcome, requests func() int, path string, holding int) (a outcome, got bool) {
	deadline := time.Now().Add(3 * time.Second)
	last, since := -1, time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case a = <-ach:
			return a, true
		case <-tick.C:
		}
		if n := requests(); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) < g.Idle {
			continue
		}
		if nodes, err := ListNodes(g.Raw, path); err == nil && len(nodes) > holding {
			return a, false
		}
	}
	return a, false
}

// waitNodes waits, a few seconds at most, until path has more than
// holding nodes and then g.Idle more, so that the contender (a direct
// connection, whose requests the proxy does not see) has queued and set
// its watches. A contender granted meanwhile is the safety check's
// business.
func (g *StepRig) waitNodes(path string, holding int) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if nodes, err := ListNodes(g.Raw, path); err == nil && len(nodes) > holding {
			time.Sleep(g.Idle)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchDone watches the Done channels of h's parts from now on; the
// function it returns stops watching and tells when each closed (zero:
// not closed).
func watchDone(h *Held) func() []time.Time {
	stop := make(chan struct{})
	ended := make([]time.Time, len(h.Parts))
	var wg sync.WaitGroup
	for i, p := range h.Parts {
		wg.Go(func() {
			select {
			case <-p.Done:
				ended[i] = time.Now()
			case <-stop:
			}
		})
	}
	return func() []time.Time {
		close(stop)
		wg.Wait()
		return ended
	}
}

// heldIntervals returns the intervals of h's parts, held from start to
// end, or to the time its Done closed (ended[i], when not zero).
func heldIntervals(worker int, h *Held, start, end time.Time, ended []time.Time) []Interval {
	out := make([]Interval, len(h.Parts))
	for i, p := range h.Parts {
		iv := Interval{Worker: worker, Mode: h.Mode, Start: start, End: end, Token: p.Token, Node: p.Node}
		if ended != nil && !ended[i].IsZero() && ended[i].Before(end) {
			iv.End, iv.Lost = ended[i], true
		}
		out[i] = iv
	}
	return out
}

// Cell is the matrix's cell text: "ok" when the subject acquired and
// released, else the classes seen; "not hit" when the cycle never
// reached the step; "FAIL" when a property broke.
func (r StepResult) Cell() string {
	switch {
	case len(r.Problems) > 0:
		return "FAIL"
	case r.Fault != 0 && !r.Fired:
		return "not hit"
	case r.Lost != "":
		return "lost (" + r.Lost + ")"
	case r.Acquire == classOK && r.Release == classOK:
		return "ok"
	case r.Acquire != classOK:
		return "acquire " + r.Acquire
	}
	return "release " + r.Release
}

// StepTable prints the matrix: one row per recipe and step, one column
// per fault, as a Markdown table.
func StepTable(rs []StepResult) string {
	type key struct {
		recipe string
		n      int
	}
	rows := map[key]map[zktest.Fault]StepResult{}
	steps := map[key]Step{}
	order := map[string]int{}
	for _, r := range rs {
		if r.Fault == 0 {
			continue
		}
		if _, ok := order[r.Recipe]; !ok {
			order[r.Recipe] = len(order)
		}
		k := key{r.Recipe, r.Step.N}
		if rows[k] == nil {
			rows[k] = map[zktest.Fault]StepResult{}
		}
		rows[k][r.Fault] = r
		steps[k] = r.Step
	}
	keys := make([]key, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].recipe != keys[j].recipe {
			return order[keys[i].recipe] < order[keys[j].recipe]
		}
		return keys[i].n < keys[j].n
	})
	var b strings.Builder
	b.WriteString("| recipe | step | phase | request |")
	for _, f := range StepFaults {
		fmt.Fprintf(&b, " %s |", f)
	}
	b.WriteString("\n|---|---|---|---|")
	for range StepFaults {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range keys {
		s := steps[k]
		fmt.Fprintf(&b, "| %s | %d | %s | %s |", k.recipe, s.N, s.Phase, s.Op)
		for _, f := range StepFaults {
			r, ok := rows[k][f]
			cell := "-"
			if ok {
				cell = r.Cell()
				if r.Recovered > 0 {
					cell += fmt.Sprintf(", %d recovered", r.Recovered)
				}
				if r.Fired && r.Hit != s.Op {
					cell += fmt.Sprintf(" (hit %s)", r.Hit)
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}
