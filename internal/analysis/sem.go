package analysis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// semLeases is the semaphore's number of leases.
const semLeases = 2

type semLoad struct {
	name string
	base string
}

// work takes a lease, holds it a while (or until told it is lost) and
// releases it.
func (l *semLoad) work(ctx context.Context, w *worker, r *rand.Rand) {
	s, err := semaphore.New(w.client, path.Join(l.base, "sem"), semLeases)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		call := time.Now()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		lease, err := s.Acquire(actx)
		cancel()
		if err != nil {
			locktest.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		granted := time.Now()
		w.ok(granted)
		w.hist.op(Op{Workload: l.name, Worker: w.id, Kind: "grant", Token: lease.Token(), Call: call, Return: granted, Status: OK})
		release := w.watchHold(granted, lease.Token(), lease.Done())
		hold := time.Duration(50+r.IntN(300)) * time.Millisecond
		select {
		case <-time.After(hold):
		case <-lease.Done():
		case <-ctx.Done():
		}
		w.gate.wait(ctx)
		release()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = lease.Release(rctx)
		cancel()
		locktest.Sleep(ctx, time.Duration(r.IntN(50))*time.Millisecond)
	}
}

type leaderLoad struct {
	name string
	base string
}

// work runs for leadership; each term proclaims every 50 ms and resigns
// after a while.
func (l *leaderLoad) work(ctx context.Context, w *worker, r *rand.Rand) {
	e, err := leader.New(w.client, path.Join(l.base, "election"))
	if err != nil {
		return
	}
	_ = e.Run(ctx, func(tctx context.Context) error {
		start := time.Now()
		token := e.Token()
		release := w.watchHold(start, token, tctx.Done())
		defer release()
		term := time.Duration(300+r.IntN(1500)) * time.Millisecond
		for i := 0; time.Since(start) < term; i++ {
			w.gate.wait(tctx)
			if tctx.Err() != nil {
				return nil
			}
			op := Op{Workload: l.name, Worker: w.id, Kind: "proclaim", Token: token, Call: time.Now()}
			err := e.Proclaim(context.Background(), []byte(fmt.Sprintf("w%d term %#x #%d", w.id, token, i)))
			op.Return = time.Now()
			switch {
			case err == nil:
				op.Status = OK
				w.ok(op.Return)
			default:
				op.Status, op.Err = Refused, err.Error()
				if errors.Is(err, recipe.ErrCommitUnknown) {
					op.Status = Unknown
				}
			}
			w.hist.op(op)
			if !locktest.Sleep(tctx, 50*time.Millisecond) {
				return nil
			}
		}
		return nil
	})
}

// checkProclaims checks that no successful Proclaim of a term was called
// after a later term (another token) had begun: it would have landed
// outside its own term.
func checkProclaims(ops []Op, ivs []Interval, name string) []Finding {
	var starts []Interval
	for _, iv := range ivs {
		if iv.Workload == name {
			starts = append(starts, iv)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Start.Before(starts[j].Start) })
	var out []Finding
	for _, o := range ops {
		if o.Workload != name || o.Kind != "proclaim" || o.Status != OK {
			continue
		}
		for _, iv := range starts {
			if iv.Token > o.Token && iv.Start.Before(o.Call) {
				out = append(out, Finding{o.Call, fmt.Sprintf("worker %d's Proclaim of term %#x called %v after term %#x began",
					o.Worker, o.Token, o.Call.Sub(iv.Start).Round(time.Microsecond), iv.Token)})
				break
			}
		}
	}
	return out
}

// window is when the server expired a worker's session: at some instant
// between from and to.
type window struct{ from, to time.Time }

// checkIntervals checks one workload's holds against its limit: at no
// instant more than limit holders, by the holders' own intervals. A hold
// of a session the nemesis expired ends, for the check, at the earliest
// instant the server may have expired it (its start, if it was granted
// while the expiry was under way): the server ends such a session itself,
// and its holder hears it as the next holder may be granted
// (docs/failure-model.md), the gap that tokens and Commit fence.
func checkIntervals(ivs []Interval, name string, limit int, expiries map[int][]window) []Finding {
	keys := map[int][]Interval{}
	for _, iv := range ivs {
		if iv.Workload == name {
			keys[iv.Key] = append(keys[iv.Key], iv)
		}
	}
	var out []Finding
	for k := 0; k < len(keys); k++ {
		out = append(out, checkKey(keys[k], name, limit, expiries)...)
	}
	return out
}

// checkKey is checkIntervals for the holds of one lock.
func checkKey(ivs []Interval, name string, limit int, expiries map[int][]window) []Finding {
	type event struct {
		at    time.Time
		start bool
		i     int
	}
	var mine []Interval
	for _, iv := range ivs {
		for _, x := range expiries[iv.Worker] {
			if iv.Start.Before(x.to) && iv.End.After(x.from) {
				iv.End = later(iv.Start, x.from)
			}
		}
		if !iv.End.After(iv.Start) {
			continue // no time held, for the check
		}
		mine = append(mine, iv)
	}
	evs := make([]event, 0, 2*len(mine))
	for i, iv := range mine {
		evs = append(evs, event{iv.Start, true, i}, event{iv.End, false, i})
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if !evs[a].at.Equal(evs[b].at) {
			return evs[a].at.Before(evs[b].at)
		}
		return !evs[a].start && evs[b].start
	})
	active := map[int]bool{}
	var out []Finding
	for _, e := range evs {
		if !e.start {
			delete(active, e.i)
			continue
		}
		active[e.i] = true
		if len(active) > limit {
			var who []string
			for j := range active {
				iv := mine[j]
				who = append(who, fmt.Sprintf("worker %d token %#x [%s, %s]", iv.Worker, iv.Token,
					iv.Start.Format("15:04:05.000"), iv.End.Format("15:04:05.000")))
			}
			sort.Strings(who)
			out = append(out, Finding{e.at, fmt.Sprintf("%d holders of %s at %s (limit %d): %s", len(active), name,
				e.at.Format("15:04:05.000"), limit, strings.Join(who, "; "))})
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
