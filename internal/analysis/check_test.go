package analysis

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func inc(worker, call, ret int, old int64, oldTag, tag string, st Status) Op {
	return Op{Workload: WCounter, Worker: worker, Kind: "inc", Call: at(call), Return: at(ret), Status: st, Old: old, OldTag: oldTag, Tag: tag}
}

func TestCounterLinearizability(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"in turn", []Op{
			inc(0, 0, 10, 0, "init", "a", OK),
			inc(1, 11, 20, 1, "a", "b", OK),
			inc(0, 21, 30, 2, "b", "c", OK),
		}, porcupine.Ok},
		{"two read the same value: a stale write", []Op{
			inc(0, 0, 10, 0, "init", "a", OK),
			inc(1, 11, 20, 1, "a", "b", OK),
			inc(0, 12, 40, 1, "a", "c", OK), // read before b's write, wrote after it
		}, porcupine.Illegal},
		{"refused write left out", []Op{
			inc(0, 0, 10, 0, "init", "a", OK),
			inc(1, 5, 20, 0, "init", "x", Refused),
			inc(1, 21, 30, 1, "a", "b", OK),
		}, porcupine.Ok},
		{"unknown write seen applied", []Op{
			inc(0, 0, 10, 0, "init", "a", Unknown),
			inc(1, 50, 60, 1, "a", "b", OK),
		}, porcupine.Ok},
		{"unknown write never seen is left out", []Op{
			inc(0, 0, 10, 0, "init", "a", Unknown),
			inc(1, 50, 60, 0, "init", "b", OK),
		}, porcupine.Ok},
		{"read of a value nobody wrote", []Op{
			inc(0, 0, 10, 0, "init", "a", OK),
			{Workload: WCounter, Worker: -1, Kind: "read", Call: at(20), Return: at(21), Status: OK, Old: 5, OldTag: "zz"},
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := counterOperations(tt.ops, WCounter)
			got := porcupine.CheckOperationsTimeout(counterModel, h, 10*time.Second)
			if got != tt.want {
				t.Fatalf("porcupine says %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCounterKeysCheckedApart(t *testing.T) {
	ops := []Op{
		inc(0, 0, 10, 0, "init", "a", OK),
		inc(1, 0, 10, 0, "init", "b", OK),
	}
	ops[1].Key = 1
	h, _, _ := counterOperations(ops, WCounter)
	if got := porcupine.CheckOperationsTimeout(counterModel, h, 10*time.Second); got != porcupine.Ok {
		t.Fatalf("two keys, one increment each: %v, want Ok", got)
	}
}

func TestCheckIntervals(t *testing.T) {
	iv := func(w, s, e int) Interval { return Interval{Workload: WSemaphore, Worker: w, Start: at(s), End: at(e)} }
	tests := []struct {
		name     string
		ivs      []Interval
		limit    int
		expiries map[int][]window
		bad      int
	}{
		{"apart", []Interval{iv(0, 0, 10), iv(1, 10, 20)}, 1, nil, 0},
		{"overlap", []Interval{iv(0, 0, 10), iv(1, 5, 20)}, 1, nil, 1},
		{"two leases", []Interval{iv(0, 0, 10), iv(1, 5, 20)}, 2, nil, 0},
		{"three of two", []Interval{iv(0, 0, 10), iv(1, 5, 20), iv(2, 6, 8)}, 2, nil, 1},
		{"cut at an expiry", []Interval{iv(0, 0, 10), iv(1, 5, 20)}, 1, map[int][]window{0: {{at(4), at(6)}}}, 0},
		{"granted while the expiry was under way", []Interval{iv(0, 5, 10), iv(1, 7, 20)}, 1, map[int][]window{0: {{at(4), at(8)}}}, 0},
		{"an expiry of another worker cuts nothing", []Interval{iv(0, 0, 10), iv(1, 5, 20)}, 1, map[int][]window{2: {{at(4), at(6)}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkIntervals(tt.ivs, WSemaphore, tt.limit, tt.expiries)
			if len(got) != tt.bad {
				t.Fatalf("%d findings, want %d: %q", len(got), tt.bad, got)
			}
		})
	}
}

func TestCheckStore(t *testing.T) {
	w := func(seq int64, worker int, token int64) storeWrite {
		return storeWrite{Seq: seq, Worker: worker, Token: token, Accepted: true}
	}
	if got := checkStore([]storeWrite{w(1, 0, 5), w(2, 0, 5), w(3, 1, 7), w(4, 1, 7)}); len(got) != 0 {
		t.Fatalf("grants in turn: %q", got)
	}
	got := checkStore([]storeWrite{w(1, 0, 5), w(2, 1, 7), w(3, 0, 5)})
	if len(got) != 2 || !strings.Contains(got[0].Text, "accepted after") || !strings.Contains(got[1].Text, "interleave") {
		t.Fatalf("a stale holder writing between another's writes: %q", got)
	}
	s := &fencedStore{check: true}
	if !s.write(0, 5) || !s.write(1, 7) || s.write(0, 5) || !s.write(1, 7) {
		t.Fatalf("the checking store: %+v", s.writes())
	}
}

func TestCheckProclaims(t *testing.T) {
	ivs := []Interval{
		{Workload: WLeader, Worker: 0, Start: at(0), End: at(100), Token: 1},
		{Workload: WLeader, Worker: 1, Start: at(100), End: at(200), Token: 2},
	}
	ok := Op{Workload: WLeader, Worker: 0, Kind: "proclaim", Token: 1, Call: at(50), Return: at(60), Status: OK}
	late := ok
	late.Call, late.Return = at(150), at(160)
	if got := checkProclaims([]Op{ok}, ivs, WLeader); len(got) != 0 {
		t.Fatalf("a Proclaim in its term: %q", got)
	}
	if got := checkProclaims([]Op{late}, ivs, WLeader); len(got) != 1 {
		t.Fatalf("a Proclaim after the next term began: %q", got)
	}
}

func TestScheduleReplays(t *testing.T) {
	a := Schedule(7, 5, 10*time.Minute, 4*time.Second)
	b := Schedule(7, 5, 10*time.Minute, 4*time.Second)
	if !slices.Equal(a, b) {
		t.Fatal("one seed, two schedules")
	}
	if slices.Equal(a, Schedule(8, 5, 10*time.Minute, 4*time.Second)) {
		t.Fatal("two seeds, one schedule")
	}
	kinds := map[string]int{}
	for _, s := range a {
		kinds[s.Kind]++
		if s.Kind == PauseHolders && s.Hold <= 5*time.Second {
			t.Fatalf("a pause of %v: not past the session timeout", s.Hold)
		}
	}
	for _, k := range []string{IsolateLeader, PauseHolders, Expire, ClientPartition, SplitMinority} {
		if kinds[k] == 0 {
			t.Errorf("10 minutes of schedule without %s: %v", k, kinds)
		}
	}
}

func TestParseCounter(t *testing.T) {
	for _, in := range []string{"", "12", "x y", "12 ", strings.Repeat("9", 200) + " t"} {
		if _, err := parseCounter([]byte(in)); err == nil {
			t.Errorf("parseCounter(%q) accepted", in)
		}
	}
	if v, err := parseCounter([]byte("12 w3.4")); err != nil || v != (counterValue{12, "w3.4"}) {
		t.Fatalf("parseCounter = %v, %v", v, err)
	}
}

// A short run's schedule may end before its first pause of holders (seed
// 799731 in 45 s: a partition, a killed leader, an expiry, an isolated
// leader), and then its controls have nothing to be caught at; Exposes
// tells such schedules from those whose pause ends within the run.
func TestExposes(t *testing.T) {
	const length, session = 45 * time.Second, DefaultSession
	if Exposes(799731, 3, length, session) {
		t.Error("seed 799731 exposes the controls in 45s; its schedule has no pause that early")
	}
	exposed := 0
	for seed := range uint64(200) {
		steps := Schedule(seed, 3, length, session)
		at, pauseEnds := time.Duration(0), time.Duration(-1)
		for _, s := range steps {
			at += s.Gap
			if s.Kind == PauseHolders {
				pauseEnds = at + s.Hold
				break
			}
			at += s.Hold + 8*time.Second
		}
		if Exposes(seed, 3, length, session) {
			exposed++
			if pauseEnds < 0 || pauseEnds > length {
				t.Errorf("seed %d exposes, but its first pause ends at %v", seed, pauseEnds)
			}
		}
	}
	// About half the seeds: a draw among them ends quickly.
	if exposed < 40 || exposed > 160 {
		t.Errorf("%d of 200 seeds expose the controls in 45s", exposed)
	}
	if !Exposes(7, 3, 10*time.Minute, session) {
		t.Error("10 minutes of schedule without a pause of holders")
	}
}

// A run fails on a guarded workload's violation; a control it did not
// catch is listed, for the set of runs to judge.
func TestResultVerdicts(t *testing.T) {
	bad := []Finding{{Text: "x"}}
	for _, tc := range []struct {
		name     string
		loads    []LoadResult
		violated bool
		uncaught []string
	}{
		{"clean, controls caught", []LoadResult{{Name: "g"}, {Name: "c", Control: true, Violations: bad}}, false, nil},
		{"a guarded violation", []LoadResult{{Name: "g", Violations: bad}, {Name: "c", Control: true, Violations: bad}}, true, nil},
		{"a control not caught", []LoadResult{{Name: "g"}, {Name: "c", Control: true}}, false, []string{"c"}},
		{"a counter control found illegal", []LoadResult{{Name: "c", Control: true, Linearizable: porcupine.Illegal}}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Loads: tc.loads}
			if got := res.Violated(); got != tc.violated {
				t.Errorf("Violated = %v, want %v", got, tc.violated)
			}
			if got := res.Uncaught(); !slices.Equal(got, tc.uncaught) {
				t.Errorf("Uncaught = %v, want %v", got, tc.uncaught)
			}
			if got, want := res.Failed(), tc.violated || len(tc.uncaught) > 0; got != want {
				t.Errorf("Failed = %v, want %v", got, want)
			}
		})
	}
}
