// Command zkanalysis runs the analysis of internal/analysis: for each
// seed, an ensemble, the workloads and the nemesis, then the checkers. It
// prints each run's verdicts and the table of docs/analysis.md, keeps
// every run's history, picture and Porcupine visualisation under -out,
// and exits 1 if a guarded workload broke its rule or a control was not
// caught.
//
//	go run ./internal/analysis/cmd/zkanalysis -members 3 -seeds 1,2,3 -length 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/analysis"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func main() {
	members := flag.Int("members", 3, "ensemble size")
	seeds := flag.String("seeds", "random:3", "comma-separated seeds, one run each, or random:N for N seeds drawn at random (printed, to replay a run); "+
		"with -controls, random seeds are drawn among those whose schedule pauses holders within the length, the fault the controls are caught at")
	length := flag.Duration("length", time.Minute, "how long the nemesis injects faults in each run")
	controls := flag.Bool("controls", true, "run the two controls that must be caught")
	out := flag.String("out", ".cache/analysis", "directory for histories, pictures and visualisations")
	verbose := flag.Bool("v", false, "log the nemesis's steps")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logf := func(string, ...any) {}
	if *verbose {
		logf = log.Printf
	}
	ens, err := zktest.NewEnsemble(*members, zktest.WithStartTimeout(3*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer ens.Close()
	var results []*analysis.Result
	failed := false
	uncaught := map[string]int{} // control -> runs that did not catch it
	start := time.Now()
	exposes := func(seed uint64) bool {
		return !*controls || analysis.Exposes(seed, *members, *length, analysis.DefaultSession)
	}
	list, err := parseSeeds(*seeds, exposes)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("seeds %v, %d members, %v of faults each\n", list, *members, *length)
	for _, seed := range list {
		res, err := analysis.Run(ctx, analysis.Config{Members: *members, Seed: seed, Length: *length, Controls: *controls, Log: logf, Ensemble: ens})
		if err != nil {
			_ = ens.Close()
			log.Fatalf("seed %d: %v", seed, err)
		}
		res.Summary(os.Stdout)
		dir := filepath.Join(*out, fmt.Sprintf("m%d-seed%d", *members, seed))
		if err := res.Save(dir); err != nil {
			log.Printf("saving %s: %v", dir, err)
		}
		if res.Violated() {
			failed = true
			fmt.Printf("  FAILED: history, picture and visualisation kept in %s\n", dir)
		}
		for _, c := range res.Uncaught() {
			uncaught[c]++
		}
		results = append(results, res)
	}
	fmt.Printf("\n%d runs, %d members, %v in all\n", len(results), *members, time.Since(start).Round(time.Second))
	analysis.Table(os.Stdout, analysis.Rows(results))
	if err := ens.Close(); err != nil {
		log.Print(err)
	}
	for c, n := range uncaught {
		if n == len(results) {
			failed = true
			fmt.Printf("FAILED: the control %s was caught in none of the %d runs\n", c, n)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// parseSeeds reads "1,2,3" or "random:N"; random seeds are drawn among
// those that keep says to keep.
func parseSeeds(s string, keep func(uint64) bool) ([]uint64, error) {
	if n, ok := strings.CutPrefix(s, "random:"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 || k > 1000 {
			return nil, fmt.Errorf("seeds %q: want random:N with N from 1 to 1000", s)
		}
		out := make([]uint64, 0, k)
		for tries := 0; len(out) < k; tries++ {
			if tries == 1000*k {
				return nil, fmt.Errorf("seeds %q: no seed of %d drawn has a schedule the controls can be caught at; lengthen the run", s, tries)
			}
			if seed := rand.Uint64() % 1_000_000; keep(seed) {
				out = append(out, seed)
			}
		}
		return out, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}
