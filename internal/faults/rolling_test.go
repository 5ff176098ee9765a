package faults_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestRollingRestart restarts the members of a 3-server ensemble one at a
// time, followers first and the leader last (faults.RollingRestart), while
// every recipe's holders work, with clients in the default mode and with
// clients that tolerate suspensions. It counts the holds told lost: with
// suspension tolerance there must be none (every session survives); in
// the default mode each one is listed, with its time and reason, next to
// the restarts in the log. After the last member is back, every client
// must take again within B (the liveness check of every episode).
func TestRollingRestart(t *testing.T) {
	ts := &targets{t: t, byOn: make(map[faults.On]*faults.Target)}
	tg := ts.get(t, faults.OnEnsemble)
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
	modes := []faults.ClientMode{faults.ClientModes[0], faults.ClientModes[1]}
	for mi, m := range modes {
		for ri, a := range faults.Recipes {
			cfg := m.Apply(faults.DefaultConfig(tg.SessionTimeout))
			cfg.Workers = 3
			c, err := faults.NewCell(context.Background(), tg, a, zktest.UniquePath(t), cfg, uint64(10*mi+ri))
			if err != nil {
				t.Fatal(err)
			}
			cells = append(cells, c)
		}
	}
	env := &faults.Env{Target: tg, Cells: cells, Rng: rand.New(rand.NewPCG(3, 3)), Logf: t.Logf}
	results, injected, err := faults.Episode(context.Background(), faults.RollingRestart, env, nil, faults.RollingRestart.Duration)
	if err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	closeCells()
	lost := map[string]int{}
	for i, c := range cells {
		results[i].Leaked = append(results[i].Leaked, faults.CheckClosed(c, tg.SessionTimeout+3*time.Second)...)
		mode := modes[i/len(faults.Recipes)]
		results[i].Recipe += " [" + mode.Name + "]"
		lost[mode.Name] += results[i].Lost
		for _, l := range results[i].Losses {
			t.Logf("%s: worker %d told lost (%s) at %s after holding %v", results[i].Recipe, l.Worker, l.Reason,
				l.At.Format("15:04:05.000"), l.Held.Round(time.Millisecond))
		}
	}
	t.Logf("rolling restart of 3 members (%d restarted), %v sessions: holds told lost: default %d, tolerant %d\n%s%s",
		injected, tg.SessionTimeout, lost["default"], lost["tolerant"], faults.Table(results), faults.Details(results, false, 5))
	if injected != 3 {
		t.Errorf("%d members restarted, want 3", injected)
	}
	if lost["tolerant"] > 0 {
		t.Errorf("%d holds told lost by clients that tolerate suspensions, want 0", lost["tolerant"])
	}
	for _, r := range results {
		t.Run(strings.NewReplacer(" ", "_", "[", "", "]", "", "+", "").Replace(r.Recipe), func(t *testing.T) { reportFindings(t, r) })
	}
}
