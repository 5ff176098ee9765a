//go:build unix

package faults_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// procRuns is how many kills and how many pauses each variant gets: a
// short run by default, 20 of each with FAULTS_PROCS=full (make
// test-procs).
func procRuns() int {
	if os.Getenv("FAULTS_PROCS") == "full" {
		return 20
	}
	return 5
}

// TestProcesses runs holders as real OS processes (internal/faults/
// holderproc, built once), one per contender, each writing under its
// fencing token to a fenced store served by this test (a TokenStore) every
// 5ms while it holds, after checking Err and Done.
//
//   - kill: the holder is killed with SIGKILL, again and again, while two
//     others wait. The next is granted only after the killed one's session
//     is gone (its node is absent from the directory listed right after
//     the grant), the holds as the store saw them never overlap, and
//     tokens grow.
//   - stop: the holder is stopped with SIGSTOP until its session has
//     expired and the waiting process has been granted and has written,
//     then continued with SIGCONT. It must make no write after the resume
//     (its Err is exact at the moment of the call), and the deliberate
//     write it makes under its old token once it has seen the loss must
//     be refused by the store.
//   - retake: the holder is paused past its session, or cut off by a
//     proxy for 1.5 sessions, while a second process is granted; resumed
//     (healed), it must take the lock again within B of the lock being
//     free again (faults.ProcRig.RetakeRuns).
//
// The holder is a separate program, built without the race detector,
// rather than this test binary run again: it is then a process like the
// ones users run (no test framework inside, no race-detector slowdown in
// the resume-to-signal times), and the package's TestMain stays as it is.
func TestProcesses(t *testing.T) {
	srv := zktest.Shared(t)
	bin, err := faults.BuildHolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runs := procRuns()
	var mu sync.Mutex
	var rows []faults.ProcRow
	add := func(r faults.ProcRow) {
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	}
	t.Cleanup(func() {
		slices.SortFunc(rows, func(a, b faults.ProcRow) int { return strings.Compare(a.Scenario+a.Variant, b.Scenario+b.Variant) })
		t.Logf("process faults, %d runs per recipe and scenario, %v sessions:\n%s", runs, faults.ProcSession, faults.ProcTable(rows))
	})
	scenarios := []struct {
		name string
		run  func(r *faults.ProcRig, recipes [2]string, path string, runs int) faults.ProcRow
	}{
		{"kill", (*faults.ProcRig).KillLoop},
		{"stop", (*faults.ProcRig).StopRuns},
		{"retake", (*faults.ProcRig).RetakeRuns},
	}
	for _, sc := range scenarios {
		for _, v := range faults.ProcVariants {
			t.Run(sc.name+"/"+v.Name, func(t *testing.T) {
				t.Parallel()
				rig, err := faults.NewProcRig(t, bin, srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(rig.Close)
				row := sc.run(rig, v.Recipes, zktest.UniquePath(t), runs)
				row.Variant = v.Name
				add(row)
			})
		}
	}
}
