package faults_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// livenessEpisode is one fault of the liveness grid and the cells that
// run under it: one per recipe, each with its kind of client.
type livenessEpisode struct {
	end   *faults.Fault
	cells []livenessCell
}

type livenessCell struct {
	recipe *faults.Adapter
	mode   faults.ClientMode
	ghost  bool // the cell's workers queue behind a ghost
}

// livenessGrid returns the episodes of the grid recipe x end x mode. By
// default a pairwise subset: one episode per end, in which recipe r runs
// with mode (r + e) mod len(modes) under end e, so every pair of recipe and
// end, recipe and mode, and end and mode runs at least once. With
// FAULTS_LIVENESS=full (make test-liveness), the whole product: one
// episode per end and mode, with every recipe.
//
// Half the cells of an episode queue behind a ghost (a predecessor that
// vanishes in the fault), the others have holders the fault hits
// mid-hold; which half alternates, so that in the full product every
// recipe meets every end both ways. Under a session expiry no cell has a
// ghost: the expiry must find holders, which take again at once when
// told, in every cell.
func livenessGrid(full bool) []livenessEpisode {
	var eps []livenessEpisode
	rs, ms := faults.LivenessRecipes, faults.ClientModes
	for e, end := range faults.Ends {
		if !full {
			ep := livenessEpisode{end: end}
			for r, a := range rs {
				ep.cells = append(ep.cells, livenessCell{a, ms[(r+e)%len(ms)], ghosted(end, r+e)})
			}
			eps = append(eps, ep)
			continue
		}
		for m, mode := range ms {
			ep := livenessEpisode{end: end}
			for r, a := range rs {
				ep.cells = append(ep.cells, livenessCell{a, mode, ghosted(end, r+e+m)})
			}
			eps = append(eps, ep)
		}
	}
	return eps
}

// ghosted reports whether cell number i of an episode of end gets a ghost.
func ghosted(end *faults.Fault, i int) bool { return end.Key != "x" && i%2 == 0 }

// TestLiveness checks progress after every kind of end of a fault: for
// each episode of the grid (livenessGrid), every cell runs its recipe
// with three workers, behind a ghost (faults.Ghost) that took the lock
// first and vanishes when the fault begins; the fault is injected once
// and healed; then, from the moment a fresh control client is answered
// (faults.OverAt), every worker must be granted again within B plus the
// holds queued ahead of it, and no acquire may wait past that while its
// context allows. The usual checks apply too (safety, leaks, calls past
// their context). The ghosts' Client.Close, called while they are cut
// off, must return within faults.CloseBound. go test -v prints each
// cell's re-take times (p50/max) and longest wait beyond the queue.
func TestLiveness(t *testing.T) {
	full := os.Getenv("FAULTS_LIVENESS") == "full"
	ts := &targets{t: t, byOn: make(map[faults.On]*faults.Target)}
	var all []faults.Result
	begin := time.Now()
	for i, ep := range livenessGrid(full) {
		name := ep.end.Key
		if full {
			name += "_" + strings.ReplaceAll(ep.cells[0].mode.Name, " ", "_")
		}
		t.Run(name, func(t *testing.T) {
			all = append(all, runLivenessEpisode(t, ts, ep, uint64(i))...)
		})
	}
	t.Logf("liveness grid (%d episodes), %v:\n%s", len(livenessGrid(full)), time.Since(begin).Round(time.Second), faults.Table(all))
}

// runLivenessEpisode runs one episode of the grid and checks its cells.
func runLivenessEpisode(t *testing.T, ts *targets, ep livenessEpisode, seed uint64) []faults.Result {
	tg := ts.get(t, ep.end.On)
	if tg.Proxied {
		one := *tg
		one.Name, one.OneAddr = "standalone, proxied, one address", true
		tg = &one
	}
	start := time.Now()
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
	for ri, lc := range ep.cells {
		cfg := lc.mode.Apply(faults.DefaultConfig(tg.SessionTimeout))
		cfg.Workers = 3
		// Contexts that allow: an acquire that hangs is still waiting
		// well past B, rather than ending by its deadline near it.
		cfg.AcquireTimeout = 5 * tg.SessionTimeout
		cfg.Trace = true
		c, err := faults.NewCell(context.Background(), tg, lc.recipe, zktest.UniquePath(t), cfg, seed*100+uint64(ri))
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, c)
		if !lc.ghost {
			continue
		}
		if _, err := c.AddGhost(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	env := &faults.Env{Target: tg, Cells: cells, Rng: rand.New(rand.NewPCG(seed, 7)), Logf: t.Logf}
	results, injected, err := faults.Episode(context.Background(), ep.end, env, nil, ep.end.Duration)
	if err != nil {
		t.Fatalf("injecting or healing %q: %v", ep.end.Name, err)
	}
	closeCells()
	for i, c := range cells {
		results[i].Leaked = append(results[i].Leaked, faults.CheckClosed(c, tg.SessionTimeout+3*time.Second)...)
		results[i].Recipe += " [" + ep.cells[i].mode.Name + "]"
		if ep.cells[i].ghost {
			results[i].Recipe += " +ghost"
		}
	}
	t.Logf("%s on %s (%d injected, %v in all):\n%s%s", ep.end.Name, tg.Name, injected,
		time.Since(start).Round(100*time.Millisecond), faults.Table(results), faults.Details(results, true, 5))
	if injected == 0 {
		t.Errorf("%q was never injected: the episode proved nothing", ep.end.Name)
	}
	for _, r := range results {
		t.Run(strings.NewReplacer(" ", "_", "[", "", "]", "", "+", "").Replace(r.Recipe), func(t *testing.T) {
			if r.Cycles == 0 {
				t.Errorf("no acquire succeeded")
			}
			reportFindings(t, r)
		})
	}
	return results
}
