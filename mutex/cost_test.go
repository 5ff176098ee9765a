package mutex_test

import (
	"context"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// clientWork is what the process did over a stretch of lock cycles,
// counted by the runtime (runtime/metrics): exact counts, not timings.
type clientWork struct {
	goroutines uint64 // goroutines created
	allocs     uint64 // heap allocations
	bytes      uint64 // bytes allocated
}

var workMetrics = []string{
	"/sched/goroutines-created:goroutines",
	"/gc/heap/allocs:objects",
	"/gc/heap/allocs:bytes",
}

func readWork() clientWork {
	s := make([]metrics.Sample, len(workMetrics))
	for i, name := range workMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return clientWork{s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()}
}

// per returns the work done since w0, per cycle.
func (w clientWork) per(w0 clientWork, cycles int) (goroutines, allocs, bytes float64) {
	n := float64(cycles)
	return float64(w.goroutines-w0.goroutines) / n, float64(w.allocs-w0.allocs) / n, float64(w.bytes-w0.bytes) / n
}

// Targets of TestCycleCost. A cycle's requests run on the client's
// workers, which are reused, and a hold has no goroutine of its own until
// its loss signal is asked for: in steady state a cycle starts no
// goroutine. The allocation bounds sit about a quarter above what the
// cycles allocate, so a change that adds work per cycle fails here. Most of
// a cycle's allocations are go-zookeeper's (a request's struct and channel,
// and its reflective encoding and decoding), and a hand-off's grow with the
// queue: go-zookeeper decodes every name of a listing into a string of its
// own (the drain below starts with 200 waiters).
const (
	maxGoroutinesUncontended = 0.02 // per Lock+Unlock
	maxGoroutinesAsked       = 1.02 // per Lock+Err+Unlock: the hold's monitor
	maxGoroutinesContended   = 0.1  // per cycle, 8 sessions re-queuing
	maxGoroutinesHandOff     = 0.1  // per hand-off while a queue drains
	maxAllocsUncontended     = 120  // per Lock+Unlock
	maxAllocsAsked           = 145  // per Lock+Err+Unlock
	maxAllocsContended       = 215
	maxAllocsHandOff         = 225
)

// TestCycleCost pins the client's work per lock cycle: goroutines created
// and heap allocations, counted with runtime/metrics over many cycles
// after a warm-up (docs/performance.md, "Client work per cycle").
func TestCycleCost(t *testing.T) {
	srv := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cycle := func(m *mutex.Mutex, ask bool) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := m.Lock(cctx); err != nil {
			t.Fatal(err)
		}
		if ask && m.Err() != nil {
			t.Fatal(m.Err())
		}
		if err := m.Unlock(cctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name          string
		ask           bool
		maxGoroutines float64
		maxAllocs     float64
	}{
		{"uncontended", false, maxGoroutinesUncontended, maxAllocsUncontended},
		{"uncontended, Err asked", true, maxGoroutinesAsked, maxAllocsAsked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := locktest.Client(t, []string{srv.Addr()})
			m := newMutex(t, c, zktest.UniquePath(t))
			for range 50 {
				cycle(m, tc.ask)
			}
			const cycles = 500
			w0 := readWork()
			for range cycles {
				cycle(m, tc.ask)
			}
			g, a, b := readWork().per(w0, cycles)
			t.Logf("per cycle: %.2f goroutines created, %.1f allocations, %.0f bytes", g, a, b)
			if g > tc.maxGoroutines {
				t.Errorf("%.2f goroutines created per cycle, want at most %v", g, tc.maxGoroutines)
			}
			if a > tc.maxAllocs {
				t.Errorf("%.1f allocations per cycle, want at most %v", a, tc.maxAllocs)
			}
		})
	}
	t.Run("contended, 8 sessions", func(t *testing.T) {
		const sessions, warm, cycles = 8, 20, 100
		path := zktest.UniquePath(t)
		ms := make([]*mutex.Mutex, sessions)
		for i := range ms {
			ms[i] = newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
		}
		run := func(n int) {
			var wg sync.WaitGroup
			for _, m := range ms {
				wg.Go(func() {
					for range n {
						cycle(m, false)
					}
				})
			}
			wg.Wait()
		}
		run(warm)
		w0 := readWork()
		run(cycles)
		// The test's own goroutines: one per session.
		g, a, b := readWork().per(w0, sessions*cycles)
		g -= float64(sessions) / float64(sessions*cycles)
		t.Logf("per cycle: %.2f goroutines created, %.1f allocations, %.0f bytes", g, a, b)
		if g > maxGoroutinesContended {
			t.Errorf("%.2f goroutines created per cycle, want at most %v", g, maxGoroutinesContended)
		}
		if a > maxAllocsContended {
			t.Errorf("%.1f allocations per cycle, want at most %d", a, maxAllocsContended)
		}
	})
	t.Run("queue draining", func(t *testing.T) {
		const sessions, waiters = 4, 200
		path := zktest.UniquePath(t)
		var clients [sessions]*recipe.Client
		for i := range clients {
			clients[i] = locktest.Client(t, []string{srv.Addr()})
		}
		holder := newMutex(t, clients[0], path)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		raw := zktest.Connect(t, srv.Addr())
		var wg sync.WaitGroup
		for i := range waiters {
			m := newMutex(t, clients[i%sessions], path)
			wg.Go(func() { cycle(m, false) })
		}
		locktest.Eventually(t, time.Minute, "every waiter queued", func() bool {
			n, _, err := raw.Children(path)
			return err == nil && len(n) == waiters+1
		})
		time.Sleep(200 * time.Millisecond) // the waiters' watches are set
		w0 := readWork()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		g, a, b := readWork().per(w0, waiters)
		t.Logf("per hand-off: %.2f goroutines created, %.1f allocations, %.0f bytes", g, a, b)
		if g > maxGoroutinesHandOff {
			t.Errorf("%.2f goroutines created per hand-off, want at most %v", g, maxGoroutinesHandOff)
		}
		if a > maxAllocsHandOff {
			t.Errorf("%.1f allocations per hand-off, want at most %d", a, maxAllocsHandOff)
		}
	})
}
