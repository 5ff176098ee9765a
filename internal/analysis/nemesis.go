package analysis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The kinds of fault the nemesis injects.
const (
	// Between the servers.
	IsolateLeader   = "isolate-leader"   // the leader cut off from every other member
	IsolateFollower = "isolate-follower" // a follower cut off, with its pinned clients
	SplitMinority   = "split-leader-minority"
	OneWayFollower  = "oneway-follower-to-leader" // a follower's messages to its leader lost
	FreezeLeader    = "freeze-leader"             // SIGSTOP
	FreezeFollower  = "freeze-follower"
	KillLeader      = "kill-leader" // SIGKILL, restarted at the end of the fault
	// Between clients and servers.
	ClientPartition = "client-partition" // half the clients cut off from every member
	Expire          = "expire"           // a third of the clients' sessions expired
	PauseHolders    = "pause-holders"    // one holder of each workload paused, its network silent
)

// memberFaults are the faults between servers.
var memberFaults = []string{IsolateLeader, IsolateFollower, OneWayFollower, FreezeLeader, FreezeFollower, KillLeader}

// Fault is one fault as the nemesis injected it.
type Fault struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// Start is when it was injected, Healed when it was lifted, Whole
	// when the ensemble served again with every member (the end of the
	// fault in docs/failure-model.md's sense).
	Start  time.Time `json:"start"`
	Healed time.Time `json:"healed"`
	Whole  time.Time `json:"whole"`
	// Expired are the workers whose sessions the fault expired (Expire);
	// the server expired each at some instant between Start and
	// ExpiredBy, when the nemesis's calls returned.
	Expired   []int     `json:"expired,omitempty"`
	ExpiredBy time.Time `json:"expired_by,omitempty"`
}

// Step is one entry of a schedule: a quiet gap, then a fault held for
// Hold. Pick chooses the targets when the fault is injected (which member
// leads is known only then).
type Step struct {
	Gap, Hold time.Duration
	Kind      string
	Pick      uint64
}

// Schedule returns the faults for a run of the given length on an
// ensemble of members, from seed: the same seed gives the same schedule.
// Faults between servers and faults between clients and servers take
// turns (which comes first is drawn too); the kind within each is drawn.
// Holds last 3 to 8 s (a pause longer than the session timeout T),
// gaps 1 to 3 s; recovery after each fault comes on top.
func Schedule(seed uint64, members int, length, session time.Duration) []Step {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	between := slices.Clone(memberFaults)
	if members >= 5 {
		between = append(between, SplitMinority)
	}
	// Client faults come in rounds of four in a drawn order, two of them
	// the pause: the fault a holder that ignores its loss is exposed by.
	var clients []string
	first := r.IntN(2)
	var out []Step
	// Twice the length as estimated: the nemesis stops at the length.
	for at := time.Duration(0); at < 2*length; {
		s := Step{
			Gap:  time.Second + time.Duration(r.Int64N(int64(2*time.Second))),
			Hold: 3*time.Second + time.Duration(r.Int64N(int64(5*time.Second))),
			Kind: between[r.IntN(len(between))],
			Pick: r.Uint64(),
		}
		if (len(out)+first)%2 == 1 {
			if len(clients) == 0 {
				clients = []string{PauseHolders, Expire, PauseHolders, ClientPartition}
				r.Shuffle(len(clients), func(i, j int) { clients[i], clients[j] = clients[j], clients[i] })
			}
			s.Kind, clients = clients[0], clients[1:]
		}
		if s.Kind == PauseHolders && s.Hold < session+time.Second {
			s.Hold = session + time.Second + time.Duration(r.Int64N(int64(2*time.Second)))
		}
		out = append(out, s)
		at += s.Gap + s.Hold + 5*time.Second // about the recovery
	}
	return out
}

// Exposes reports whether the schedule of seed, in a run of length with
// sessions of session, pauses holders early enough for the pause to end
// within the run (with the recovery of the faults before it reckoned
// generously): the fault a holder that ignores its loss is exposed by.
// The controls of a run without one have nothing to be caught at: a
// short run draws such a schedule for about half its seeds.
func Exposes(seed uint64, members int, length, session time.Duration) bool {
	at := time.Duration(0)
	for _, s := range Schedule(seed, members, length, session) {
		at += s.Gap
		if s.Kind == PauseHolders {
			return at+s.Hold <= length
		}
		at += s.Hold + 8*time.Second
		if at >= length {
			return false
		}
	}
	return false
}

// nemesis injects a schedule's faults into the ensemble and the workers'
// connections.
type nemesis struct {
	e       *zktest.Ensemble
	workers []*worker
	hist    *History
	log     func(string, ...any)
	// progressed reports whether every guarded workload succeeded since t.
	progressed func(t time.Time) bool
	// bound is the longest wait for progress after a fault.
	bound time.Duration
}

// run injects steps until ctx ends or length has passed.
func (n *nemesis) run(ctx context.Context, steps []Step, length time.Duration) {
	end := time.Now().Add(length)
	for _, s := range steps {
		if !locktest.Sleep(ctx, s.Gap) || time.Now().Add(s.Hold).After(end) {
			return
		}
		f := Fault{Kind: s.Kind, Start: time.Now()}
		heal, target, expired, err := n.inject(s)
		f.Target, f.Expired = target, expired
		if len(expired) > 0 {
			f.ExpiredBy = time.Now()
		}
		if err != nil {
			n.log("nemesis: %s: %v", s.Kind, err)
		}
		n.log("nemesis: %s %s for %v", s.Kind, target, s.Hold)
		locktest.Sleep(ctx, s.Hold)
		heal()
		f.Healed = time.Now()
		if err := n.e.WaitQuorum(90 * time.Second); err != nil {
			n.log("nemesis: after %s: %v", s.Kind, err)
		}
		f.Whole = time.Now()
		n.hist.fault(f)
		n.log("nemesis: healed %s; whole after %v", s.Kind, f.Whole.Sub(f.Healed).Round(time.Millisecond))
		// Let the workloads show progress before the next fault.
		deadline := f.Whole.Add(n.bound + 5*time.Second)
		for !n.progressed(f.Whole) && time.Now().Before(deadline) {
			if !locktest.Sleep(ctx, 100*time.Millisecond) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// inject starts the fault of s and returns what lifts it.
func (n *nemesis) inject(s Step) (heal func(), target string, expired []int, err error) {
	nop := func() {}
	members := len(n.e.Servers)
	leader, lerr := n.e.Leader()
	follower := -1
	if lerr == nil {
		follower = (leader + 1 + int(s.Pick%uint64(members-1))) % members
	}
	needLeader := func() error {
		if lerr != nil {
			return lerr
		}
		return nil
	}
	healLinks := func() { _ = n.e.Heal() }
	switch s.Kind {
	case IsolateLeader:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		return healLinks, fmt.Sprintf("member %d", leader), nil, n.e.Isolate(leader)
	case IsolateFollower:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		return healLinks, fmt.Sprintf("member %d", follower), nil, n.e.Isolate(follower)
	case SplitMinority:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		minority := []int{leader, follower}
		var rest []int
		for i := 0; i < members; i++ {
			if !slices.Contains(minority, i) {
				rest = append(rest, i)
			}
		}
		return healLinks, fmt.Sprintf("members %v | %v", minority, rest), nil, n.e.Partition(minority, rest)
	case OneWayFollower:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		return healLinks, fmt.Sprintf("member %d -> %d", follower, leader), nil,
			n.e.PartitionOneWay([]int{follower}, []int{leader})
	case FreezeLeader, FreezeFollower:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		m := leader
		if s.Kind == FreezeFollower {
			m = follower
		}
		return func() { _ = n.e.Thaw(m) }, fmt.Sprintf("member %d", m), nil, n.e.Freeze(m)
	case KillLeader:
		if err := needLeader(); err != nil {
			return nop, "", nil, err
		}
		return func() { _ = n.e.Servers[leader].Restart() }, fmt.Sprintf("member %d", leader), nil, n.e.Kill(leader)
	case ClientPartition:
		ws := n.pickWorkers(s.Pick, 2)
		for _, w := range ws {
			w.partition()
		}
		return func() {
			for _, w := range ws {
				w.heal()
			}
		}, workerIDs(ws), nil, nil
	case Expire:
		ws := n.pickWorkers(s.Pick, 3)
		var errs []error
		var ids []int
		for _, w := range ws {
			if err := w.expire(); err != nil {
				errs = append(errs, err)
			}
			ids = append(ids, w.id)
		}
		if len(errs) > 0 {
			err = errs[0]
		}
		return nop, workerIDs(ws), ids, err
	case PauseHolders:
		ws := n.holders(s.Pick)
		for _, w := range ws {
			w.pause()
		}
		return func() {
			for _, w := range ws {
				w.resume()
			}
		}, workerIDs(ws), nil, nil
	}
	return nop, "", nil, fmt.Errorf("unknown fault %q", s.Kind)
}

// pickWorkers picks every k-th worker, from an offset chosen by pick.
func (n *nemesis) pickWorkers(pick uint64, k int) []*worker {
	var out []*worker
	off := int(pick % uint64(k))
	for i, w := range n.workers {
		if i%k == off {
			out = append(out, w)
		}
	}
	return out
}

// holders picks, for each workload, one of its workers that holds now
// (by pick), in its critical section if one is, or none.
func (n *nemesis) holders(pick uint64) []*worker {
	by := map[string][]*worker{}
	var names []string
	for _, w := range n.workers {
		if w.critical.Load() {
			if _, ok := by[w.workload]; !ok {
				names = append(names, w.workload)
			}
			by[w.workload] = append(by[w.workload], w)
		}
	}
	for _, w := range n.workers {
		if _, ok := by[w.workload]; !ok && w.holding.Load() {
			if _, ok := by[w.workload]; !ok {
				names = append(names, w.workload)
			}
			by[w.workload] = append(by[w.workload], w)
		}
	}
	var out []*worker
	for _, name := range names {
		ws := by[name]
		out = append(out, ws[int(pick%uint64(len(ws)))])
	}
	return out
}

func workerIDs(ws []*worker) string {
	ids := make([]int, len(ws))
	for i, w := range ws {
		ids[i] = w.id
	}
	return fmt.Sprintf("workers %v", ids)
}

// gate stops a worker at its pause points while closed.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // nil: open
}

func (g *gate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}
