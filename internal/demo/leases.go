package demo

import (
	"encoding/json"
	"fmt"
	"time"
)

// Acquired is what a worker of the semaphore demo tells its parent when it
// gets a lease.
type Acquired struct {
	Start   int64         // wall clock (Unix ns) after the acquire returned
	Token   int64         // the lease's fencing token
	Waited  time.Duration // time spent acquiring
	Busy    int           // leases held, as seen just after acquiring
	Waiting int           // workers waiting then
}

// Released is what a worker of the semaphore demo tells its parent when
// its work under a lease is over.
type Released struct {
	Interval        // after the acquire returned, before the release
	Token    int64  // the lease's fencing token
	Lost     string // why the lease was lost during the work, if it was
}

// Leases follows the workers of the semaphore demo: pass its Handle to
// [Run], then call Summarize. Max is the number of leases.
type Leases struct {
	Max   int
	waits map[*Child]*Waits
	holds map[*Child][]Released
	bad   map[*Child]bool // sent a line that does not parse
}

// Handle prints a line for each "acquired" line of a worker and keeps its
// "released" lines.
func (l *Leases) Handle(c *Child, verb, arg string) {
	if l.waits == nil {
		l.waits, l.holds, l.bad = map[*Child]*Waits{}, map[*Child][]Released{}, map[*Child]bool{}
	}
	var a Acquired
	var r Released
	switch {
	case verb == "acquired" && json.Unmarshal([]byte(arg), &a) == nil:
		if l.waits[c] == nil {
			l.waits[c] = &Waits{}
		}
		l.waits[c].Add(a.Waited)
		fmt.Printf("%s  lease %d/%d busy  %d waiting  token=0x%x  waited %s\n", c.Name(), a.Busy, l.Max, a.Waiting, a.Token, Ms(a.Waited))
	case verb == "released" && json.Unmarshal([]byte(arg), &r) == nil:
		l.holds[c] = append(l.holds[c], r)
	default:
		fmt.Printf("%s: unexpected line %q\n", c.Name(), verb+" "+arg)
		l.bad[c] = true
	}
}

// Summarize prints a line per worker and the most workers busy at once.
// It returns 0 if that never exceeded Max and every worker succeeded and
// reported its rounds.
func (l *Leases) Summarize(workers []*Child, rounds int) int {
	ok := true
	var all []Interval
	fmt.Printf("\nsummary\n")
	for _, c := range workers {
		code := c.Wait()
		w := l.waits[c]
		if w == nil {
			w = &Waits{}
		}
		for _, h := range l.holds[c] {
			all = append(all, h.Interval)
		}
		line := fmt.Sprintf("  %s  %d leases  %s", c.Name(), len(l.holds[c]), w)
		switch {
		case code != 0:
			line += fmt.Sprintf("  FAILED (exit status %d)", code)
			ok = false
		case len(l.holds[c]) != rounds || l.bad[c]:
			line += fmt.Sprintf("  INCOMPLETE (%d of %d pieces of work reported)", len(l.holds[c]), rounds)
			ok = false
		}
		fmt.Println(line)
	}
	busy, at := MaxOverlap(all)
	if busy > 0 {
		fmt.Printf("  most workers busy at once: %d of %d allowed (first at %s)\n", busy, l.Max, at.Format("15:04:05.000"))
	}
	switch {
	case busy > l.Max:
		fmt.Printf("FAIL: %d workers were busy at once, more than the %d leases\n", busy, l.Max)
	case !ok:
		fmt.Println("FAIL: a worker failed (see above)")
	default:
		fmt.Printf("ok: %d pieces of work, never more than %d at once\n", len(all), l.Max)
		return 0
	}
	return 1
}
