package multilock_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The process test: children re-run this test binary with childEnv set to
// a JSON childSpec and print one line per member hold.
const (
	childEnv     = "ZKRECIPES_MULTILOCK_CHILD"
	recordPrefix = "multilock-hold "
	processes    = 6
	cycles       = 50
	semLeases    = 2
)

type childSpec struct {
	Addr, Base string
	ID         int
	Seed       uint64
}

// holdRecord is one member held by one set, as its holder saw it: from
// Lock's return until Unlock was called.
type holdRecord struct {
	Worker     int
	Path       string
	Kind       string
	Start, End time.Time
	Token      int64
	// Wait is how long the set's Lock took.
	Wait time.Duration
}

// lockPaths are the five locks the processes share, and the kinds a set
// may take from each.
func lockPaths(base string) []string {
	return []string{base + "/m1", base + "/m2", base + "/rw", base + "/sem", base + "/m3"}
}

// TestRandomSetsAcrossProcesses: 6 processes, each with its own session,
// take 50 times a random 3 of 5 locks (three mutexes, a read/write lock
// taken in a random mode, a semaphore with 2 leases), given to New in a
// random order. Every Lock must succeed within its (generous) timeout, so
// no deadlock; the holds of every path, merged across processes, must keep
// that path's rule; no node may be left.
func TestRandomSetsAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child process")
	}
	srv := zktest.Shared(t)
	base := zktest.UniquePath(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	ctx := locktest.Ctx(t, 120*time.Second)
	start := time.Now()

	var mu sync.Mutex
	var records []holdRecord
	var wg sync.WaitGroup
	for id := range processes {
		spec, _ := json.Marshal(childSpec{Addr: srv.Addr(), Base: base, ID: id, Seed: seed})
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRandomSetsChild$", "-test.count=1", "-test.timeout=110s")
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			var mine []holdRecord
			sc := bufio.NewScanner(&stdout)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), recordPrefix)
				if !ok {
					continue
				}
				var r holdRecord
				if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
					t.Errorf("process %d: %v in %q", id, jerr, line)
					continue
				}
				mine = append(mine, r)
			}
			if err != nil {
				t.Errorf("process %d (pid %d): %v\n%s%s", id, cmd.Process.Pid, err, stdout.String(), stderr.String())
			}
			mu.Lock()
			records = append(records, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}

	if want := processes * cycles * 3; len(records) != want {
		t.Fatalf("%d member holds recorded, want %d", len(records), want)
	}
	byPath := map[string][]faults.Interval{}
	kinds := map[string]int{}
	var waits []time.Duration
	for i, r := range records {
		if i%3 == 0 { // one record per member, three members per set
			waits = append(waits, r.Wait)
		}
		mode := faults.Exclusive
		switch r.Kind {
		case "read":
			mode = faults.Shared
		case "lease":
			mode = faults.Lease
		}
		kinds[r.Kind]++
		byPath[r.Path] = append(byPath[r.Path], faults.Interval{Worker: r.Worker, Mode: mode, Start: r.Start, End: r.End, Token: r.Token})
	}
	for _, p := range lockPaths(base) {
		ivs := byPath[p]
		for _, v := range faults.CheckIntervals(ivs, semLeases) {
			t.Errorf("%s: %s", p, v)
		}
		t.Logf("%s: %d holds, at most %d at once, none against the rule", p, len(ivs), peak(ivs))
	}
	raw := zktest.Connect(t, srv.Addr())
	for _, p := range lockPaths(base) {
		left, err := faults.ListNodes(raw, p)
		if err != nil || len(left) != 0 {
			t.Errorf("%s: nodes left %v (%v)", p, left, err)
		}
	}
	slices.Sort(waits)
	t.Logf("%d processes x %d sets of 3 in %v (holds by kind %v); Lock took %v median, %v at most",
		processes, cycles, elapsed.Round(time.Millisecond), kinds, waits[len(waits)/2].Round(time.Microsecond), waits[len(waits)-1].Round(time.Microsecond))
}

// peak returns the largest number of intervals open at one instant.
func peak(ivs []faults.Interval) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for _, iv := range ivs {
		es = append(es, edge{iv.Start, 1}, edge{iv.End, -1})
	}
	slices.SortFunc(es, func(a, b edge) int { return cmp.Or(a.at.Compare(b.at), a.d-b.d) })
	n, top := 0, 0
	for _, e := range es {
		n += e.d
		top = max(top, n)
	}
	return top
}

// TestRandomSetsChild is one process of TestRandomSetsAcrossProcesses; it
// skips unless run by it.
func TestRandomSetsChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("run as a child process by TestRandomSetsAcrossProcesses")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		t.Fatal(err)
	}
	// A longer session than the tests' default: six race-detector
	// processes share two cores, and a loss would not be a deadlock.
	c := locktest.Client(t, []string{spec.Addr}, recipe.WithSessionTimeout(10*time.Second))
	paths := lockPaths(spec.Base)
	m1, m2, m3 := newMutex(t, c, paths[0]), newMutex(t, c, paths[1]), newMutex(t, c, paths[4])
	rw := newRW(t, c, paths[2])
	sem := newSem(t, c, paths[3], semLeases)
	rng := rand.New(rand.NewPCG(spec.Seed, uint64(spec.ID)))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()

	for cycle := range cycles {
		var members []recipe.Acquirer
		for _, i := range rng.Perm(len(paths))[:3] {
			switch i {
			case 0:
				members = append(members, m1)
			case 1:
				members = append(members, m2)
			case 2:
				if rng.IntN(2) == 0 {
					members = append(members, rw.Reader())
				} else {
					members = append(members, rw.Writer())
				}
			case 3:
				members = append(members, sem)
			case 4:
				members = append(members, m3)
			}
		}
		set := newSet(t, members...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		called := time.Now()
		err := set.Lock(ctx)
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: Lock %v: %v", cycle, members, err)
		}
		start := time.Now()
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		lost := locktest.Closed(set.Done())
		end := time.Now()
		tokens := set.Tokens()
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = set.Unlock(uctx)
		cancel()
		if lost || err != nil {
			t.Fatalf("cycle %d: lost %v, Unlock: %v", cycle, lost, err)
		}
		for k, mb := range members {
			line, _ := json.Marshal(holdRecord{Worker: spec.ID, Path: mb.Path(), Kind: kindName(mb), Start: start, End: end, Token: tokens[k], Wait: start.Sub(called)})
			fmt.Fprintf(out, "%s%s\n", recordPrefix, line)
		}
	}
	// No node of this session may be left while it lives.
	conn, sid := c.Conn(), c.SessionID()
	for _, p := range paths {
		nodes, err := faults.ListNodes(conn, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Owner == sid {
				t.Errorf("%s: own node left: %v", p, n)
			}
		}
	}
}

// kindName names what member a takes: "mutex", "read", "write" or "lease".
func kindName(a recipe.Acquirer) string {
	switch a := a.(type) {
	case *rwlock.Side:
		return a.Mode().String()
	case *semaphore.Semaphore:
		return "lease"
	}
	return "mutex"
}
