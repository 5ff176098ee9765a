package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report collects the results of every round and summarizes them.
type report struct {
	Machine   machineInfo      `json:"machine"`
	Server    serverInfo       `json:"server"`
	Baseline  *baselineInfo    `json:"baseline,omitempty"`
	Settings  settings         `json:"settings"`
	Scenarios []*scenarioStats `json:"scenarios"`
	Ratios    []ratio          `json:"ratios"`

	byID map[string]*scenarioStats
}

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemoryGB string `json:"memory_gib"`
	OS       string `json:"os"`
	Go       string `json:"go"`
}

// serverInfo describes the ZooKeeper server.
// baselineInfo names the revision the baseline's scenarios ran (-baseline).
type baselineInfo struct {
	Revision string `json:"revision"` // as given
	Commit   string `json:"commit"`   // resolved
}

type serverInfo struct {
	Addr      string `json:"addr"`
	Version   string `json:"version"`
	ForceSync string `json:"force_sync"`
}

// settings echoes the command line.
type settings struct {
	Rounds   int    `json:"rounds"`
	Warmup   string `json:"warmup"`
	Slice    string `json:"slice"`
	Duration string `json:"duration,omitempty"`
	Ops      int    `json:"ops,omitempty"`
	Sessions int    `json:"contended_sessions"`
	Suite    string `json:"suite"`
	Stall    string `json:"stall"`
	// Of the lost-reply runs (suite peers).
	LostEvery  int `json:"lost_every,omitempty"`
	LostCycles int `json:"lost_cycles,omitempty"`
}

// scenarioStats is one scenario's results over all rounds; the summary
// figures are medians over the rounds.
type scenarioStats struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Sessions  int    `json:"sessions"`
	LatencyOf string `json:"latency_of"`
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Valid is the number of rounds the medians are taken over: those
	// that did not stall or fail.
	Valid int `json:"valid_rounds"`

	OpsPerSec float64 `json:"ops_per_sec"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// ClientRequests and ServerRequests are requests per cycle, counted
	// by the client and by the server; absent when not counted.
	ClientRequests *float64 `json:"client_requests_per_cycle,omitempty"`
	ServerRequests *float64 `json:"server_requests_per_cycle,omitempty"`
	// Counts breaks the client's requests per cycle down by kind.
	Counts *perCycle `json:"client_counts_per_cycle,omitempty"`

	Rounds []roundStats `json:"rounds"`
}

// roundStats is one round's measurement of a scenario.
type roundStats struct {
	Cycles         int       `json:"cycles"`
	Seconds        float64   `json:"seconds"`
	OpsPerSec      float64   `json:"ops_per_sec"`
	P50Ms          float64   `json:"p50_ms"`
	P99Ms          float64   `json:"p99_ms"`
	ClientRequests *float64  `json:"client_requests_per_cycle,omitempty"`
	ServerRequests *float64  `json:"server_requests_per_cycle,omitempty"`
	Counts         *perCycle `json:"client_counts_per_cycle,omitempty"`
	// Status is why the round ended early; "" when it did not.
	Status string `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Errors, Overlaps and Orphans are of the lost-reply run.
	Errors   int  `json:"errors,omitempty"`
	Overlaps int  `json:"overlaps,omitempty"`
	Orphans  *int `json:"orphans,omitempty"`
}

// usable reports whether the round's figures count: it did not stall or
// fail (a lost-reply run that reached its time limit reports the cycles
// it completed).
func (rs roundStats) usable() bool {
	return rs.Status == "" || rs.Status == statusTimeout
}

// ratio compares the throughput of two scenarios. It is computed round by
// round, from measurements taken close together, and Value is the median
// of the per-round ratios; Met compares it with the target.
//
// ByP50 is the same comparison made with median latencies (the inverse
// ratio of the p50s, median over the rounds). Unlike throughput, which
// averages, it ignores stalls of the machine, so when the two disagree
// the machine was noisy. Spread is the largest per-round ratio divided by
// the smallest; Noisy is set when it exceeds noisySpread.
type ratio struct {
	Name     string    `json:"name"`
	Value    float64   `json:"value"`
	PerRound []float64 `json:"per_round"`
	ByP50    float64   `json:"by_p50"`
	Spread   float64   `json:"spread"`
	Noisy    bool      `json:"noisy"`
	Target   string    `json:"target"`
	Met      bool      `json:"met"`
	Note     string    `json:"note,omitempty"`

	num, den string
	min      float64
	// byLatency compares median latencies (den's p50 / num's p50)
	// instead of throughput: for the leader hand-offs.
	byLatency bool
}

func newReport(cfg config, addr, fsync, version string, scenarios []scenario) *report {
	r := &report{
		Machine: machine(),
		Server:  serverInfo{Addr: addr, Version: version, ForceSync: fsync},
		Settings: settings{
			Rounds: cfg.rounds, Warmup: cfg.warmup.String(), Slice: cfg.slice.String(),
			Sessions: cfg.sessions, Ops: cfg.ops, Suite: cfg.suite, Stall: cfg.stall.String(),
		},
		byID: map[string]*scenarioStats{},
	}
	if cfg.ops == 0 {
		r.Settings.Duration = cfg.duration.String()
	}
	for _, s := range scenarios {
		if s.kind == kindLostReply {
			r.Settings.LostEvery, r.Settings.LostCycles = cfg.lostEvery, cfg.lostCycles
		}
	}
	for _, s := range scenarios {
		st := &scenarioStats{ID: s.id, Title: s.title, Sessions: 1, LatencyOf: "Lock+Unlock cycle",
			Group: s.group, Kind: s.kind}
		switch {
		case s.kind == kindHandoff:
			st.Sessions = handoffSessions
			st.LatencyOf = "hand-off: from the leader leaving to the next leader's callback"
		case s.kind == kindLostReply:
			st.Sessions = cfg.lostSessions
			st.Title = fmt.Sprintf("%s (%d sessions)", s.title, cfg.lostSessions)
		case s.contended:
			st.Sessions = cfg.sessions
			st.Title = fmt.Sprintf("%s (%d sessions)", s.title, cfg.sessions)
			st.LatencyOf = "Lock call"
		case s.sessions == 1:
			st.Title = s.title + " (1 session)"
		}
		if s.id == idFloor {
			st.LatencyOf = "create+list+delete"
		}
		r.Scenarios = append(r.Scenarios, st)
		r.byID[s.id] = st
	}
	return r
}

// add records one round's result of scenario id.
func (r *report) add(id string, res result) {
	st := r.byID[id]
	st.Rounds = append(st.Rounds, roundOf(res))
}

// roundOf returns the figures of one round's result.
func roundOf(res result) roundStats {
	return roundStats{
		Cycles:         res.Cycles,
		Seconds:        res.Elapsed.Seconds(),
		OpsPerSec:      res.opsPerSec(),
		P50Ms:          ms(res.P50),
		P99Ms:          ms(res.P99),
		ClientRequests: known(res.ClientRequests),
		ServerRequests: known(res.ServerRequests),
		Counts:         res.Counts,
		Status:         res.Status,
		Detail:         res.Detail,
		Errors:         res.Errors,
		Overlaps:       res.Overlaps,
		Orphans:        knownInt(res.Orphans),
	}
}

// knownInt returns &v, or nil when v is negative (unknown).
func knownInt(v int) *int {
	if v < 0 {
		return nil
	}
	return &v
}

// reportedOnly is the target of a ratio that has none: it is reported.
const reportedOnly = "(reported)"

// noisySpread is the spread of per-round ratios above which a ratio is
// reported as noisy: the machine's load changed too much to trust it.
const noisySpread = 1.25

// finish computes the medians and the ratios.
func (r *report) finish() {
	for _, st := range r.Scenarios {
		var usable []roundStats
		for _, rs := range st.Rounds {
			if rs.usable() {
				usable = append(usable, rs)
			}
		}
		st.Valid = len(usable)
		pick := func(f func(roundStats) float64) float64 {
			var v []float64
			for _, rs := range usable {
				v = append(v, f(rs))
			}
			return median(v)
		}
		st.OpsPerSec = pick(func(rs roundStats) float64 { return rs.OpsPerSec })
		st.P50Ms = pick(func(rs roundStats) float64 { return rs.P50Ms })
		st.P99Ms = pick(func(rs roundStats) float64 { return rs.P99Ms })
		st.ClientRequests = known(pick(func(rs roundStats) float64 { return orUnknown(rs.ClientRequests) }))
		st.ServerRequests = known(pick(func(rs roundStats) float64 { return orUnknown(rs.ServerRequests) }))
		if len(usable) > 0 && usable[0].Counts != nil {
			c := func(f func(*perCycle) float64) float64 {
				return pick(func(rs roundStats) float64 { return f(rs.Counts) })
			}
			st.Counts = &perCycle{
				Creates: c(func(p *perCycle) float64 { return p.Creates }),
				Deletes: c(func(p *perCycle) float64 { return p.Deletes }),
				Lists:   c(func(p *perCycle) float64 { return p.Lists }),
				Reads:   c(func(p *perCycle) float64 { return p.Reads }),
				Wakeups: c(func(p *perCycle) float64 { return p.Wakeups }),
				Retries: c(func(p *perCycle) float64 { return p.Retries }),
				Writes:  c(func(p *perCycle) float64 { return p.Writes }),
				Commits: c(func(p *perCycle) float64 { return p.Commits }),
			}
		}
	}
	for _, q := range append([]ratio{
		{Name: "mutex / floor, uncontended", num: idMutex, den: idFloor, Target: ">= 0.90", min: 0.90},
		{Name: "mutex / zk.Lock, uncontended", num: idMutex, den: idZkLock, Target: ">= 1.05", min: 1.05},
		{Name: "mutex / zk.Lock, contended", num: idMutexContended, den: idZkLockContended, Target: ">= 1.0", min: 1.0},
		{Name: "mutex traced, sampling nothing / mutex", num: idMutexNoSample, den: idMutex, Target: ">= 0.97", min: 0.97},
		{Name: "mutex traced, sampling all / mutex", num: idMutexSampled, den: idMutex, Target: reportedOnly, min: 0},
	}, peerRatios()...) {
		num, den := r.byID[q.num], r.byID[q.den]
		if num == nil || den == nil {
			continue
		}
		var byP50 []float64
		for i := range min(len(num.Rounds), len(den.Rounds)) {
			nr, dr := num.Rounds[i], den.Rounds[i]
			if !nr.usable() || !dr.usable() {
				continue
			}
			if n := nr.P50Ms; n > 0 {
				byP50 = append(byP50, dr.P50Ms/n)
			}
			if q.byLatency {
				if n := nr.P50Ms; n > 0 {
					q.PerRound = append(q.PerRound, dr.P50Ms/n)
				}
			} else if d := dr.OpsPerSec; d > 0 {
				q.PerRound = append(q.PerRound, nr.OpsPerSec/d)
			}
		}
		if len(q.PerRound) == 0 {
			q.Note = "no round where both ran to the end (" + roundStatuses(den) + ")"
			r.Ratios = append(r.Ratios, q)
			continue
		}
		q.Value, q.ByP50 = median(q.PerRound), median(byP50)
		q.Spread = slices.Max(q.PerRound) / slices.Min(q.PerRound)
		q.Noisy = q.Spread > noisySpread
		q.Met = q.Value >= q.min
		r.Ratios = append(r.Ratios, q)
	}
}

// writeJSON prints the report as indented JSON.
func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints the report as tables.
func (r *report) writeText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m, s, set := r.Machine, r.Server, r.Settings
	fmt.Fprintf(bw, "machine:   %d CPUs, %s, %s GiB RAM, %s, %s\n", m.CPUs, m.CPUModel, m.MemoryGB, m.OS, m.Go)
	fmt.Fprintf(bw, "zookeeper: %s at %s, forceSync=%s\n", s.Version, s.Addr, s.ForceSync)
	if b := r.Baseline; b != nil {
		fmt.Fprintf(bw, "baseline:  this module at %s (%.12s), built as a peer process\n", b.Revision, b.Commit)
	}
	measure := set.Duration
	if set.Ops > 0 {
		measure = fmt.Sprintf("%d cycles", set.Ops)
	}
	fmt.Fprintf(bw, "runs:      %d rounds after a warm-up round; per scenario and round %s warm-up, then %s measured\n", set.Rounds, set.Warmup, measure)
	fmt.Fprintf(bw, "           (uncontended scenarios in alternating turns of %s; contended: %d sessions)\n", set.Slice, set.Sessions)

	width := len("scenario")
	for _, st := range r.Scenarios {
		width = max(width, len(st.Title))
	}
	row := func(cells ...string) {
		fmt.Fprintf(bw, "%-*s", width, cells[0])
		for _, c := range cells[1:] {
			fmt.Fprintf(bw, "  %9s", c)
		}
		fmt.Fprintln(bw)
	}

	fmt.Fprintln(bw, "\nresults (medians over the rounds):")
	row("", "", "", "", "requests", "requests")
	row("scenario", "ops/s", "p50", "p99", "/cycle", "/cycle")
	row("", "", "", "", "(client)", "(server)")
	group := ""
	for _, st := range r.Scenarios {
		if st.Group != group {
			group = st.Group
			fmt.Fprintf(bw, "-- %s\n", group)
		}
		if st.Valid == 0 {
			row(st.Title, roundStatuses(st))
			continue
		}
		ops := fmt.Sprintf("%.0f", st.OpsPerSec)
		if st.Kind == kindHandoff {
			ops = "-"
		}
		fmt.Fprintf(bw, "%-*s", width, st.Title)
		for _, c := range []string{ops, fmtMs(st.P50Ms), fmtMs(st.P99Ms), fmtCount(st.ClientRequests), fmtCount(st.ServerRequests)} {
			fmt.Fprintf(bw, "  %9s", c)
		}
		if st.Valid < len(st.Rounds) {
			fmt.Fprintf(bw, "  (%d of %d rounds: %s)", st.Valid, len(st.Rounds), roundStatuses(st))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintln(bw, "ops/s: Lock+Unlock cycles per second, all sessions together.")
	fmt.Fprintln(bw, "p50, p99: latency of a whole cycle (uncontended, and the lost-reply runs), of the")
	fmt.Fprintln(bw, "Lock call (contended), of a hand-off (leader: from the leader's leaving to the next")
	fmt.Fprintln(bw, "leader's callback).")
	fmt.Fprintln(bw, "requests/cycle: counted by recipe.Client.Stats (the floor counts its own 3) and by")
	fmt.Fprintln(bw, "the server (mntr zk_packets_received, including a few pings); - where not counted;")
	fmt.Fprintln(bw, "per hand-off for the leaders, including the leaving one's new campaign (and session).")
	fmt.Fprintf(bw, "%s: no cycle completed for %s (or the peer's time ran out); the round is left out.\n", statusStalled, r.Settings.Stall)

	fmt.Fprintln(bw, "\nclient requests per cycle by kind:")
	row("scenario", "creates", "lists", "reads", "writes", "commits", "deletes", "wake-ups", "retries")
	for _, st := range r.Scenarios {
		if c := st.Counts; c != nil {
			f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
			row(st.Title, f(c.Creates), f(c.Lists), f(c.Reads), f(c.Writes), f(c.Commits), f(c.Deletes), f(c.Wakeups), f(c.Retries))
		}
	}

	fmt.Fprintln(bw, "\nops/s by round (hand-offs: p50):")
	for _, st := range r.Scenarios {
		cells := []string{st.Title}
		for _, rs := range st.Rounds {
			switch {
			case rs.Status != "" && !rs.usable():
				cells = append(cells, rs.Status)
			case st.Kind == kindHandoff:
				cells = append(cells, fmtMs(rs.P50Ms))
			default:
				cells = append(cells, fmt.Sprintf("%.0f", rs.OpsPerSec))
			}
		}
		row(cells...)
	}

	lostHeader := false
	for _, st := range r.Scenarios {
		if st.Kind != kindLostReply {
			continue
		}
		if !lostHeader {
			lostHeader = true
			fmt.Fprintf(bw, "\nlost create replies (every %dth create's reply lost; %d cycles per session), by round:\n", r.Settings.LostEvery, r.Settings.LostCycles)
			fmt.Fprintf(bw, "%-*s  %s\n", width, "scenario", "cycles done, errors, overlaps, orphans (status)")
		}
		var cells []string
		for _, rs := range st.Rounds {
			orphans := "?"
			if rs.Orphans != nil {
				orphans = strconv.Itoa(*rs.Orphans)
			}
			c := fmt.Sprintf("%d, %d, %d, %s", rs.Cycles, rs.Errors, rs.Overlaps, orphans)
			if rs.Status != "" {
				c += " (" + rs.Status + ")"
			}
			cells = append(cells, c)
		}
		fmt.Fprintf(bw, "%-*s  %s\n", width, st.Title, strings.Join(cells, " | "))
	}

	if len(r.Ratios) > 0 {
		fmt.Fprintln(bw, "\nratios (median of the per-round ratios, min-max over the rounds; by p50: the same from median latencies):")
		nameWidth := 30
		for _, q := range r.Ratios {
			nameWidth = max(nameWidth, len(q.Name))
		}
		fmt.Fprintf(bw, "  %-*s %6s  %-11s %6s  %-15s %-8s %s\n", nameWidth, "ratio", "value", "min-max", "by p50", "target", "verdict", "per round")
		noisy := false
		for _, q := range r.Ratios {
			var pr []string
			for _, v := range q.PerRound {
				pr = append(pr, fmt.Sprintf("%.2f", v))
			}
			verdict := "NOT MET"
			switch {
			case q.Target == reportedOnly:
				verdict = "-"
			case q.Met:
				verdict = "met"
			}
			flag := ""
			if q.Noisy {
				flag, noisy = " (noisy)", true
			}
			if len(q.PerRound) == 0 {
				fmt.Fprintf(bw, "  %-*s %6s  %-11s %6s  %-15s %-8s %s\n", nameWidth, q.Name, "-", "", "-", q.Target, "n/a", q.Note)
				continue
			}
			mm := fmt.Sprintf("%.2f-%.2f", slices.Min(q.PerRound), slices.Max(q.PerRound))
			fmt.Fprintf(bw, "  %-*s %6.2f  %-11s %6.2f  %-15s %-8s %s%s\n",
				nameWidth, q.Name, q.Value, mm, q.ByP50, q.Target, verdict, strings.Join(pr, " "), flag)
		}
		if noisy {
			fmt.Fprintf(bw, "noisy: the per-round ratios differ by more than %.0f%%: the machine's load changed\nduring the run; rerun it on a quieter machine, or with more -rounds, before trusting the verdict.\n", (noisySpread-1)*100)
		}
	}
	for _, st := range r.Scenarios {
		var retries float64
		for _, rs := range st.Rounds {
			if rs.Counts != nil {
				retries += rs.Counts.Retries * float64(rs.Cycles)
			}
		}
		if retries > 0 {
			fmt.Fprintf(bw, "\nwarning: %s retried %.0f operations after connection loss\n", st.Title, retries)
		}
	}
	return bw.Flush()
}

func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

func fmtCount(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

// known returns &v, or nil when v is negative (unknown).
func known(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return &v
}

// orUnknown returns *p, or -1 (unknown) when p is nil.
func orUnknown(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of v (the mean of the middle two for an even
// count), or 0 for none. Negative values (unknown) make it -1.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if s[0] < 0 {
		return -1
	}
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// machine describes the host, from /proc where it can.
func machine() machineInfo {
	m := machineInfo{
		CPUs:     runtime.NumCPU(),
		CPUModel: "unknown",
		MemoryGB: "unknown",
		OS:       runtime.GOOS + "/" + runtime.GOARCH,
		Go:       runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err == nil {
					m.MemoryGB = fmt.Sprintf("%.1f", kb/(1<<20))
				}
				break
			}
		}
	}
	return m
}

// roundStatuses lists the statuses of st's rounds, "ok" for those that
// ran as planned.
func roundStatuses(st *scenarioStats) string {
	var out []string
	for _, rs := range st.Rounds {
		out = append(out, cmp.Or(rs.Status, "ok"))
	}
	return strings.Join(out, ", ")
}
