// Command soak runs every recipe against real ZooKeeper servers it starts
// itself (a standalone server, every client behind a fault-injecting proxy
// of its own, and a 3-server ensemble) for a while, injecting the faults
// of internal/faults at random, one episode after another. The clients
// live for the whole run; after each episode the faults heal and every
// property is checked: no safety violation, no node left behind, no call
// past its context's bound, only documented errors; and once the fault is
// over (a fresh control client is answered), every worker on the faulted
// target is granted again within B plus the holds queued ahead of it
// (docs/failure-model.md).
//
// Some episodes, drawn at random like the faults, run holders as
// operating-system processes instead (internal/faults/holderproc, built
// once at the start): a few processes contend on a path of the standalone
// server, each writing to a fenced store under its token, and the holder
// is killed (SIGKILL) or paused past its session (SIGSTOP, SIGCONT), with
// the checks of the process tests (faults.ProcRig): no double grant, no
// write after the resume whose loss check began after it, every probe
// under a lost token refused, no node left behind.
//
// Every minute it prints the cycles so far, the heap (runtime HeapAlloc
// and HeapInuse, read without forcing a collection) and the goroutines.
// At the end the curve must be flat: the largest HeapAlloc of the last
// third of the samples at most twice the largest of the first third, the
// most goroutines of the last third at most 1.5 times the most of the
// first third, and, once every client has closed, no more goroutines than
// before the first one opened.
//
// It prints a line per episode and a table at the end, and exits with
// status 1 if any property failed (or the curve was not flat, or
// goroutines outlived the run), 2 if it could not run.
//
//	go run ./internal/soak -duration 10m
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func main() {
	os.Exit(run())
}

func run() int {
	duration := flag.Duration("duration", time.Minute, "how long to run the workload (server start-up not included)")
	episode := flag.Duration("episode", 15*time.Second, "length of one fault episode")
	seed := flag.Uint64("seed", 0, "seed of the random choices (0: from the clock)")
	workers := flag.Int("workers", 4, "sessions per recipe and server set")
	verbose := flag.Bool("v", false, "print every note (not only failures) after each episode")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if *episode < 5*time.Second {
		fmt.Fprintln(os.Stderr, "soak: -episode must be at least 5s")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	goroutinesBefore := runtime.NumGoroutine()
	logf := func(format string, args ...any) {
		fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	logf("soak: seed %d, duration %v, episodes of %v; starting servers", *seed, *duration, *episode)

	st, err := startServers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	defer st.close()
	logf("soak: standalone server on %s, ensemble on %s", st.standalone.Addrs[0], strings.Join(st.ensemble.Addrs, ","))

	cells := map[*faults.Target][]*faults.Cell{}
	var all []*faults.Cell
	for ti, tg := range []*faults.Target{st.standalone, st.ensemble} {
		cfg := faults.DefaultConfig(tg.SessionTimeout)
		cfg.Workers = *workers
		for ri, a := range faults.Recipes {
			path := fmt.Sprintf("/soak/%s-%s/%s", strings.Fields(tg.Name)[0], randHex(), a.Name)
			c, err := faults.NewCell(ctx, tg, a, path, cfg, *seed+uint64(10*ti+ri))
			if err != nil {
				fmt.Fprintln(os.Stderr, "soak:", err)
				for _, c := range all {
					c.Close()
				}
				return 2
			}
			cells[tg] = append(cells[tg], c)
			all = append(all, c)
		}
	}
	bindir, err := os.MkdirTemp("", "soakbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	defer os.RemoveAll(bindir)
	bin, err := faults.BuildHolder(bindir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		for _, c := range all {
			c.Close()
		}
		return 2
	}
	procs := newProcFaults(bin, st.standalone, logf)
	allFaults := append(append([]*faults.Fault(nil), faults.Faults...), procs.faults...)
	goroutinesOpen := runtime.NumGoroutine()

	rng := mrand.New(mrand.NewPCG(*seed, 0))
	totals := map[string]*faults.Result{} // by fault + recipe
	var order []string
	var sum faults.Result
	injections := map[string]int{}
	harnessErrs, episodes := 0, 0
	begin := time.Now()
	deadline := begin.Add(*duration)
	var cyclesSoFar atomic.Int64
	curveDone := make(chan struct{})
	curveStopped := make(chan []sample)
	go func() { curveStopped <- curve(begin, &cyclesSoFar, curveDone, logf) }()
	for n := 1; ctx.Err() == nil; n++ {
		left := time.Until(deadline)
		if left < 5*time.Second {
			break
		}
		f := allFaults[rng.IntN(len(allFaults))]
		tg := st.standalone
		if f.On == faults.OnEnsemble {
			tg = st.ensemble
		}
		var others []*faults.Cell
		for t, cs := range cells {
			if t != tg {
				others = append(others, cs...)
			}
		}
		env := &faults.Env{Target: tg, Cells: cells[tg], Rng: mrand.New(mrand.NewPCG(*seed, uint64(n))), Logf: func(format string, args ...any) {
			logf("  "+format, args...)
		}}
		procs.next(rng)
		results, injected, err := faults.Episode(ctx, f, env, others, min(*episode, left))
		if r, ok := procs.take(f); ok {
			results = append(results, r)
		}
		if err != nil {
			harnessErrs++
			logf("soak: HARNESS ERROR injecting or healing %q: %v", f.Name, err)
		}
		injections[f.Name] += injected
		episodes++
		var ep faults.Result
		for _, r := range results {
			key := r.Fault + "\x00" + r.Recipe
			if totals[key] == nil {
				totals[key] = &faults.Result{Fault: r.Fault, Recipe: r.Recipe}
				order = append(order, key)
			}
			r.Injections = 0
			totals[key].Merge(r)
			ep.Merge(r)
		}
		sum.Merge(ep)
		cyclesSoFar.Store(int64(sum.Cycles))
		logf("episode %d [%v]: %s on %s x%d | cycles %d (total %d) | lost %d | violations %d | leaked %d | problems %d | goroutines %d",
			n, time.Since(begin).Round(time.Second), f.Name, strings.Fields(tg.Name)[0], injected,
			ep.Cycles, sum.Cycles, ep.Lost, len(ep.Violations), len(ep.Leaked), len(ep.Problems), runtime.NumGoroutine())
		if d := faults.Details(results, *verbose, 5); d != "" {
			fmt.Print(d)
		}
	}
	ran := time.Since(begin)
	close(curveDone)
	samples := <-curveStopped
	goroutinesEnd := runtime.NumGoroutine()

	for _, c := range all {
		c.Close()
	}
	var closedLeaks []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() {
			l := faults.CheckClosed(c, c.Target.SessionTimeout+3*time.Second)
			mu.Lock()
			closedLeaks = append(closedLeaks, l...)
			mu.Unlock()
		})
	}
	wg.Wait()
	st.close()
	goroutinesAfter := runtime.NumGoroutine()
	for end := time.Now().Add(10 * time.Second); goroutinesAfter > goroutinesBefore && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		goroutinesAfter = runtime.NumGoroutine()
	}

	sort.SliceStable(order, func(i, j int) bool { return faultIndex(allFaults, order[i]) < faultIndex(allFaults, order[j]) })
	var rows []faults.Result
	for _, k := range order {
		r := *totals[k]
		r.Injections = injections[r.Fault]
		rows = append(rows, r)
	}
	var faultNames []string
	for _, f := range allFaults {
		if injections[f.Name] > 0 {
			faultNames = append(faultNames, fmt.Sprintf("%s x%d", f.Key, injections[f.Name]))
		}
	}
	totalInj := 0
	for _, v := range injections {
		totalInj += v
	}
	fmt.Printf("\nsoak: %v, seed %d, %d episodes\n%s", ran.Round(time.Second), *seed, episodes, faults.Table(rows))
	leaked := len(sum.Leaked) + len(closedLeaks)
	fmt.Printf("cycles done:        %d (%d holds, %d lost, %d acquire timeouts)\n", sum.Cycles, sum.Holds, sum.Lost, sum.Timeouts)
	fmt.Printf("faults injected:    %d (%s)\n", totalInj, strings.Join(faultNames, ", "))
	fmt.Printf("violations:         %d\n", len(sum.Violations))
	g := sum.Guarded
	fmt.Printf("guarded writes:     %d in the registers (%d commits refused, %d outcomes unknown, %d probes after a loss, all refused)\n",
		g.Writes, g.Refused, g.Unknown, g.Probes)
	fmt.Printf("leaked nodes:       %d (%d while open, %d after close)\n", leaked, len(sum.Leaked), len(closedLeaks))
	fmt.Printf("problems:           %d (undocumented errors, calls past their bound, waits past B)\n", len(sum.Problems))
	fmt.Printf("liveness:           longest wait beyond the queue %v (B %v); re-take after a fault p50/max %s over %d workers and episodes\n",
		sum.Beyond.Round(time.Millisecond), sum.Bound, faults.RecoveryCell(sum.Recovery), len(sum.Recovery))
	fmt.Printf("goroutines:         %d before, %d with the clients open at the start, %d at the end, %d after closing everything\n",
		goroutinesBefore, goroutinesOpen, goroutinesEnd, goroutinesAfter)
	for _, l := range closedLeaks {
		fmt.Println("  LEAK:", l)
	}
	flat := flatCheck(samples)
	fmt.Printf("curve:              %s\n", flat.what)
	failed := len(sum.Violations) > 0 || leaked > 0 || len(sum.Problems) > 0 || harnessErrs > 0 || goroutinesAfter > goroutinesBefore || !flat.ok
	if failed {
		if goroutinesAfter > goroutinesBefore {
			fmt.Printf("FAIL: %d goroutines outlived the run\n", goroutinesAfter-goroutinesBefore)
		}
		fmt.Println("soak: FAIL")
		return 1
	}
	fmt.Println("soak: PASS")
	return 0
}

func faultIndex(fs []*faults.Fault, key string) int {
	name, _, _ := strings.Cut(key, "\x00")
	for i, f := range fs {
		if f.Name == name {
			return i
		}
	}
	return len(fs)
}

func randHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// servers are the soak's targets and what they run on.
type servers struct {
	standalone, ensemble *faults.Target
	srv                  *zktest.Server
	ens                  *zktest.Ensemble
	once                 sync.Once
}

// startServers starts the standalone server and the ensemble at the same
// time, with a plain connection to each for the checks.
func startServers() (*servers, error) {
	s := &servers{}
	var srvErr, ensErr error
	var wg sync.WaitGroup
	wg.Go(func() { s.srv, srvErr = zktest.NewServer() })
	wg.Go(func() { s.ens, ensErr = zktest.NewEnsemble(3) })
	wg.Wait()
	if srvErr != nil || ensErr != nil {
		s.close()
		return nil, fmt.Errorf("starting servers: %v %v", srvErr, ensErr)
	}
	s.standalone = &faults.Target{Name: "standalone (proxied)", Addrs: []string{s.srv.Addr()}, Proxied: true,
		SessionTimeout: 2 * time.Second, Server: s.srv}
	s.ensemble = &faults.Target{Name: "ensemble", Addrs: s.ens.Addrs(), SessionTimeout: 3 * time.Second, Ensemble: s.ens}
	for _, tg := range []*faults.Target{s.standalone, s.ensemble} {
		raw, err := faults.Raw(tg.Addrs)
		if err != nil {
			s.close()
			return nil, err
		}
		tg.Raw = raw
	}
	return s, nil
}

func (s *servers) close() {
	s.once.Do(func() {
		for _, tg := range []*faults.Target{s.standalone, s.ensemble} {
			if tg != nil && tg.Raw != nil {
				tg.Raw.Close()
			}
		}
		if s.srv != nil {
			s.srv.Close()
		}
		if s.ens != nil {
			s.ens.Close()
		}
	})
}
