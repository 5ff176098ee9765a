package driver

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// queueGen generates random queues of contenders, as a recipe would list
// them: unique sequence numbers (some past 2^31), protected and
// unprotected names, and some junk that sorts last.
type queueGen struct {
	rnd       *rand.Rand
	readWrite bool // read- and write- names instead of lock- names
	next      int64
}

func (g *queueGen) lockNames() []string {
	if g.readWrite {
		return []string{"read-", "write-"}
	}
	return []string{"lock-"}
}

func (g *queueGen) name() string {
	g.next += 1 + g.rnd.Int64N(3)
	lock := "lock-"
	if g.readWrite {
		lock = "read-"
		if g.rnd.IntN(3) == 0 {
			lock = "write-"
		}
	}
	prefix := ""
	if g.rnd.IntN(2) == 0 {
		prefix = fmt.Sprintf("_c_%08x-0000-4000-8000-%012x-", g.rnd.Uint32(), g.rnd.Uint64()&(1<<48-1))
	}
	return fmt.Sprintf("%s%s%010d", prefix, lock, g.next)
}

func (g *queueGen) junk() string {
	return fmt.Sprintf("junk-%d%s", g.rnd.IntN(1000), []string{"", "x", "-"}[g.rnd.IntN(3)])
}

// queue returns a sorted queue and the indexes of its contenders.
func (g *queueGen) queue() (sorted []string, contenders []int) {
	g.next = []int64{0, 1<<31 - 8, 9999999990 - 40, g.rnd.Int64N(1 << 40)}[g.rnd.IntN(4)]
	var names []string
	for range 1 + g.rnd.IntN(10) {
		names = append(names, g.name())
	}
	for range g.rnd.IntN(3) {
		names = append(names, g.junk())
	}
	sorted = Sort(names, g.lockNames()...)
	for i, name := range sorted {
		if _, ok := Sequence(name, g.lockNames()...); ok {
			contenders = append(contenders, i)
		}
	}
	return sorted, contenders
}

func without(sorted []string, gone map[string]bool) []string {
	return slices.DeleteFunc(slices.Clone(sorted), func(s string) bool { return gone[s] })
}

// TestDriverContract checks the Driver contract on random queues: the
// structure of a Decision, monotonicity under deletions, indifference to
// later nodes, completeness of the watch set, and the safety and herd
// bounds of each driver.
func TestDriverContract(t *testing.T) {
	type driverCase struct {
		name      string
		d         Driver
		readWrite bool
		leases    int // holders allowed; 0: read/write rules; -1: none checked
	}
	// A read/write lock: write nodes decide with Write, read nodes with Read.
	readWrite := DriverFunc(func(sorted []string, self string) (Decision, error) {
		if strings.Contains(self, "write-") {
			return Write().Decide(sorted, self)
		}
		return Read("write-").Decide(sorted, self)
	})
	cases := []driverCase{
		{"Mutex", Mutex(), false, 1},
		{"Write", Write(), false, 1},
		{"Read/write lock", readWrite, true, 0},
		{"Read alone", Read("write-"), true, -1},
		{"Write in a read/write queue", Write(), true, 1},
	}
	for k := 1; k <= 4; k++ {
		cases = append(cases, driverCase{fmt.Sprintf("Leases(%d)", k), mustLeases(t, k), false, k})
	}
	for _, dc := range cases {
		t.Run(dc.name, func(t *testing.T) {
			g := &queueGen{rnd: rand.New(rand.NewPCG(42, uint64(len(dc.name)))), readWrite: dc.readWrite}
			for iter := range 500 {
				sorted, contenders := g.queue()
				checkQueue(t, iter, dc.d, dc.leases, sorted, contenders, g)
				if t.Failed() {
					return
				}
			}
		})
	}
}

func checkQueue(t *testing.T, iter int, d Driver, leases int, sorted []string, contenders []int, g *queueGen) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("queue #%d %q: %s", iter, sorted, fmt.Sprintf(format, args...))
	}
	holders, writeHolders := 0, 0
	watchers := map[string]int{}
	for _, i := range contenders {
		self := sorted[i]
		dec, err := d.Decide(sorted, self)
		if err != nil {
			fail("Decide(%q): %v", self, err)
			return
		}

		// Structure.
		if dec.Position != i {
			fail("self %q: Position %d, want %d", self, dec.Position, i)
		}
		if dec.Held && dec.Watch != nil {
			fail("self %q: held with a watch list %q", self, dec.Watch)
		}
		if !dec.Held && len(dec.Watch) == 0 {
			fail("self %q: waiting with nothing to watch", self)
		}
		last := -1
		for _, name := range dec.Watch {
			j := slices.Index(sorted, name)
			if j < 0 || j >= i || j <= last {
				fail("self %q: watch %q is not a queue-ordered list of predecessors", self, dec.Watch)
				break
			}
			last = j
			watchers[name]++
		}

		if dec.Held {
			holders++
			if strings.Contains(self, "write-") {
				writeHolders++
			}
		}

		// Nodes ordered after self never matter: appending nodes with
		// larger sequence numbers (and junk) leaves the Decision as is.
		longer := slices.Clone(sorted)
		saved := g.next
		g.next = max(g.next, 0)
		for range 1 + g.rnd.IntN(4) {
			longer = append(longer, g.name())
		}
		longer = append(longer, g.junk())
		g.next = saved
		longer = Sort(longer, g.lockNames()...)
		if again, err := d.Decide(longer, self); err != nil || !reflect.DeepEqual(again, dec) {
			fail("self %q: after appending, %+v, %v; before %+v", self, again, err, dec)
		}

		// Deletions of other nodes.
		for range 8 {
			gone := map[string]bool{}
			p := g.rnd.Float64()
			for _, name := range sorted {
				if name != self && g.rnd.Float64() < p {
					gone[name] = true
				}
			}
			after, err := d.Decide(without(sorted, gone), self)
			if err != nil {
				fail("self %q: after deleting %v: %v", self, gone, err)
				continue
			}
			// Monotonicity: a held lock stays held.
			if dec.Held && !after.Held {
				fail("self %q: held, but not after deleting %v", self, gone)
			}
			// Completeness: unless a watched node goes, self keeps waiting.
			if !dec.Held {
				for _, name := range dec.Watch {
					delete(gone, name)
				}
				if after, _ := d.Decide(without(sorted, gone), self); after.Held {
					fail("self %q watching %q: held after deleting only unwatched %v", self, dec.Watch, gone)
				}
			}
		}
	}

	// Safety and herd bounds.
	if leases > 0 {
		if want := min(leases, len(contenders)); holders != want {
			fail("%d holders, want %d", holders, want)
		}
		for name, k := range watchers {
			if k > leases {
				fail("%q is watched by %d waiters, more than %d", name, k, leases)
			}
		}
	} else if leases == 0 {
		if len(contenders) > 0 && holders == 0 {
			fail("nobody holds the lock")
		}
		if writeHolders > 0 && holders != 1 {
			fail("a write holds the lock together with %d other nodes", holders-1)
		}
	}
}
