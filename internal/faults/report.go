package faults

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Table renders results as the fault x recipe table:
//
//	cycles    successful acquires (holds: nodes held; AcquireN of 2 = 2)
//	t/o       acquires that ended by their context's deadline
//	lost      holds ended by Done, by reason (s suspended, e expired,
//	          d deleted, c closed)
//	susp      suspensions of holds / of which the hold was kept (clients
//	          that tolerate suspensions; "-": none)
//	viol      violations of the recipe's rule or of token order
//	leaked    nodes left behind
//	over      the largest time an acquire / release that ended by its
//	          context returned after the context ended ("-": none did)
//	problems  undocumented errors and calls past their bound
//	expired   clients that moved to a new session (the old one expired)
//	recov     creates whose lost reply was recovered by UUID
//	inj       faults injected (shared by the recipes of a row)
//	recov     time from the end of the fault to each worker's first grant
//	          after it, p50/max ("-": not checked; "none": a worker was
//	          not granted again)
//	beyond    the longest wait of an acquire after the end of the fault
//	          beyond the holds queued ahead of it (checked against B)
//	guarded   writes the register received through Commit / Commits
//	          refused (hold lost, suspended or gone) / outcomes unknown
//	          (connection lost, or abandoned at the hold's end) / probes
//	          after a loss (all refused)
func Table(rs []Result) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fault\trecipe\tcycles\tholds\tt/o\tlost\tsusp\tviol\tleaked\tover acq\tover rel\tproblems\texpired\trecov\tinj\tguarded\tre-take p50/max\tbeyond\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n",
			r.Fault, r.Recipe, r.Cycles, r.Holds, r.Timeouts, lostCell(r), suspCell(r), len(r.Violations), len(r.Leaked),
			over(r.MaxAcquireOver), over(r.MaxReleaseOver), len(r.Problems), r.NewSessions, r.Recovered, r.Injections, guardedCell(r.Guarded),
			RecoveryCell(r.Recovery), beyondCell(r))
	}
	w.Flush()
	return b.String()
}

// RecoveryCell renders re-take times as p50/max, in milliseconds.
func RecoveryCell(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if s[0] < 0 {
		return "none"
	}
	return fmt.Sprintf("%d/%dms", s[len(s)/2].Milliseconds(), s[len(s)-1].Milliseconds())
}

func beyondCell(r Result) string {
	if r.Bound == 0 {
		return "-"
	}
	return fmt.Sprintf("%dms", r.Beyond.Milliseconds())
}

func guardedCell(g GuardCounts) string {
	return fmt.Sprintf("%d/%d/%d/%d", g.Writes, g.Refused, g.Unknown, g.Probes)
}

func lostCell(r Result) string {
	if r.Lost == 0 {
		return "0"
	}
	var parts []string
	for _, k := range []string{"suspended", "expired", "deleted", "closed", "undocumented"} {
		if n := r.LostBy[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s%d", k[:1], n))
		}
	}
	return fmt.Sprintf("%d (%s)", r.Lost, strings.Join(parts, " "))
}

func suspCell(r Result) string {
	if r.Suspended == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", r.Suspended, r.Kept)
}

func over(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// Details lists every failure (and, with notes, the notes) of the results,
// at most limit lines per result and kind.
func Details(rs []Result, notes bool, limit int) string {
	var b strings.Builder
	list := func(r Result, kind string, items []string) {
		for i, s := range items {
			if i == limit {
				fmt.Fprintf(&b, "  %s/%s %s: ... and %d more\n", r.Fault, r.Recipe, kind, len(items)-limit)
				break
			}
			fmt.Fprintf(&b, "  %s/%s %s: %s\n", r.Fault, r.Recipe, kind, s)
		}
	}
	for _, r := range rs {
		list(r, "VIOLATION", r.Violations)
		list(r, "LEAK", r.Leaked)
		list(r, "PROBLEM", r.Problems)
		if notes {
			list(r, "note", r.Notes)
		}
	}
	return b.String()
}
