package faults_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var seedFlag = flag.Uint64("faults.seed", 0, "seed of the fault matrix's random choices (0: from the clock)")

func TestMain(m *testing.M) { locktest.Main(m) }

// Session timeouts: short, so that expiry faults take seconds. An
// ensemble gets a little more, as a leader election takes a second or two.
const (
	standaloneSession = 2 * time.Second
	ensembleSession   = 3 * time.Second
)

// targets starts, on first use, the servers the faults need and closes
// them when the test ends.
type targets struct {
	t    *testing.T
	mu   sync.Mutex
	byOn map[faults.On]*faults.Target
}

func (ts *targets) get(t *testing.T, on faults.On) *faults.Target {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if tg := ts.byOn[on]; tg != nil {
		return tg
	}
	if testing.Short() {
		t.Skip("real ZooKeeper tests skipped under -short")
	}
	var tg *faults.Target
	switch on {
	case faults.OnProxied:
		srv := zktest.Shared(t)
		tg = &faults.Target{Name: "standalone, proxied", Addrs: []string{srv.Addr()}, Proxied: true, SessionTimeout: standaloneSession}
	case faults.OnStandalone:
		// The server outlives this subtest: it is the matrix's, closed
		// when the matrix ends.
		srv, err := zktest.NewServer()
		if err != nil {
			t.Fatal(err)
		}
		ts.t.Cleanup(func() { srv.Close() })
		tg = &faults.Target{Name: "standalone, restartable", Addrs: []string{srv.Addr()}, Server: srv, SessionTimeout: standaloneSession}
	case faults.OnEnsemble:
		start := time.Now()
		ens, err := zktest.NewEnsemble(3)
		if err != nil {
			t.Fatal(err)
		}
		ts.t.Cleanup(func() { ens.Close() })
		t.Logf("ensemble started in %v", time.Since(start).Round(time.Millisecond))
		tg = &faults.Target{Name: "3-server ensemble", Addrs: ens.Addrs(), Ensemble: ens, SessionTimeout: ensembleSession}
	}
	raw, err := faults.Raw(tg.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	ts.t.Cleanup(raw.Close)
	tg.Raw = raw
	ts.byOn[on] = tg
	return tg
}

// TestFaultMatrix runs every fault against every recipe, then the
// partitions again with clients that tolerate suspensions
// (recipe.WithSuspensionTolerance). For each fault, the four recipes run
// at the same time (each on its own lock path, with four sessions of its
// own) while the fault is injected repeatedly; then the faults heal and
// each recipe is checked: safety (for a tolerant client, a holder acts
// only while its hold is not suspended), no node left (with the clients
// open, then after they closed), no call past its context's bound, only
// documented errors. go test -v prints the results table.
func TestFaultMatrix(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -faults.seed=%d)", seed, seed)
	ts := &targets{t: t, byOn: make(map[faults.On]*faults.Target)}
	var all []faults.Result
	begin := time.Now()
	rows := make([]matrixRow, 0, len(faults.Faults)+len(faults.TolerantFaults))
	for _, f := range faults.Faults {
		rows = append(rows, matrixRow{f: f})
	}
	for _, f := range faults.TolerantFaults {
		rows = append(rows, matrixRow{f: f, tolerant: true})
	}
	for fi, row := range rows {
		f := row.f
		name := f.Key + "_" + strings.NewReplacer(" ", "_", ":", "", "<", "lt", ">", "gt").Replace(f.Name)
		if row.tolerant {
			name = "tolerant_" + name
		}
		t.Run(name, func(t *testing.T) {
			all = append(all, runRow(t, ts, row, seed, uint64(fi))...)
		})
	}
	t.Logf("fault matrix, seed %d, %v:\n%s", seed, time.Since(begin).Round(time.Second), faults.Table(all))
}

// matrixRow is one fault, with clients of one kind.
type matrixRow struct {
	f        *faults.Fault
	tolerant bool
}

// runRow runs one row of the matrix and checks its results.
func runRow(t *testing.T, ts *targets, row matrixRow, seed, fi uint64) []faults.Result {
	f := row.f
	tg := ts.get(t, f.On)
	rowStart := time.Now()
	cfg := faults.DefaultConfig(tg.SessionTimeout)
	cfg.Tolerant = row.tolerant
	var cells []*faults.Cell
	closed := false
	closeCells := func() {
		if !closed {
			closed = true
			for _, c := range cells {
				c.Close()
			}
		}
	}
	defer closeCells()
	for ri, a := range faults.Recipes {
		c, err := faults.NewCell(context.Background(), tg, a, zktest.UniquePath(t), cfg, seed+100*fi+uint64(ri))
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, c)
	}
	env := &faults.Env{Target: tg, Cells: cells, Rng: rand.New(rand.NewPCG(seed, fi)), Logf: t.Logf}
	results, injected, err := faults.Episode(context.Background(), f, env, nil, f.Duration)
	if err != nil {
		t.Fatalf("injecting or healing %q: %v", f.Name, err)
	}
	closeCells()
	for i, c := range cells {
		results[i].Leaked = append(results[i].Leaked, faults.CheckClosed(c, tg.SessionTimeout+3*time.Second)...)
		if row.tolerant {
			results[i].Fault = "tolerant: " + results[i].Fault
		}
	}
	t.Logf("%s on %s, %v (%d injections, %v in all):\n%s%s", results[0].Fault, tg.Name, f.Duration, injected,
		time.Since(rowStart).Round(100*time.Millisecond), faults.Table(results), faults.Details(results, true, 5))

	var sum faults.Result
	for _, r := range results {
		sum.Merge(r)
	}
	if injected == 0 {
		t.Errorf("%q was never injected: the row proved nothing", f.Name)
	}
	switch f.Key {
	case "a":
		if sum.Recovered == 0 {
			t.Errorf("%d create replies lost, none recovered by UUID: the row proved nothing", injected)
		}
	case "d", "e":
		if sum.Lost == 0 || sum.NewSessions == 0 {
			t.Errorf("under %q, %d holds lost and %d sessions expired: the row proved nothing", f.Name, sum.Lost, sum.NewSessions)
		}
	case "c2":
		if sum.Kept == 0 {
			t.Errorf("under %q, %d suspensions and no hold kept: the row proved nothing", f.Name, sum.Suspended)
		}
	}
	if row.tolerant && sum.LostBy["suspended"] > 0 {
		t.Errorf("%d holds lost for a suspension by clients that tolerate suspensions", sum.LostBy["suspended"])
	}
	for _, r := range results {
		t.Run(r.Recipe, func(t *testing.T) {
			if r.Cycles == 0 {
				t.Errorf("no acquire succeeded")
			}
			if r.Guarded.Writes == 0 && r.Recipe != faults.LeaderRun.Name {
				t.Errorf("the register received no guarded write")
			}
			reportFindings(t, r)
		})
	}
	return results
}

// reportFindings fails t with each of r's safety violations, leaked nodes
// and problems.
func reportFindings(t *testing.T, r faults.Result) {
	t.Helper()
	for _, v := range r.Violations {
		t.Errorf("safety: %s", v)
	}
	for _, l := range r.Leaked {
		t.Errorf("leak: %s", l)
	}
	for _, p := range r.Problems {
		t.Errorf("%s", p)
	}
}
