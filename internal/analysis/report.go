package analysis

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// FaultRow sums, over runs, what happened during one kind of fault: the
// operations called from its start until the next fault, and the worst
// time to progress after it.
type FaultRow struct {
	Kind                   string
	Count                  int
	Done, Refused, Unknown int
	Violations             int
	WorstProgress          time.Duration
	WorstLoad              string
	WorstWhole             time.Duration // heal to whole
	Bound                  time.Duration // B + the worst heal-to-whole
	Missed                 int           // faults after which a guarded workload did not progress
}

// Rows tallies results by kind of fault (guarded workloads only).
func Rows(results []*Result) []FaultRow {
	by := map[string]*FaultRow{}
	for _, res := range results {
		ops, _, faults := res.history.snapshot()
		for i, f := range faults {
			r := by[f.Kind]
			if r == nil {
				r = &FaultRow{Kind: f.Kind}
				by[f.Kind] = r
			}
			r.Count++
			until := time.Now()
			if i+1 < len(faults) {
				until = faults[i+1].Start
			}
			control := map[string]bool{}
			for _, l := range res.Loads {
				control[l.Name] = l.Control
				if l.Control {
					continue
				}
				for _, v := range l.Violations {
					if !v.At.Before(f.Start) && v.At.Before(until) {
						r.Violations++
					}
				}
				if l.Linearizable == porcupine.Illegal && i == 0 {
					r.Violations++ // not tied to an instant: counted once, under the run's first fault
				}
			}
			for _, o := range ops {
				if control[o.Workload] || o.Kind == "read" || o.Call.Before(f.Start) || !o.Call.Before(until) {
					continue
				}
				switch o.Status {
				case OK:
					r.Done++
				case Refused:
					r.Refused++
				case Unknown:
					r.Unknown++
				}
			}
			whole := f.Whole.Sub(f.Healed)
			r.WorstWhole = max(r.WorstWhole, whole)
			r.Bound = max(r.Bound, res.Bound+whole)
			for _, l := range res.Loads {
				if l.Control {
					continue
				}
				p := l.Progress[i]
				if p < 0 {
					r.Missed++
					continue
				}
				if p > r.WorstProgress {
					r.WorstProgress, r.WorstLoad = p, l.Name
				}
			}
		}
	}
	out := make([]FaultRow, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// Summary writes a result's verdicts.
func (res *Result) Summary(w io.Writer) {
	fmt.Fprintf(w, "seed %d, %d members, %v, %d faults, B = %v\n", res.Seed, res.Members, res.Elapsed.Round(time.Second), len(res.Faults), res.Bound)
	for _, l := range res.Loads {
		verdict := "ok"
		switch {
		case l.Control && l.Failed():
			verdict = "caught (control)"
		case l.Control:
			verdict = "not caught in this run (control)"
		case l.Failed():
			verdict = "VIOLATION"
		}
		lin := ""
		if l.hist != nil {
			lin = fmt.Sprintf(", porcupine %s", l.Linearizable)
		}
		worst := time.Duration(-1)
		missed := 0
		for _, p := range l.Progress {
			if p < 0 {
				missed++
			}
			worst = max(worst, p)
		}
		fmt.Fprintf(w, "  %-20s done %5d refused %4d unknown %3d%s, worst progress %v (none after %d faults): %s\n",
			l.Name, l.Done, l.Refused, l.Unknown, lin, worst.Round(time.Millisecond), missed, verdict)
		for i, v := range l.Violations {
			if i == 3 {
				fmt.Fprintf(w, "    ... %d more\n", len(l.Violations)-3)
				break
			}
			fmt.Fprintf(w, "    %s\n", v.Text)
		}
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "  note: %s\n", p)
	}
}

// Table writes rows as the Markdown table of docs/analysis.md.
func Table(w io.Writer, rows []FaultRow) {
	fmt.Fprintln(w, "| fault | times | ops done | refused | unknown | violations | worst heal→whole | worst time to progress (workload) | bound B + heal→whole | no progress |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %v | %v (%s) | %v | %d |\n", r.Kind, r.Count, r.Done, r.Refused, r.Unknown,
			r.Violations, r.WorstWhole.Round(10*time.Millisecond), r.WorstProgress.Round(10*time.Millisecond), r.WorstLoad, r.Bound.Round(10*time.Millisecond), r.Missed)
	}
}
