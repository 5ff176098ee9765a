package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// scaleReport collects the scale suite's results and summarizes them:
// medians over the rounds, with the smallest and largest value.
type scaleReport struct {
	Machine  machineInfo    `json:"machine"`
	Server   serverInfo     `json:"server"`
	Settings scaleSettings  `json:"settings"`
	Locks    []*entityStats `json:"per_entity_locks"`
	Drains   []*drainStats  `json:"queue_drain"`
	Ratios   []scaleRatio   `json:"ratios"`
	// Charts are the SVG files written (-charts).
	Charts []string `json:"charts,omitempty"`

	scenarios []scenario
}

// scaleSettings echoes the command line.
type scaleSettings struct {
	Suite         string `json:"suite"`
	Rounds        int    `json:"rounds"`
	Warmup        string `json:"warmup"`
	PeerWarmup    string `json:"peer_warmup"`
	Duration      string `json:"duration"`
	Goroutines    []int  `json:"goroutines"`
	Waiters       []int  `json:"waiters"`
	DrainSessions int    `json:"drain_sessions"`
	DrainTimeout  string `json:"drain_timeout"`
	Stall         string `json:"stall"`
	// Descriptor is the heap of a new goroutine's descriptor, in bytes
	// (goroutineDescriptor); 0 when no Go drain ran.
	Descriptor float64 `json:"goroutine_descriptor_bytes,omitempty"`
}

// spread is a figure over the rounds: its median, smallest and largest.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf returns the spread of v, or nil for none. Unlike median's,
// negative values count: a heap can shrink between two readings.
func spreadOf(v []float64) *spread {
	if len(v) == 0 {
		return nil
	}
	s := slices.Sorted(slices.Values(v))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// entityStats is one implementation's per-entity results at one number of
// goroutines.
type entityStats struct {
	ID         string `json:"id"`
	Impl       string `json:"implementation"`
	Title      string `json:"title"`
	Goroutines int    `json:"goroutines"`
	// Valid is the number of rounds the figures are over: those that did
	// not stall or fail.
	Valid          int     `json:"valid_rounds"`
	OpsPerSec      *spread `json:"ops_per_sec,omitempty"`
	P50Ms          *spread `json:"p50_ms,omitempty"`
	P99Ms          *spread `json:"p99_ms,omitempty"`
	ClientRequests *spread `json:"client_requests_per_cycle,omitempty"`
	ServerRequests *spread `json:"server_requests_per_cycle,omitempty"`

	Rounds []roundStats `json:"rounds"`
}

// drainStats is one implementation's queue drain results at one number of
// waiters.
type drainStats struct {
	ID      string `json:"id"`
	Impl    string `json:"implementation"`
	Title   string `json:"title"`
	Waiters int    `json:"waiters"`
	Valid   int    `json:"valid_rounds"`

	Rate           *spread `json:"handoffs_per_sec,omitempty"`
	P50Ms          *spread `json:"handoff_p50_ms,omitempty"`
	P99Ms          *spread `json:"handoff_p99_ms,omitempty"`
	ServerRequests *spread `json:"server_requests_per_handoff,omitempty"`
	HeapInuse      *spread `json:"heap_inuse_per_waiter,omitempty"`
	HeapAlloc      *spread `json:"heap_alloc_per_waiter,omitempty"`
	Descriptors    *spread `json:"goroutine_descriptors_per_waiter,omitempty"`
	Total          *spread `json:"heap_and_descriptors_per_waiter,omitempty"`
	StackInuse     *spread `json:"stack_inuse_per_waiter,omitempty"`
	StackUsed      *spread `json:"stack_used_per_waiter,omitempty"`
	Goroutines     *spread `json:"goroutines_per_waiter,omitempty"`
	JVMHeap        *spread `json:"jvm_heap_per_waiter,omitempty"`

	Rounds []drainRound `json:"rounds"`
}

// scaleRatio is a per-entity throughput ratio at one number of
// goroutines: the median of the per-round ratios, and their range.
type scaleRatio struct {
	Name       string    `json:"name"`
	Goroutines int       `json:"goroutines"`
	Value      *spread   `json:"value,omitempty"`
	PerRound   []float64 `json:"per_round"`

	num, den string
}

// scaleRatioPairs are the per-entity ratios reported: numerator and
// denominator scenario ids.
var scaleRatioPairs = [][2]string{
	{"entity-mutex", "entity-floor"},
	{"entity-mutex", "entity-zklock"},
	{"entity-mutex", "entity-curator"},
	{"entity-zklock", "entity-floor"},
	{"entity-curator", "entity-floor"},
	{"entity-curator", "entity-zklock"},
}

func newScaleReport(cfg config, addr, fsync, version string, scenarios []scenario) *scaleReport {
	r := &scaleReport{
		Machine: machine(),
		Server:  serverInfo{Addr: addr, Version: version, ForceSync: fsync},
		Settings: scaleSettings{
			Suite: cfg.suite, Rounds: cfg.rounds, Warmup: cfg.warmup.String(), PeerWarmup: cfg.peerWarmup.String(),
			Duration:   cfg.duration.String(),
			Goroutines: cfg.goroutines, Waiters: cfg.waiters, DrainSessions: drainSessions,
			DrainTimeout: cfg.drainTimeout.String(), Stall: cfg.stall.String(),
		},
		scenarios: scenarios,
	}
	for _, s := range scenarios {
		switch s.kind {
		case kindEntity:
			for _, g := range cfg.goroutines {
				r.Locks = append(r.Locks, &entityStats{ID: s.id, Impl: s.scale.impl, Title: s.title, Goroutines: g})
			}
		case kindDrain:
			for _, n := range cfg.waiters {
				r.Drains = append(r.Drains, &drainStats{ID: s.id, Impl: s.scale.impl, Title: s.title, Waiters: n})
			}
		}
	}
	return r
}

func (r *scaleReport) entity(id string, g int) *entityStats {
	for _, st := range r.Locks {
		if st.ID == id && st.Goroutines == g {
			return st
		}
	}
	return nil
}

func (r *scaleReport) drain(id string, n int) *drainStats {
	for _, st := range r.Drains {
		if st.ID == id && st.Waiters == n {
			return st
		}
	}
	return nil
}

// addEntity records one round's per-entity result of scenario id at g
// goroutines.
func (r *scaleReport) addEntity(id string, g int, res result) {
	st := r.entity(id, g)
	st.Rounds = append(st.Rounds, roundOf(res))
}

// addDrain records one round's queue drain of scenario id with n waiters.
func (r *scaleReport) addDrain(id string, n int, d drainRound) {
	st := r.drain(id, n)
	st.Rounds = append(st.Rounds, d)
}

// finish computes the spreads and the ratios.
func (r *scaleReport) finish() {
	for _, st := range r.Locks {
		var ops, p50, p99, creq, sreq []float64
		for _, rs := range st.Rounds {
			if !rs.usable() {
				continue
			}
			st.Valid++
			ops, p50, p99 = append(ops, rs.OpsPerSec), append(p50, rs.P50Ms), append(p99, rs.P99Ms)
			if rs.ClientRequests != nil {
				creq = append(creq, *rs.ClientRequests)
			}
			if rs.ServerRequests != nil {
				sreq = append(sreq, *rs.ServerRequests)
			}
		}
		st.OpsPerSec, st.P50Ms, st.P99Ms = spreadOf(ops), spreadOf(p50), spreadOf(p99)
		st.ClientRequests, st.ServerRequests = spreadOf(creq), spreadOf(sreq)
	}
	for _, st := range r.Drains {
		var rate, p50, p99 []float64
		opt := map[string][]float64{}
		for _, d := range st.Rounds {
			if !d.usable() {
				continue
			}
			st.Valid++
			rate, p50, p99 = append(rate, d.Rate), append(p50, d.P50Ms), append(p99, d.P99Ms)
			for k, v := range map[string]*float64{
				"req": d.ServerRequests, "inuse": d.HeapInuse, "alloc": d.HeapAlloc,
				"stack": d.StackInuse, "gor": d.Goroutines, "jvm": d.JVMHeap,
				"desc": d.Descriptors, "total": d.Total, "used": d.StackUsed,
			} {
				if v != nil {
					opt[k] = append(opt[k], *v)
				}
			}
		}
		st.Rate, st.P50Ms, st.P99Ms = spreadOf(rate), spreadOf(p50), spreadOf(p99)
		st.ServerRequests, st.HeapInuse, st.HeapAlloc = spreadOf(opt["req"]), spreadOf(opt["inuse"]), spreadOf(opt["alloc"])
		st.StackInuse, st.Goroutines, st.JVMHeap = spreadOf(opt["stack"]), spreadOf(opt["gor"]), spreadOf(opt["jvm"])
		st.Descriptors, st.Total, st.StackUsed = spreadOf(opt["desc"]), spreadOf(opt["total"]), spreadOf(opt["used"])
	}
	for _, g := range r.Settings.Goroutines {
		for _, pair := range scaleRatioPairs {
			num, den := r.entity(pair[0], g), r.entity(pair[1], g)
			if num == nil || den == nil {
				continue
			}
			q := scaleRatio{Name: num.Impl + " / " + den.Impl, Goroutines: g, num: pair[0], den: pair[1]}
			for i := range min(len(num.Rounds), len(den.Rounds)) {
				nr, dr := num.Rounds[i], den.Rounds[i]
				if nr.usable() && dr.usable() && dr.OpsPerSec > 0 {
					q.PerRound = append(q.PerRound, nr.OpsPerSec/dr.OpsPerSec)
				}
			}
			q.Value = spreadOf(q.PerRound)
			r.Ratios = append(r.Ratios, q)
		}
	}
}

// writeJSON prints the report as indented JSON.
func (r *scaleReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// fmtSpread formats a spread as "median (min-max)", each with f ("min to
// max" when min is negative); just the median when all rounds agree or
// there was one; "-" for none.
func fmtSpread(s *spread, f func(float64) string) string {
	if s == nil {
		return "-"
	}
	m, lo, hi := f(s.Median), f(s.Min), f(s.Max)
	switch {
	case lo == hi:
		return m
	case s.Min < 0:
		return fmt.Sprintf("%s (%s to %s)", m, lo, hi)
	}
	return fmt.Sprintf("%s (%s-%s)", m, lo, hi)
}

// num formats a latency in milliseconds, or another figure of that size,
// with three significant digits or so.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func whole(v float64) string { return fmt.Sprintf("%.0f", v) }

func twoDigits(v float64) string { return fmt.Sprintf("%.2f", v) }

// writeText prints the report as tables.
func (r *scaleReport) writeText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m, s, set := r.Machine, r.Server, r.Settings
	fmt.Fprintf(bw, "machine:   %d CPUs, %s, %s GiB RAM, %s, %s\n", m.CPUs, m.CPUModel, m.MemoryGB, m.OS, m.Go)
	fmt.Fprintf(bw, "zookeeper: %s at %s, forceSync=%s\n", s.Version, s.Addr, s.ForceSync)
	fmt.Fprintf(bw, "runs:      %d rounds after a warm-up pass; per-entity locks: %s warm-up, then %s measured per\n", set.Rounds, set.Warmup, set.Duration)
	fmt.Fprintf(bw, "           implementation and size; queue drain: waiters over %d sessions, time limit %s;\n", set.DrainSessions, set.DrainTimeout)
	fmt.Fprintf(bw, "           the peers' processes warm up for %s (cycling; drains of 10 waiters); stall %s\n", set.PeerWarmup, set.Stall)
	fmt.Fprintln(bw, "Figures are medians over the rounds, with the smallest and largest in parentheses.")
	table := func(header ...string) *tabwriter.Writer {
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		return tw
	}
	invalid := func(rounds []string) string {
		return fmt.Sprintf("(%s)", strings.Join(rounds, ", "))
	}

	if len(r.Locks) > 0 {
		fmt.Fprintln(bw, "\nper-entity locks: one session, G goroutines, each cycling Lock+Unlock on a lock of its own:")
		tw := table("scenario", "G", "cycles/s", "p50 cycle (ms)", "p99 cycle (ms)", "requests/cycle (server)", "(client)")
		g := 0
		for _, st := range r.byGoroutines() {
			if st.Goroutines != g && g != 0 {
				fmt.Fprintln(tw, "\t\t\t\t\t\t")
			}
			g = st.Goroutines
			cells := []string{st.Title, strconv.Itoa(st.Goroutines)}
			if st.Valid == 0 {
				cells = append(cells, invalid(entityStatuses(st)))
			} else {
				cells = append(cells, fmtSpread(st.OpsPerSec, whole), fmtSpread(st.P50Ms, num), fmtSpread(st.P99Ms, num),
					fmtSpread(st.ServerRequests, twoDigits), fmtSpread(st.ClientRequests, twoDigits))
				if st.Valid < len(st.Rounds) {
					cells = append(cells, fmt.Sprintf("%d of %d rounds: %s", st.Valid, len(st.Rounds), strings.Join(entityStatuses(st), ", ")))
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(bw, "cycles/s: all goroutines together; p50, p99: latency of a whole Lock+Unlock cycle;")
		fmt.Fprintln(bw, "requests/cycle: counted by the server (mntr zk_packets_received) and by the client")
		fmt.Fprintln(bw, "(recipe.Client.Stats; the floor counts its own 3); - where not counted.")

		if len(r.Ratios) > 0 {
			fmt.Fprintln(bw, "\nthroughput ratios (median of the per-round ratios, min-max):")
			var names []string
			for _, q := range r.Ratios {
				if !slices.Contains(names, q.Name) {
					names = append(names, q.Name)
				}
			}
			tw := table(append([]string{"G"}, names...)...)
			for _, g := range r.Settings.Goroutines {
				cells := []string{strconv.Itoa(g)}
				for _, name := range names {
					c := "-"
					for _, q := range r.Ratios {
						if q.Goroutines == g && q.Name == name {
							c = fmtSpread(q.Value, twoDigits)
						}
					}
					cells = append(cells, c)
				}
				fmt.Fprintln(tw, strings.Join(cells, "\t"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}

		fmt.Fprintln(bw, "\ncycles/s by round:")
		tw = table("scenario", "G", "rounds")
		for _, st := range r.byGoroutines() {
			var cells []string
			for _, rs := range st.Rounds {
				if rs.usable() {
					cells = append(cells, whole(rs.OpsPerSec))
				} else {
					cells = append(cells, rs.Status)
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", st.Title, st.Goroutines, strings.Join(cells, " "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(r.Drains) > 0 {
		fmt.Fprintf(bw, "\nqueue drain: N waiters queued on one lock over %d sessions behind a holder, which then\n", r.Settings.DrainSessions)
		fmt.Fprintln(bw, "unlocks; each waiter unlocks as soon as it holds:")
		tw := table("scenario", "N", "hand-offs/s", "hand-off p50 (ms)", "hand-off p99 (ms)", "requests/hand-off (server)")
		for i, st := range r.Drains {
			if i > 0 && st.ID != r.Drains[i-1].ID {
				fmt.Fprintln(tw, "\t\t\t\t\t")
			}
			cells := []string{st.Title, strconv.Itoa(st.Waiters)}
			if st.Valid == 0 {
				cells = append(cells, invalid(drainStatuses(st)))
			} else {
				cells = append(cells, fmtSpread(st.Rate, whole), fmtSpread(st.P50Ms, num), fmtSpread(st.P99Ms, num), fmtSpread(st.ServerRequests, twoDigits))
				if st.Valid < len(st.Rounds) {
					cells = append(cells, fmt.Sprintf("%d of %d rounds: %s", st.Valid, len(st.Rounds), strings.Join(drainStatuses(st), ", ")))
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(bw, "hand-offs/s: waiters served per second, from the holder's Unlock call to the last")
		fmt.Fprintln(bw, "waiter's Unlock returning; hand-off: from the previous holder's Unlock returning to the")
		fmt.Fprintln(bw, "next holder's Lock returning.")

		fmt.Fprintln(bw, "\nmemory per waiter once all are queued (bytes; after two GCs, before the waiters started")
		fmt.Fprintln(bw, "and once all were queued; Curator: the JVM's used heap after System.gc()):")
		tw = table("scenario", "N", "HeapInuse", "HeapAlloc / JVM heap", "+ goroutine descriptors", "StackInuse", "stack used", "goroutines")
		for i, st := range r.Drains {
			if i > 0 && st.ID != r.Drains[i-1].ID {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t")
			}
			cells := []string{st.Title, strconv.Itoa(st.Waiters)}
			switch {
			case st.Valid == 0:
				cells = append(cells, invalid(drainStatuses(st)))
			case st.HeapAlloc != nil:
				cells = append(cells, fmtSpread(st.HeapInuse, whole), fmtSpread(st.HeapAlloc, whole), fmtSpread(st.Total, whole),
					fmtSpread(st.StackInuse, whole), fmtSpread(st.StackUsed, whole), fmtSpread(st.Goroutines, twoDigits))
			case st.JVMHeap != nil:
				cells = append(cells, "-", fmtSpread(st.JVMHeap, whole), "-", "-", "-", "- (a thread each)")
			default:
				cells = append(cells, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a")
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if d := r.Settings.Descriptor; d > 0 {
			fmt.Fprintf(bw, "HeapAlloc leaves out the waiters' goroutine descriptors (the runtime had one free for each,\n"+
				"as it keeps those of ended goroutines); the next column adds them, %.0f B per new goroutine.\n"+
				"stack used: the part of StackInuse the blocked call chains use.\n", d)
		}

		fmt.Fprintln(bw, "\nhand-offs/s by round (* the server was still busy when the heap was read; e: hand-offs")
		fmt.Fprintln(bw, "in which the next Lock returned before the previous Unlock):")
		tw = table("scenario", "N", "rounds")
		for _, st := range r.Drains {
			var cells []string
			for _, d := range st.Rounds {
				if !d.usable() {
					cells = append(cells, d.Status)
					continue
				}
				c := whole(d.Rate)
				if d.Unsettled {
					c += "*"
				}
				if d.Early > 0 {
					c += fmt.Sprintf(" (e %d)", d.Early)
				}
				cells = append(cells, c)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", st.Title, st.Waiters, strings.Join(cells, " | "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, st := range r.Drains {
			for i, d := range st.Rounds {
				if d.Status != "" && d.Detail != "" {
					fmt.Fprintf(bw, "%s, %d waiters, round %d: %s: %s\n", st.Title, st.Waiters, i+1, d.Status, d.Detail)
				}
			}
		}
	}
	for _, st := range r.Locks {
		for i, rs := range st.Rounds {
			if rs.Status != "" && rs.Detail != "" {
				fmt.Fprintf(bw, "%s, %d goroutines, round %d: %s: %s\n", st.Title, st.Goroutines, i+1, rs.Status, rs.Detail)
			}
		}
	}
	if len(r.Charts) > 0 {
		fmt.Fprintf(bw, "\ncharts: %s\n", strings.Join(r.Charts, ", "))
	}
	return bw.Flush()
}

// byGoroutines returns the per-entity stats ordered by number of
// goroutines, then in the suite's order.
func (r *scaleReport) byGoroutines() []*entityStats {
	out := slices.Clone(r.Locks)
	slices.SortStableFunc(out, func(a, b *entityStats) int { return a.Goroutines - b.Goroutines })
	return out
}

func entityStatuses(st *entityStats) []string {
	var out []string
	for _, rs := range st.Rounds {
		out = append(out, cmp.Or(rs.Status, "ok"))
	}
	return out
}

func drainStatuses(st *drainStats) []string {
	var out []string
	for _, d := range st.Rounds {
		out = append(out, cmp.Or(d.Status, "ok"))
	}
	return out
}

// Colors of the implementations, the same in every chart.
var implColors = map[string]string{
	implMutex:   chartPalette[0],
	implZkLock:  chartPalette[1],
	implCurator: chartPalette[2],
	implKazoo:   chartPalette[3],
	implFloor:   "#666666",
}

// charts returns the scale suite's charts by file name.
func (r *scaleReport) charts() []namedChart {
	impls := func(kind string) []scenario {
		var out []scenario
		for _, s := range r.scenarios {
			if s.kind == kind {
				out = append(out, s)
			}
		}
		// Ours first, the floor last: the same marker for each in every chart.
		order := []string{implMutex, implZkLock, implCurator, implKazoo, implFloor}
		slices.SortStableFunc(out, func(a, b scenario) int {
			return slices.Index(order, a.scale.impl) - slices.Index(order, b.scale.impl)
		})
		return out
	}
	sizes := func(v []int) []float64 {
		out := make([]float64, len(v))
		for i, n := range v {
			out[i] = float64(n)
		}
		return out
	}
	entitySeries := func(f func(*entityStats) *spread) []chartSeries {
		var out []chartSeries
		for _, s := range impls(kindEntity) {
			cs := chartSeries{Name: s.scale.impl, Color: implColors[s.scale.impl], Dashed: s.scale.impl == implFloor}
			for _, g := range r.Settings.Goroutines {
				y := math.NaN()
				if st := r.entity(s.id, g); st != nil && f(st) != nil {
					y = f(st).Median
				}
				cs.Points = append(cs.Points, chartPoint{X: float64(g), Y: y})
			}
			out = append(out, cs)
		}
		return out
	}
	drainSeries := func(f func(*drainStats) *spread, only ...string) []chartSeries {
		var out []chartSeries
		for _, s := range impls(kindDrain) {
			if only != nil && !slices.Contains(only, s.scale.impl) {
				continue
			}
			cs := chartSeries{Name: s.scale.impl, Color: implColors[s.scale.impl]}
			for _, n := range r.Settings.Waiters {
				y := math.NaN()
				if st := r.drain(s.id, n); st != nil && f(st) != nil {
					y = f(st).Median
				}
				cs.Points = append(cs.Points, chartPoint{X: float64(n), Y: y})
			}
			out = append(out, cs)
		}
		return out
	}
	fsync := "fsync " + map[string]string{"true": "on", "false": "off"}[r.Server.ForceSync]
	if fsync == "fsync " {
		fsync = "external server"
	}
	var out []namedChart
	if len(r.Locks) > 0 {
		out = append(out, namedChart{"scale-throughput.svg", lineChart{
			Title:  "Per-entity locks: throughput vs goroutines (one session, " + fsync + ")",
			XTitle: "goroutines, each on a lock of its own", YTitle: "Lock+Unlock cycles/s, all goroutines",
			XLog: true, XTicks: sizes(r.Settings.Goroutines), YZero: true,
			Series: entitySeries(func(st *entityStats) *spread { return st.OpsPerSec }),
		}})
	}
	if len(r.Drains) > 0 {
		waiters := sizes(r.Settings.Waiters)
		out = append(out,
			namedChart{"scale-handoff-p50.svg", lineChart{
				Title:  "Queue drain: hand-off latency p50 vs queue depth (" + fsync + ")",
				XTitle: "waiters queued on one lock", YTitle: "hand-off p50, ms",
				XLog: true, XTicks: waiters, YLog: true,
				Series: drainSeries(func(st *drainStats) *spread { return st.P50Ms }),
			}},
			namedChart{"scale-handoff-p99.svg", lineChart{
				Title:  "Queue drain: hand-off latency p99 vs queue depth (" + fsync + ")",
				XTitle: "waiters queued on one lock", YTitle: "hand-off p99, ms",
				XLog: true, XTicks: waiters, YLog: true,
				Series: drainSeries(func(st *drainStats) *spread { return st.P99Ms }),
			}},
			namedChart{"scale-drain-rate.svg", lineChart{
				Title:  "Queue drain: hand-offs per second vs queue depth (" + fsync + ")",
				XTitle: "waiters queued on one lock", YTitle: "hand-offs/s",
				XLog: true, XTicks: waiters, YZero: true,
				Series: drainSeries(func(st *drainStats) *spread { return st.Rate }),
			}},
			namedChart{"scale-heap.svg", lineChart{
				Title:  "Queue drain: heap per queued waiter vs queue depth",
				XTitle: "waiters queued on one lock", YTitle: "KiB per waiter (Go HeapAlloc; JVM used heap)",
				XLog: true, XTicks: waiters, YZero: true,
				Series: drainSeries(func(st *drainStats) *spread {
					s := st.HeapAlloc
					if s == nil {
						s = st.JVMHeap
					}
					if s == nil {
						return nil
					}
					return &spread{Median: s.Median / 1024, Min: s.Min / 1024, Max: s.Max / 1024}
				}, implMutex, implZkLock, implCurator),
			}},
		)
	}
	return out
}

// namedChart is a chart and its file name.
type namedChart struct {
	name  string
	chart lineChart
}

// writeCharts writes the charts into dir and returns their paths.
func (r *scaleReport) writeCharts(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, c := range r.charts() {
		p := filepath.Join(dir, c.name)
		f, err := os.Create(p)
		if err != nil {
			return files, err
		}
		err = c.chart.writeSVG(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, p)
	}
	return files, nil
}
