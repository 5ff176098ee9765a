package faults_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestStepFaults runs the step matrix (steps.go): for each recipe form,
// one clean cycle records the subject's requests, then every request k
// is run once with its reply lost and once dropped. go test -v prints the
// matrix as a Markdown table (docs/reliability.md).
func TestStepFaults(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	rig := &faults.StepRig{
		Addr:           srv.Addr(),
		Raw:            raw,
		SessionTimeout: 4 * time.Second,
		AcquireTimeout: 2 * time.Second,
		ReleaseTimeout: 3 * time.Second,
		Idle:           150 * time.Millisecond,
		Hold:           50 * time.Millisecond,
	}
	ctx := context.Background()
	// Every cycle runs in a directory of its own under a persistent base,
	// so that the directories above it never come and go (containers are
	// reaped when empty) and a subject that comes first always creates
	// exactly its lock directory.
	base := zktest.UniquePath(t)
	for _, dir := range []string{path.Dir(base), base} {
		if _, err := raw.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		children, _, _ := raw.Children(base)
		for _, c := range children {
			_ = raw.Delete(base+"/"+c, -1)
		}
		_ = raw.Delete(base, -1)
	})
	dirs := 0
	dir := func() string {
		dirs++
		return fmt.Sprintf("%s/c%03d", base, dirs)
	}
	begin := time.Now()
	var all []faults.StepResult
	cases, failed := 0, 0
	for _, sr := range faults.StepRecipes {
		t.Run(strings.ReplaceAll(sr.Name, " ", "_"), func(t *testing.T) {
			clean, steps, err := rig.Record(ctx, sr, dir())
			if err != nil {
				t.Fatal(err)
			}
			if clean.Cell() != "ok" || len(clean.Problems) > 0 {
				t.Fatalf("clean cycle: %s %v", clean.Cell(), clean.Problems)
			}
			var seq []string
			for _, s := range steps {
				seq = append(seq, s.String())
			}
			t.Logf("%s: %d requests in one cycle: %s", sr.Name, len(steps), strings.Join(seq, ", "))
			for _, s := range steps {
				for _, f := range faults.StepFaults {
					name := fmt.Sprintf("%d_%s/%s", s.N, s.Op, strings.ReplaceAll(f.String(), " ", "_"))
					t.Run(name, func(t *testing.T) {
						// A cycle's requests can differ by timing (a read
						// written behind a create that failed at once is not
						// always sent): a case whose step did not come is
						// run again, up to three times.
						var r faults.StepResult
						for try := 0; try < 3; try++ {
							var err error
							r, err = rig.Run(ctx, sr, dir(), s, f)
							if err != nil {
								t.Fatal(err)
							}
							if r.Fired || len(r.Problems) > 0 {
								break
							}
							t.Logf("not hit (try %d): requests: %s", try+1, r.Requests)
						}
						cases++
						all = append(all, r)
						t.Logf("%s: acquire %s, release %s, retries %d, recovered %d, %v; requests: %s",
							r.Cell(), r.Acquire, r.Release, r.Retries, r.Recovered, r.Took.Round(time.Millisecond), r.Requests)
						if !r.Fired {
							t.Errorf("the fault never hit: the cycle did not reach step %d this time", s.N)
						}
						if len(r.Problems) > 0 {
							failed++
							for _, p := range r.Problems {
								t.Error(p)
							}
						}
					})
				}
			}
		})
	}
	t.Logf("step matrix: %d cases, %d failed, %v:\n%s",
		cases, failed, time.Since(begin).Round(time.Second), faults.StepTable(all))
}
