package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Config describes one run.
type Config struct {
	// Members is the ensemble's size (3 or 5).
	Members int
	// Seed picks the schedule of faults and the workers' timings.
	Seed uint64
	// Length is how long the nemesis injects faults.
	Length time.Duration
	// Session is the clients' session timeout T (default DefaultSession).
	Session time.Duration
	// Controls adds the two workloads that must fail.
	Controls bool
	// Out, if set, is where a failing run keeps its history (JSON) and
	// Porcupine's visualisation (HTML); a run always writes its picture
	// (SVG) there.
	Out string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Ensemble, if set, is used (and left running) instead of a new
	// ensemble of Members: runs of several seeds can share one.
	Ensemble *zktest.Ensemble
}

// The workloads' names.
const (
	WCounter        = "counter"
	WCounterControl = "counter-unguarded"
	WStore          = "store"
	WStoreControl   = "store-ignoring-done"
	WSemaphore      = "semaphore"
	WLeader         = "leader"
)

// retryMaxPause is S, the longest pause of retry.Default().
const retryMaxPause = 2 * time.Second

// Result is what a run found.
type Result struct {
	Config   Config        `json:"-"`
	Seed     uint64        `json:"seed"`
	Members  int           `json:"members"`
	Elapsed  time.Duration `json:"elapsed"`
	Bound    time.Duration `json:"bound"` // B = S + T/2
	Faults   []Fault       `json:"faults"`
	Loads    []LoadResult  `json:"loads"`
	Problems []string      `json:"problems,omitempty"`
	history  *History
}

// LoadResult is one workload's outcome.
type LoadResult struct {
	Name    string `json:"name"`
	Control bool   `json:"control"`
	// Ops counts operations by outcome.
	Done, Refused, Unknown int
	// Linearizable is Porcupine's verdict (counters only).
	Linearizable porcupine.CheckResult `json:"linearizable,omitempty"`
	Violations   []Finding             `json:"violations,omitempty"`
	// Progress is, per fault, the time from the ensemble being whole
	// again to the workload's first success (-1: none before the next
	// fault or the end).
	Progress []time.Duration `json:"progress"`
	info     porcupine.LinearizationInfo
	hist     []porcupine.Operation
}

// Finding is one violation a checker found, and when (zero: not tied to
// an instant, as Porcupine's verdict is not).
type Finding struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// Failed reports whether the workload broke its rule (for a control:
// whether it was caught).
func (l LoadResult) Failed() bool {
	return len(l.Violations) > 0 || l.Linearizable == porcupine.Illegal
}

type load struct {
	name    string
	control bool
	workers int
	work    func(ctx context.Context, w *worker, r *rand.Rand)
	lastOK  atomic.Int64
}

// Run starts an ensemble, runs the workloads under the nemesis for
// cfg.Length, and checks the history.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Session <= 0 {
		cfg.Session = DefaultSession
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	start := time.Now()
	e := cfg.Ensemble
	if e == nil {
		var err error
		if e, err = zktest.NewEnsemble(cfg.Members, zktest.WithStartTimeout(3*time.Minute)); err != nil {
			return nil, err
		}
		defer e.Close()
		cfg.Log("ensemble of %d up in %v", cfg.Members, time.Since(start).Round(time.Millisecond))
	} else if err := e.WaitQuorum(time.Minute); err != nil {
		return nil, err
	}
	cfg.Members = len(e.Servers)

	base := fmt.Sprintf("/analysis/%d", cfg.Seed)
	hist := &History{}
	counter := &counterLoad{name: WCounter, base: base + "/counter", guarded: true}
	uncounter := &counterLoad{name: WCounterControl, base: base + "/counter-unguarded"}
	store := &storeLoad{name: WStore, base: base + "/store", guarded: true, store: &fencedStore{check: true}}
	unstore := &storeLoad{name: WStoreControl, base: base + "/store-unguarded", store: &fencedStore{}}
	loads := []*load{
		{name: WCounter, workers: 3 * counterKeys, work: counter.work},
		{name: WStore, workers: 3, work: store.work},
		{name: WSemaphore, workers: 4, work: (&semLoad{name: WSemaphore, base: base}).work},
		{name: WLeader, workers: 3, work: (&leaderLoad{name: WLeader, base: base}).work},
	}
	if cfg.Controls {
		loads = append(loads,
			&load{name: WCounterControl, control: true, workers: 3 * counterKeys, work: uncounter.work},
			&load{name: WStoreControl, control: true, workers: 3, work: unstore.work})
	}

	admin, _, err := zk.Connect(e.Addrs(), cfg.Session, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for _, c := range []*counterLoad{counter, uncounter} {
		if err := c.setup(admin); err != nil {
			return nil, fmt.Errorf("analysis: setup: %w", err)
		}
	}

	// Workers: every other one pinned to one member.
	var workers []*worker
	defer func() {
		for _, w := range workers {
			_ = w.close()
		}
	}()
	for _, l := range loads {
		for i := 0; i < l.workers; i++ {
			id := len(workers)
			w := &worker{id: id, workload: l.name, member: -1, key: i % counterKeys, hist: hist, lastOK: &l.lastOK}
			if id%2 == 0 {
				w.member = (id / 2) % cfg.Members
			}
			workers = append(workers, w)
			if err := w.connect(ctx, e, cfg.Session); err != nil {
				return nil, fmt.Errorf("analysis: worker %d: %w", id, err)
			}
		}
	}
	res := &Result{Config: cfg, Seed: cfg.Seed, Members: cfg.Members, Bound: retryMaxPause + cfg.Session/2, history: hist}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range workers {
		l := loadOf(loads, w.workload)
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(w.id)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work(wctx, w, r)
		}()
	}
	n := &nemesis{e: e, workers: workers, hist: hist, log: cfg.Log, bound: res.Bound + 10*time.Second}
	n.progressed = func(t time.Time) bool {
		for _, l := range loads {
			if !l.control && l.lastOK.Load() < t.UnixNano() {
				return false
			}
		}
		return true
	}
	locktest.Sleep(ctx, 3*time.Second) // a quiet start
	n.run(ctx, Schedule(cfg.Seed, cfg.Members, cfg.Length, cfg.Session), cfg.Length)
	locktest.Sleep(ctx, 2*time.Second)
	stop()
	wg.Wait()
	if err := counter.finalRead(admin, hist); err != nil {
		res.Problems = append(res.Problems, "final read of the counter: "+err.Error())
	}
	if cfg.Controls {
		if err := uncounter.finalRead(admin, hist); err != nil {
			res.Problems = append(res.Problems, "final read of the unguarded counter: "+err.Error())
		}
	}
	res.Elapsed = time.Since(start)
	res.check(loads, store.store, unstore.store)
	return res, nil
}

func loadOf(loads []*load, name string) *load {
	for _, l := range loads {
		if l.name == name {
			return l
		}
	}
	return nil
}

// check runs the checkers over the history.
func (res *Result) check(loads []*load, store, unstore *fencedStore) {
	ops, ivs, faults := res.history.snapshot()
	res.Faults = faults
	expiries := map[int][]window{}
	for _, f := range faults {
		for _, w := range f.Expired {
			expiries[w] = append(expiries[w], window{f.Start, f.ExpiredBy})
		}
	}
	for _, l := range loads {
		lr := LoadResult{Name: l.name, Control: l.control}
		for _, o := range ops {
			if o.Workload != l.name || o.Kind == "read" {
				continue
			}
			switch o.Status {
			case OK:
				lr.Done++
			case Refused:
				lr.Refused++
			case Unknown:
				lr.Unknown++
			}
		}
		switch l.name {
		case WCounter, WCounterControl:
			h, resolved, dropped := counterOperations(ops, l.name)
			lr.hist = h
			lr.Linearizable, lr.info = porcupine.CheckOperationsVerbose(counterModel, h, 2*time.Minute)
			if resolved+dropped > 0 {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: %d increments of unknown outcome, %d seen applied, %d never seen", l.name, resolved+dropped, resolved, dropped))
			}
			lr.Violations = append(lr.Violations, checkIntervals(ivs, l.name, 1, expiries)...)
		case WStore:
			lr.Violations = append(checkStore(store.writes()), checkIntervals(ivs, l.name, 1, expiries)...)
		case WStoreControl:
			lr.Violations = checkStore(unstore.writes())
		case WSemaphore:
			lr.Violations = checkIntervals(ivs, l.name, semLeases, expiries)
		case WLeader:
			lr.Violations = append(checkIntervals(ivs, l.name, 1, expiries), checkProclaims(ops, ivs, l.name)...)
		}
		lr.Progress = progress(ops, ivs, faults, l.name)
		res.Loads = append(res.Loads, lr)
	}
}

// progress returns, per fault, the time from the ensemble being whole
// again to the workload's first success after it (-1: none before the
// next fault began).
func progress(ops []Op, ivs []Interval, faults []Fault, name string) []time.Duration {
	var oks []time.Time
	for _, o := range ops {
		if o.Workload == name && o.Status == OK && o.Kind != "read" {
			oks = append(oks, o.Return)
		}
	}
	out := make([]time.Duration, len(faults))
	for i, f := range faults {
		until := time.Now()
		if i+1 < len(faults) {
			until = faults[i+1].Start
		}
		best := time.Duration(-1)
		for _, t := range oks {
			if t.After(f.Whole) && t.Before(until) && (best < 0 || t.Sub(f.Whole) < best) {
				best = t.Sub(f.Whole)
			}
		}
		out[i] = best
	}
	return out
}

// DefaultSession is the clients' session timeout when Config.Session is
// not set.
const DefaultSession = 4 * time.Second

// Failed reports whether a guarded workload broke its rule, or a control
// was not caught.
func (res *Result) Failed() bool {
	return res.Violated() || len(res.Uncaught()) > 0
}

// Violated reports whether a guarded workload broke its rule.
func (res *Result) Violated() bool {
	for _, l := range res.Loads {
		if !l.Control && l.Failed() {
			return true
		}
	}
	return false
}

// Uncaught lists the controls the run did not catch. A run catches a
// control only if its faults gave the control's holders the chance to
// misbehave while another held: a pause of a holder of that workload
// while it held. A short run may not (the pause may find the control's
// workers between holds), so a set of runs is judged by whether each
// control was caught in at least one of them.
func (res *Result) Uncaught() []string {
	var out []string
	for _, l := range res.Loads {
		if l.Control && !l.Failed() {
			out = append(out, l.Name)
		}
	}
	return out
}

// Save writes the run's history (JSON), Porcupine's visualisation of
// each counter (HTML) and the run's picture (SVG) under dir.
func (res *Result) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ops, ivs, faults := res.history.snapshot()
	b, err := json.MarshalIndent(struct {
		Seed      uint64     `json:"seed"`
		Members   int        `json:"members"`
		Ops       []Op       `json:"ops"`
		Intervals []Interval `json:"intervals"`
		Faults    []Fault    `json:"faults"`
	}{res.Seed, res.Members, ops, ivs, faults}, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "history.json"), b, 0o644); err != nil {
		return err
	}
	for _, l := range res.Loads {
		if l.hist != nil {
			if err := porcupine.VisualizePath(counterModel, l.info, filepath.Join(dir, l.Name+".html")); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "history.svg"), res.svg(), 0o644)
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
