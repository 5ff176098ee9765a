package faults

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Result is what one fault did to one recipe: the counts of the results
// table and every failure found.
type Result struct {
	Fault, Recipe string
	Episodes      int
	// Cycles counts successful acquires; Holds counts held nodes (an
	// AcquireN of two leases is one cycle and two holds).
	Cycles, Holds int
	// Acquire failures by documented cause.
	Timeouts, Cancelled, GaveUp int
	// Suspended counts the suspensions holds went through (clients that
	// tolerate them), Kept those after which the hold was kept.
	Suspended, Kept int
	// Lost counts holds ended by their Done channel, LostBy by reason.
	Lost   int
	LostBy map[string]int
	// LostAtRelease counts releases that returned a loss error although
	// Done had not closed when Release was called.
	LostAtRelease int
	// Violations of the recipe's rule (and of token order).
	Violations []string
	// Problems: undocumented errors, calls past their bound.
	Problems []string
	// Notes: observations that are not failures.
	Notes []string
	// Largest time a call that ended by its context returned after the
	// context ended (negative: none went past).
	MaxAcquireOver, MaxReleaseOver time.Duration
	// Leaked nodes: left while the clients were open (after the faults
	// healed), or after they closed.
	Leaked []string
	// Client counters over the episode.
	Recovered, Retries, EpochsEnded int64
	// NewSessions counts clients that moved to a new session because
	// their old one expired.
	NewSessions int
	// Guarded counts the guarded writes to the cell's register.
	Guarded GuardCounts
	// Injections counts the faults injected (for the whole row: all the
	// recipes of a target share them).
	Injections int
	// Recovery is, for each worker and episode, the time from the end of
	// the fault to its first grant after it (-1: none); Beyond the longest
	// wait of an acquire after the end of a fault beyond the holds queued
	// ahead of it; Bound the B they were checked against.
	Recovery []time.Duration
	Beyond   time.Duration
	Bound    time.Duration
	// Losses lists the holds ended by Done.
	Losses []Loss
}

// Loss is one hold ended by Done: whose, when, and why.
type Loss struct {
	Worker int
	At     time.Time
	Reason string
	Held   time.Duration
}

// Failed reports whether the result breaks a property.
func (r *Result) Failed() bool {
	return len(r.Violations) > 0 || len(r.Problems) > 0 || len(r.Leaked) > 0
}

// Merge adds o to r (same fault and recipe, or totals).
func (r *Result) Merge(o Result) {
	if r.LostBy == nil {
		r.LostBy = make(map[string]int)
	}
	first := r.Episodes == 0
	r.Episodes += o.Episodes
	r.Cycles += o.Cycles
	r.Holds += o.Holds
	r.Timeouts += o.Timeouts
	r.Cancelled += o.Cancelled
	r.GaveUp += o.GaveUp
	r.Lost += o.Lost
	r.Suspended += o.Suspended
	r.Kept += o.Kept
	for k, v := range o.LostBy {
		r.LostBy[k] += v
	}
	r.LostAtRelease += o.LostAtRelease
	r.Violations = append(r.Violations, o.Violations...)
	r.Problems = append(r.Problems, o.Problems...)
	r.Notes = append(r.Notes, o.Notes...)
	if first {
		r.MaxAcquireOver, r.MaxReleaseOver = o.MaxAcquireOver, o.MaxReleaseOver
	} else {
		r.MaxAcquireOver = max(r.MaxAcquireOver, o.MaxAcquireOver)
		r.MaxReleaseOver = max(r.MaxReleaseOver, o.MaxReleaseOver)
	}
	r.Leaked = append(r.Leaked, o.Leaked...)
	r.Recovered += o.Recovered
	r.Retries += o.Retries
	r.EpochsEnded += o.EpochsEnded
	r.NewSessions += o.NewSessions
	r.Injections += o.Injections
	r.Guarded.add(o.Guarded)
	r.Recovery = append(r.Recovery, o.Recovery...)
	r.Beyond = max(r.Beyond, o.Beyond)
	r.Bound = max(r.Bound, o.Bound)
	r.Losses = append(r.Losses, o.Losses...)
}

// finish turns the cell's episode log into a Result (without the leak
// check, which needs a quiet cluster).
func (c *Cell) finish(fault string) Result {
	ep := c.log()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	r := Result{Fault: fault, Recipe: c.Adapter.Name, Episodes: 1, LostBy: make(map[string]int),
		MaxAcquireOver: -time.Hour, MaxReleaseOver: -time.Hour}
	for _, cl := range ep.calls {
		if cl.acquire && cl.class == classOK {
			r.Cycles++
		}
		switch cl.class {
		case classTimeout:
			if cl.acquire {
				r.Timeouts++
			}
		case classCancelled:
			if cl.acquire {
				r.Cancelled++
			}
		case classGaveUp:
			r.GaveUp++
		}
		base := cl.deadline
		if cl.acquire && !ep.stopAt.IsZero() && ep.stopAt.Before(base) {
			base = ep.stopAt
		}
		over := cl.end.Sub(base)
		bound, what := ReleaseBound, "release"
		if cl.acquire {
			bound, what = AcquireBound, "acquire"
		}
		if over > bound {
			r.Problems = append(r.Problems, fmt.Sprintf("%s returned %v after its context ended (bound %v; took %v): %v",
				what, over.Round(time.Millisecond), bound, cl.end.Sub(cl.start).Round(time.Millisecond), cl.err))
		}
		if cl.class == classTimeout || cl.class == classCancelled {
			if cl.acquire {
				r.MaxAcquireOver = max(r.MaxAcquireOver, over)
			} else {
				r.MaxReleaseOver = max(r.MaxReleaseOver, over)
			}
		}
	}
	for _, iv := range ep.intervals {
		switch {
		case iv.Resumed:
			r.Kept++
		default:
			r.Holds++
		}
		if iv.Suspended {
			r.Suspended++
		}
		if iv.Lost {
			r.Lost++
			r.LostBy[iv.Reason]++
			r.Losses = append(r.Losses, Loss{Worker: iv.Worker, At: iv.End, Reason: iv.Reason, Held: iv.End.Sub(iv.Start)})
		}
	}
	r.LostAtRelease = ep.lostAtRel
	r.NewSessions = ep.newSess
	r.Violations = append(CheckIntervals(clipExpired(ep.intervals, ep.expiredAt), c.Adapter.MaxLeases), ep.violations...)
	r.Problems = append(r.Problems, ep.problems...)
	r.Notes = append(r.Notes, ep.notes...)
	d := c.Stats().Sub(ep.stats)
	r.Recovered, r.Retries, r.EpochsEnded = d.Recovered, d.Retries, d.EpochsEnded
	return r
}

// CheckIntervals checks the holds of one lock path against the rule: at
// no instant two Exclusive holds, an Exclusive and any other hold, or more
// than maxLeases Lease holds; and Exclusive holds get strictly increasing
// fencing tokens in the order they were granted (a hold kept through a
// suspension is several intervals of one node: its later ones are not new
// grants). An interval ending at the instant another starts does not
// overlap it.
func CheckIntervals(ivs []Interval, maxLeases int) []string {
	type event struct {
		at    time.Time
		start bool
		i     int
	}
	evs := make([]event, 0, 2*len(ivs))
	for i, iv := range ivs {
		evs = append(evs, event{iv.Start, true, i}, event{iv.End, false, i})
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if !evs[a].at.Equal(evs[b].at) {
			return evs[a].at.Before(evs[b].at)
		}
		return !evs[a].start && evs[b].start // ends first
	})
	var out []string
	t0 := time.Time{}
	if len(evs) > 0 {
		t0 = evs[0].at
	}
	desc := func(iv Interval) string {
		how := "released"
		if iv.Lost {
			how = "lost (" + iv.Reason + ")"
		}
		return fmt.Sprintf("worker %d %s %s [+%v, +%v] %s token %#x",
			iv.Worker, iv.Mode, iv.Node, iv.Start.Sub(t0).Round(time.Microsecond), iv.End.Sub(t0).Round(time.Microsecond), how, iv.Token)
	}
	active := make(map[int]bool)
	for _, e := range evs {
		if !e.start {
			delete(active, e.i)
			continue
		}
		iv := ivs[e.i]
		var clash []int
		leases := 0
		for j := range active {
			o := ivs[j]
			switch {
			case iv.Mode == Exclusive, o.Mode == Exclusive:
				clash = append(clash, j)
			case iv.Mode == Lease && o.Mode == Lease:
				leases++
			}
		}
		if iv.Mode == Lease && leases+1 > maxLeases {
			for j := range active {
				clash = append(clash, j)
			}
		}
		if len(clash) > 0 {
			sort.Ints(clash)
			var others []string
			for _, j := range clash {
				others = append(others, desc(ivs[j]))
			}
			out = append(out, fmt.Sprintf("%s granted while held: %s", desc(iv), strings.Join(others, "; ")))
		}
		active[e.i] = true
	}
	var excl []Interval
	for _, iv := range ivs {
		if iv.Mode == Exclusive {
			excl = append(excl, iv)
		}
	}
	sort.SliceStable(excl, func(a, b int) bool { return excl[a].Start.Before(excl[b].Start) })
	var prev *Interval
	for i := range excl {
		iv := &excl[i]
		if iv.Resumed {
			continue // a later part of a hold kept through a suspension
		}
		if prev != nil && iv.Token <= prev.Token {
			out = append(out, fmt.Sprintf("token order: %s granted after %s", desc(*iv), desc(*prev)))
		}
		prev = iv
	}
	return out
}

// Node is a znode left in a lock directory.
type Node struct {
	Name  string
	Owner int64 // ephemeral owner session, 0 if persistent
}

func (n Node) String() string { return fmt.Sprintf("%s (owner 0x%x)", n.Name, n.Owner) }

// ListNodes lists the children of dir with their owners. A missing
// directory (reaped container) has none.
func ListNodes(conn *zk.Conn, dir string) ([]Node, error) {
	names, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(names))
	for _, n := range names {
		_, st, err := conn.Get(dir + "/" + n)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Node{Name: n, Owner: st.EphemeralOwner})
	}
	return out, nil
}

// WaitEmpty polls dir until it has no children or timeout passes, and
// returns what is left then.
func WaitEmpty(conn *zk.Conn, dir string, timeout time.Duration) ([]Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		left, err := ListNodes(conn, dir)
		if err == nil && len(left) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return left, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
