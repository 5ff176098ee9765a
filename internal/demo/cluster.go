//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"
	"time"
)

// Cluster is the script of the leader election demo: members that are
// children of this process, whose leader it kills and later asks to
// resign, on a timeline.
type Cluster struct {
	Members     int           // how many members to start
	KillAfter   time.Duration // when to kill the leader with SIGKILL (0: never)
	ResignAfter time.Duration // when to ask the leader to resign with SIGUSR1 (0: never)
	Duration    time.Duration // when to stop every member (SIGTERM)
	Session     time.Duration // the members' session timeout, for the story
	Log         *slog.Logger
}

// MemberID returns the id of member n: "member-3".
func MemberID(n int) string { return "member-" + strconv.Itoa(n) }

// Say prints a line of the demo's timeline: the time on the demo's clock
// (see [Elapsed]), who speaks, and what it says.
func Say(who, format string, args ...any) {
	fmt.Printf("%6.2fs  %-9s %s\n", Elapsed().Seconds(), who, fmt.Sprintf(format, args...))
}

// Run starts the members (children "member" 1 to Members, see [Spawn]),
// prints each term that terms reports (terms, as an observer of the
// election sees them, end when the observer stops), kills the leader after
// KillAfter and starts it again once the next leader is seen, asks the
// leader to resign after ResignAfter, and stops every member after
// Duration or when ctx ends. It then prints the terms it saw (see
// [SummarizeTerms]) and returns 0 if every member but the killed one
// exited cleanly and the tokens grew from term to term.
func (cl Cluster) Run(ctx context.Context, terms <-chan Term) int {
	running := map[string]*Child{}
	start := func(n int) {
		if m, err := Spawn(ctx, "member", n); err != nil {
			cl.Log.Error("cannot start member", "err", err)
		} else {
			running[MemberID(n)] = m
			Say("parent", "starts %s (pid %d)", MemberID(n), m.Pid())
		}
	}
	for n := 1; n <= cl.Members; n++ {
		start(n)
	}
	var seen []Term
	var killed *Child
	var killedAt, resignedAt time.Time
	killAt, resignAt, end := after(cl.KillAfter), after(cl.ResignAfter), time.After(cl.Duration)
	leader := func() *Child {
		if len(seen) == 0 {
			return nil
		}
		return running[seen[len(seen)-1].ID]
	}
loop:
	for {
		select {
		case t, open := <-terms:
			if !open {
				break loop
			}
			note := ""
			switch {
			case !killedAt.IsZero():
				note, killedAt = fmt.Sprintf("  (%v after the kill)", t.At.Sub(killedAt).Round(time.Millisecond)), time.Time{}
				start(killed.N) // bring the killed member back: it joins at the back
			case !resignedAt.IsZero():
				note, resignedAt = fmt.Sprintf("  (%v after the resignation)", t.At.Sub(resignedAt).Round(time.Millisecond)), time.Time{}
			}
			Say("parent", "observes: the leader is %s, token=%#x%s", t.ID, t.Token, note)
			seen = append(seen, t)
		case <-killAt:
			if killed = leader(); killed == nil {
				Say("parent", "no leader to kill")
			} else if killed.Signal(syscall.SIGKILL) == nil {
				killedAt = time.Now()
				Say("parent", "kills %s (pid %d) with SIGKILL: it cannot resign; ZooKeeper expires its session within %v",
					MemberID(killed.N), killed.Pid(), cl.Session)
			}
		case <-resignAt:
			if m := leader(); m == nil {
				Say("parent", "no leader to ask to resign")
			} else if m.Signal(syscall.SIGUSR1) == nil {
				resignedAt = time.Now()
				Say("parent", "asks %s to resign (SIGUSR1)", MemberID(m.N))
			}
		case <-end:
			break loop
		case <-ctx.Done():
			break loop
		}
	}

	Say("parent", "stops every member (SIGTERM)")
	for _, m := range running {
		m.Signal(syscall.SIGTERM)
	}
	ok := true
	for id, m := range running {
		if code := m.Stop(10 * time.Second); code != 0 && m != killed {
			cl.Log.Error("member failed", "member", id, "status", code)
			ok = false
		}
	}
	return SummarizeTerms(seen, ok)
}

// after returns a channel that fires after d, or never if d is 0.
func after(d time.Duration) <-chan time.Time {
	if d == 0 {
		return nil
	}
	return time.After(d)
}
