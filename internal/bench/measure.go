package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// result is one measurement of one scenario.
type result struct {
	// Cycles is the number of measured cycles.
	Cycles int
	// Elapsed is the measured wall-clock time.
	Elapsed time.Duration
	// P50 and P99 are percentiles of the measured latencies: whole
	// cycles when uncontended, Lock calls when contended.
	P50, P99 time.Duration
	// ClientRequests is the number of requests per cycle counted by the
	// client (recipe.Client.Stats, or the floor's own count), or -1 when
	// the client does not count them.
	ClientRequests float64
	// ServerRequests is the number of request packets per cycle counted
	// by the server, or -1 when it does not say.
	ServerRequests float64
	// Counts is the client's activity per cycle by kind (creates,
	// deletes, lists, reads, wake-ups, retries), or nil when the client
	// does not count.
	Counts *perCycle

	// Status is "" when the measurement ran as planned; else why it
	// ended early: statusStalled (no cycle completed for -stall: a
	// deadlock or a hang), statusTimeout (the lost-reply run's -lost-timeout
	// passed; the figures cover the cycles completed), or statusError.
	Status string
	// Detail is the error of statusError.
	Detail string
	// Errors, Overlaps and Orphans are of the lost-reply run: failed
	// Lock or Unlock calls, holds that overlapped another's, and lock
	// nodes left on the server once every cycle was done (-1: not known).
	Errors, Overlaps, Orphans int
}

// Statuses of a result that ended early.
const (
	statusStalled = "deadlock/timeout"
	statusTimeout = "time limit"
	statusError   = "error"
)

// perCycle is a recipe.Stats difference divided by the number of cycles.
type perCycle struct {
	Creates float64 `json:"creates"`
	Deletes float64 `json:"deletes"`
	Lists   float64 `json:"lists"`
	Reads   float64 `json:"reads"`
	Wakeups float64 `json:"wakeups"`
	Retries float64 `json:"retries"`
	Writes  float64 `json:"writes,omitempty"`
	Commits float64 `json:"commits,omitempty"`
}

// opsPerSec returns the measured throughput in cycles per second.
func (r result) opsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Cycles) / r.Elapsed.Seconds()
}

// brief returns a one-line summary for progress output.
func (r result) brief() string {
	s := fmt.Sprintf("%d cycles in %v: %.0f ops/s, p50 %v, p99 %v",
		r.Cycles, r.Elapsed.Round(time.Millisecond), r.opsPerSec(), roundDur(r.P50), roundDur(r.P99))
	if r.ClientRequests >= 0 {
		s += fmt.Sprintf(", %.2f requests/cycle", r.ClientRequests)
	}
	if r.ServerRequests >= 0 {
		s += fmt.Sprintf(" (server: %.2f)", r.ServerRequests)
	}
	return s
}

// percentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// snapshot is what the counters said when a measurement started.
type snapshot struct {
	stats     recipe.Stats
	packets   int64
	packetsOK bool
}

func (e *env) snapshot(b *bench) snapshot {
	var s snapshot
	if b.count != nil {
		s.stats = b.count()
	}
	s.packets, s.packetsOK = e.serverPackets()
	return s
}

// meter accumulates the measurement of one scenario over one or more
// slices of time.
type meter struct {
	lat       []time.Duration
	elapsed   time.Duration
	stats     recipe.Stats // client activity while measured
	counted   bool
	packets   int64 // server packets while measured
	packetsOK bool
	slices    int
}

// add records a slice that began at s0, took elapsed and measured lat.
func (m *meter) add(e *env, b *bench, s0 snapshot, lat []time.Duration, elapsed time.Duration) {
	s1 := e.snapshot(b)
	if m.slices == 0 {
		m.counted, m.packetsOK = b.count != nil, true
	}
	m.slices++
	m.lat = append(m.lat, lat...)
	m.elapsed += elapsed
	m.stats = addStats(m.stats, s1.stats.Sub(s0.stats))
	m.packets += s1.packets - s0.packets
	m.packetsOK = m.packetsOK && s0.packetsOK && s1.packetsOK
}

// done reports whether the meter has measured enough: -ops cycles, or
// -duration.
func (m *meter) done(cfg config) bool {
	if cfg.ops > 0 {
		return len(m.lat) >= cfg.ops
	}
	return m.elapsed >= cfg.duration
}

// result summarizes the meter.
func (m *meter) result() result {
	slices.Sort(m.lat)
	r := result{
		Cycles:         len(m.lat),
		Elapsed:        m.elapsed,
		P50:            percentile(m.lat, 50),
		P99:            percentile(m.lat, 99),
		ClientRequests: -1,
		ServerRequests: -1,
	}
	if r.Cycles == 0 {
		return r
	}
	n := float64(r.Cycles)
	if m.counted {
		d := m.stats
		r.ClientRequests = float64(d.RoundTrips()) / n
		r.Counts = &perCycle{
			Creates: float64(d.Creates) / n, Deletes: float64(d.Deletes) / n,
			Lists: float64(d.Lists) / n, Reads: float64(d.Reads) / n,
			Wakeups: float64(d.Wakeups) / n, Retries: float64(d.Retries) / n,
			Writes: float64(d.Writes) / n, Commits: float64(d.Commits) / n,
		}
	}
	if m.packetsOK {
		r.ServerRequests = float64(m.packets) / n
	}
	return r
}

func addStats(a, b recipe.Stats) recipe.Stats {
	return recipe.Stats{
		Creates: a.Creates + b.Creates, Deletes: a.Deletes + b.Deletes,
		Lists: a.Lists + b.Lists, Reads: a.Reads + b.Reads,
		Wakeups: a.Wakeups + b.Wakeups, Retries: a.Retries + b.Retries,
		Writes: a.Writes + b.Writes, Commits: a.Commits + b.Commits,
		Acquired: a.Acquired + b.Acquired, Lost: a.Lost + b.Lost,
		EpochsEnded: a.EpochsEnded + b.EpochsEnded,
	}
}

// uncontended measures uncontended scenarios side by side: it opens them
// all on fresh paths (named base/<id>-<label>), warms each up, then runs
// them in turns of -slice each, the order rotating every turn, until each
// has been measured for -duration (or -ops cycles). Scenarios measured in
// the same turns see the same machine, however its load drifts.
func (e *env) uncontended(ctx context.Context, scenarios []scenario, base, label string) (map[string]result, error) {
	benches := make([]*bench, 0, len(scenarios))
	closeAll := func() {
		for _, b := range benches {
			b.close()
		}
	}
	defer closeAll()
	// go-zookeeper calls take no context: closing the sessions is what
	// makes a call blocked on a dead server return.
	defer context.AfterFunc(ctx, closeAll)()
	for _, s := range scenarios {
		b, err := s.open(ctx, e, fmt.Sprintf("%s/%s-%s", base, s.id, label))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.title, err)
		}
		benches = append(benches, b)
	}
	for i, b := range benches {
		for start := time.Now(); time.Since(start) < e.cfg.warmup; {
			if err := b.cycle(ctx); err != nil {
				return nil, fmt.Errorf("%s: warm-up: %w", scenarios[i].title, err)
			}
		}
	}
	meters := make([]meter, len(benches))
	for turn := 0; ; turn++ {
		busy := false
		for j := range benches {
			i := (j + turn) % len(benches)
			if meters[i].done(e.cfg) {
				continue
			}
			busy = true
			if err := e.slice(ctx, benches[i], &meters[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", scenarios[i].title, err)
			}
		}
		if !busy {
			break
		}
	}
	out := make(map[string]result, len(scenarios))
	for i, s := range scenarios {
		out[s.id] = meters[i].result()
	}
	return out, nil
}

// slice runs b's cycle back to back for -slice, or less when that is
// enough to complete the meter, and records the cycles' latencies.
func (e *env) slice(ctx context.Context, b *bench, m *meter) error {
	lat := make([]time.Duration, 0, 256)
	s0 := e.snapshot(b)
	start := time.Now()
	for {
		t := time.Now()
		if err := b.cycle(ctx); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
		elapsed := time.Since(start)
		var enough bool
		if e.cfg.ops > 0 {
			enough = len(m.lat)+len(lat) >= e.cfg.ops
		} else {
			enough = m.elapsed+elapsed >= e.cfg.duration
		}
		if enough || elapsed >= e.cfg.slice {
			m.add(e, b, s0, lat, elapsed)
			return nil
		}
	}
}

// Phases of a contended measurement.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
	phasePause // the scale suite's, between the warm-up and the measurement
)

// contended opens scenario s on path and runs one goroutine per session,
// each cycling Lock+Unlock on its own handle: first for -warmup, then
// measured for -duration (or until -ops cycles were measured). It
// measures the sessions' combined throughput and the latency of Lock.
//
// A cycle counts when it starts while measuring; in steady state the
// cycles still running when the measurement starts make up for those
// running when it ends. When a cycle fails or ctx ends, the sessions are
// closed so that every blocked Lock returns.
func (e *env) contended(ctx context.Context, s scenario, path string) (result, error) {
	b, err := s.open(ctx, e, path)
	if err != nil {
		return result{}, err
	}
	defer b.close()
	var (
		phase    atomic.Int32
		measured atomic.Int64
		wg       sync.WaitGroup
		lat      = make([][]time.Duration, len(b.lockers))
		enough   = make(chan struct{}) // closed when -ops cycles were measured
		failed   = make(chan struct{}) // closed on the first error
		once     sync.Once
		firstErr error
		failOnce sync.Once
	)
	fail := func(err error) {
		failOnce.Do(func() {
			firstErr = err
			close(failed)
			b.close()
		})
	}
	defer context.AfterFunc(ctx, func() { fail(ctx.Err()) })()
	for i, l := range b.lockers {
		wg.Go(func() {
			for {
				p := phase.Load()
				if p == phaseStop {
					return
				}
				t := time.Now()
				if err := l.Lock(ctx); err != nil {
					fail(fmt.Errorf("session %d: lock: %w", i, err))
					return
				}
				d := time.Since(t)
				if err := l.Unlock(ctx); err != nil {
					fail(fmt.Errorf("session %d: unlock: %w", i, err))
					return
				}
				if p == phaseMeasure {
					lat[i] = append(lat[i], d)
					if n := measured.Add(1); e.cfg.ops > 0 && n >= int64(e.cfg.ops) {
						once.Do(func() { close(enough) })
					}
				}
			}
		})
	}
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-failed:
		}
	}

	var m meter
	sleep(e.cfg.warmup)
	s0 := e.snapshot(b)
	start := time.Now()
	phase.Store(phaseMeasure)
	if e.cfg.ops > 0 {
		select {
		case <-enough:
		case <-failed:
		}
	} else {
		sleep(e.cfg.duration)
	}
	elapsed := time.Since(start)
	phase.Store(phaseStop)
	wg.Wait()
	select {
	case <-failed:
		return result{}, firstErr
	default:
	}
	m.add(e, b, s0, slices.Concat(lat...), elapsed)
	return m.result(), nil
}

// roundDur rounds d for display.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 100*time.Microsecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
