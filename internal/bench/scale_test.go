package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHandoffTimes(t *testing.T) {
	ms := func(v int64) int64 { return v * int64(time.Millisecond) }
	// The holder's Unlock returned at 10 ms; three waiters, listed out of
	// order; the last to hold got it before the one before it had returned
	// from Unlock.
	held := [][2]int64{{ms(20), ms(21)}, {ms(12), ms(13)}, {ms(19), ms(25)}}
	got := handoffTimes(ms(10), held)
	want := []time.Duration{2 * time.Millisecond, 6 * time.Millisecond, -5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("handoffTimes = %v, want %v", got, want)
	}

	d := drainFigures(3, [2]int64{ms(9), ms(10)}, held, 7)
	if d.Handoffs != 3 || d.Early != 1 {
		t.Errorf("drainFigures: %d hand-offs, %d early; want 3, 1", d.Handoffs, d.Early)
	}
	// From the holder's Unlock call (9 ms) to the last Unlock return (25 ms).
	if d.Seconds != 0.016 || d.Rate != 3/0.016 {
		t.Errorf("drainFigures: %v s, %v/s; want 0.016 s, %v/s", d.Seconds, d.Rate, 3/0.016)
	}
	if d.P50Ms != 2 || d.P99Ms != 6 {
		t.Errorf("drainFigures: p50 %v ms, p99 %v ms; want 2, 6", d.P50Ms, d.P99Ms)
	}
	if d.ServerRequests == nil || *d.ServerRequests != 7.0/3 {
		t.Errorf("drainFigures: %v requests per hand-off, want 7/3", d.ServerRequests)
	}
	if d := drainFigures(3, [2]int64{0, 1}, held, -1); d.ServerRequests != nil {
		t.Errorf("unknown packets gave %v requests per hand-off", *d.ServerRequests)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes(" 512,1, 16,16,128 ")
	if err != nil || !slices.Equal(got, []int{1, 16, 128, 512}) {
		t.Errorf("parseSizes = %v, %v; want [1 16 128 512]", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-3"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestScaleReport(t *testing.T) {
	cfg := config{suite: "scale", rounds: 2, goroutines: []int{1, 16}, waiters: []int{10, 100}, warmup: time.Second,
		duration: time.Second, drainTimeout: time.Minute, stall: 5 * time.Second}
	scenarios := scaleSuite()
	rep := newScaleReport(cfg, "127.0.0.1:2181", "true", "3.8.0", scenarios)
	res := func(cycles int, req float64) result {
		return result{Cycles: cycles, Elapsed: time.Second, P50: time.Millisecond, P99: 3 * time.Millisecond,
			ClientRequests: -1, ServerRequests: req, Orphans: -1}
	}
	for round := range 2 {
		for _, g := range cfg.goroutines {
			rep.addEntity("entity-floor", g, res(1000*g, 3))
			rep.addEntity("entity-zklock", g, res(800*g, 3))
			rep.addEntity("entity-mutex", g, res(900*g+100*round, 3))
			if g == 16 && round == 1 {
				rep.addEntity("entity-curator", g, result{Status: statusStalled, ClientRequests: -1, ServerRequests: -1})
			} else {
				rep.addEntity("entity-curator", g, res(500*g, 3.01))
			}
		}
		for _, n := range cfg.waiters {
			v := func(x float64) *float64 { return &x }
			for _, id := range []string{"drain-mutex", "drain-zklock"} {
				d := drainFigures(n, [2]int64{0, 1}, nil, int64(2*n))
				d.Rate, d.P50Ms, d.P99Ms = 500, 0.5, 2
				d.HeapInuse, d.HeapAlloc, d.StackInuse, d.Goroutines = v(3000), v(2000), v(8192), v(1)
				d.Descriptors, d.Total, d.StackUsed = v(480), v(2480), v(3000)
				rep.addDrain(id, n, d)
			}
			rep.addDrain("drain-curator", n, drainRound{Rate: 200, P50Ms: 1.5, P99Ms: 9, JVMHeap: v(float64(40 * n))})
			rep.addDrain("drain-kazoo", n, drainRound{Rate: 150, P50Ms: 2, P99Ms: 12})
		}
	}
	rep.finish()

	if st := rep.entity("entity-mutex", 16); st.OpsPerSec == nil || st.OpsPerSec.Median != 14450 || st.OpsPerSec.Min != 14400 || st.OpsPerSec.Max != 14500 {
		t.Errorf("mutex at 16: %+v, want median 14450, 14400-14500", st.OpsPerSec)
	}
	if st := rep.entity("entity-curator", 16); st.Valid != 1 {
		t.Errorf("Curator at 16: %d valid rounds, want 1", st.Valid)
	}
	var found bool
	for _, q := range rep.Ratios {
		if q.num == "entity-mutex" && q.den == "entity-floor" && q.Goroutines == 1 {
			found = true
			if q.Value == nil || q.Value.Min != 0.9 || q.Value.Max != 1.0 {
				t.Errorf("mutex / floor at 1: %+v, want 0.9-1.0", q.Value)
			}
		}
	}
	if !found {
		t.Error("no mutex / floor ratio at 1 goroutine")
	}

	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per-entity locks", "14450 (14400-14500)", "queue drain", "n/a", "deadlock/timeout"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	for _, k := range []string{"per_entity_locks", "queue_drain", "ratios", "settings"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}

	dir := t.TempDir()
	files, err := rep.writeCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Errorf("wrote %v, want 5 charts", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		els := decodeSVG(t, b)
		lines := 0
		for _, el := range els {
			if el.name == "polyline" {
				lines++
			}
		}
		if lines == 0 {
			t.Errorf("%s: no lines", filepath.Base(f))
		}
	}
}
