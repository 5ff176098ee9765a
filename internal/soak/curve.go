package main

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// sample is one point of the heap and goroutine curve.
type sample struct {
	elapsed    time.Duration
	cycles     int64
	heapAlloc  uint64
	heapInuse  uint64
	goroutines int
}

// curve prints a sample every minute from begin until done closes, and
// returns the samples.
func curve(begin time.Time, cycles *atomic.Int64, done <-chan struct{}, logf func(string, ...any)) []sample {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	var out []sample
	for {
		select {
		case <-done:
			return out
		case <-tick.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := sample{elapsed: time.Since(begin).Round(time.Second), cycles: cycles.Load(),
			heapAlloc: ms.HeapAlloc, heapInuse: ms.HeapInuse, goroutines: runtime.NumGoroutine()}
		out = append(out, s)
		logf("minute %d [%v]: cycles %d | heap alloc %s, in use %s | goroutines %d",
			len(out), s.elapsed, s.cycles, mib(s.heapAlloc), mib(s.heapInuse), s.goroutines)
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// flatness is the verdict on a curve.
type flatness struct {
	ok   bool
	what string
}

// flatCheck compares the last third of the samples with the first third:
// the largest HeapAlloc at most twice the first third's largest, the most
// goroutines at most 1.5 times the first third's most. With fewer than 3
// samples (a run under 3 minutes) there is nothing to compare.
func flatCheck(ss []sample) flatness {
	if len(ss) < 3 {
		return flatness{ok: true, what: fmt.Sprintf("%d samples, too few to compare (3 minutes needed)", len(ss))}
	}
	k := len(ss) / 3
	first, last := ss[:k], ss[len(ss)-k:]
	maxHeap := func(s []sample) uint64 {
		return slices.MaxFunc(s, func(a, b sample) int { return cmp.Compare(a.heapAlloc, b.heapAlloc) }).heapAlloc
	}
	maxG := func(s []sample) int {
		return slices.MaxFunc(s, func(a, b sample) int { return cmp.Compare(a.goroutines, b.goroutines) }).goroutines
	}
	h1, h3, g1, g3 := maxHeap(first), maxHeap(last), maxG(first), maxG(last)
	ok := h3 <= 2*h1 && 2*g3 <= 3*g1
	verdict := "flat"
	if !ok {
		verdict = "NOT FLAT"
	}
	return flatness{ok: ok, what: fmt.Sprintf("%s: %d samples; largest heap alloc %s in the first %d, %s in the last %d (bound 2x); most goroutines %d in the first %d, %d in the last %d (bound 1.5x)",
		verdict, len(ss), mib(h1), k, mib(h3), k, g1, k, g3, k)}
}
