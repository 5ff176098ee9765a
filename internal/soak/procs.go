package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
)

// procRuns is how many kills, or how many pauses, one process episode
// makes.
const procRuns = 2

// procFaults are the process episodes: faults whose injection runs holder
// processes on the standalone server (the soak's clients go on meanwhile,
// as load on the same server) and whose findings come back as one more
// Result.
type procFaults struct {
	bin    string
	target *faults.Target
	logf   func(format string, args ...any)
	faults []*faults.Fault

	n       int
	variant int            // of faults.ProcVariants, drawn before each episode
	result  *faults.Result // of the last process episode, until taken
}

func newProcFaults(bin string, tg *faults.Target, logf func(string, ...any)) *procFaults {
	p := &procFaults{bin: bin, target: tg, logf: logf}
	p.faults = []*faults.Fault{
		{Key: "p1", Name: "process killed (SIGKILL)", On: faults.OnProxied, Inject: p.inject("kill")},
		{Key: "p2", Name: "process paused past its session (SIGSTOP/SIGCONT)", On: faults.OnProxied, Inject: p.inject("stop")},
	}
	return p
}

// next draws the variant for the coming episode, whatever its fault, so
// that the draws do not depend on which fault came.
func (p *procFaults) next(rng *mrand.Rand) { p.variant = rng.IntN(len(faults.ProcVariants)) }

// take returns the Result of f if f was a process episode.
func (p *procFaults) take(f *faults.Fault) (faults.Result, bool) {
	r := p.result
	p.result = nil
	if r == nil {
		return faults.Result{}, false
	}
	r.Fault = f.Name
	return *r, true
}

// inject returns the Inject of a process scenario ("kill" or "stop"). It
// runs the scenario to its end (it does not stop with ctx: it always ends
// the processes it started) and counts the kills or pauses as injections.
func (p *procFaults) inject(scenario string) func(context.Context, *faults.Env) (int, error) {
	return func(_ context.Context, env *faults.Env) (int, error) {
		p.n++
		v := faults.ProcVariants[p.variant]
		base := fmt.Sprintf("/soak/procs-%s/%s-%d", randHex(), v.Name, p.n)
		tb := &procTB{logf: p.logf}
		rig, err := faults.NewProcRig(tb, p.bin, p.target.Addrs[0])
		if err != nil {
			return 0, err
		}
		p.logf("  process episode: %s, %s on %s", scenario, v.Name, base)
		var row faults.ProcRow
		var paths []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer rig.Close() // ends every process it started, by pid
			if scenario == "kill" {
				paths = []string{base}
				row = rig.KillLoop(v.Recipes, base, procRuns)
			} else {
				for i := range procRuns {
					paths = append(paths, faults.StopPath(base, i))
				}
				row = rig.StopRuns(v.Recipes, base, procRuns)
			}
		}()
		<-done
		r := &faults.Result{Recipe: "process " + v.Name, Episodes: 1, Cycles: row.Grants, Holds: row.Grants}
		r.Violations, r.Problems = tb.results()
		if row.AfterResume > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%d writes after the resume (%d checked before it, fenced by the store)", row.AfterResume, row.InFlight))
		}
		// No orphan: every node of the processes gone once they ended
		// (a killed one's session expires within its timeout).
		for _, path := range paths {
			left, err := faults.WaitEmpty(p.target.Raw, path, 2*faults.ProcSession+5*time.Second)
			if err != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("orphan check of %s: %v", path, err))
			}
			for _, n := range left {
				r.Leaked = append(r.Leaked, "left by a holder process: "+path+"/"+n.String())
			}
		}
		p.result = r
		return row.Runs, nil
	}
}

// procTB is the faults.TB of a process episode: Errorf records a
// violation of the process checks, Fatalf a problem (the scenario could
// not go on) and ends the scenario's goroutine, as testing.T's does.
type procTB struct {
	logf func(string, ...any)

	mu                   sync.Mutex
	violations, problems []string
}

func (t *procTB) Helper() {}

func (t *procTB) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.logf("  PROCESS VIOLATION: %s", msg)
	t.mu.Lock()
	t.violations = append(t.violations, msg)
	t.mu.Unlock()
}

func (t *procTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.logf("  PROCESS PROBLEM: %s", msg)
	t.mu.Lock()
	t.problems = append(t.problems, msg)
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *procTB) Logf(format string, args ...any) {
	// The process checks' notes are long; the first line says enough.
	msg, _, _ := strings.Cut(fmt.Sprintf(format, args...), "\n")
	t.logf("    %s", msg)
}

func (t *procTB) results() (violations, problems []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.violations, t.problems
}
