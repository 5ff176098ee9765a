package rwlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zkrecipes/zkrecipes/driver"
)

func TestReadBeside(t *testing.T) {
	const (
		w1 = "write-0000000001"
		r2 = "read-0000000002"
		w3 = "write-0000000003"
		r4 = "read-0000000004"
	)
	for _, tc := range []struct {
		name      string
		own       string
		sorted    []string
		self      string
		held      bool
		watch     []string
		position  int
		notInList bool
	}{
		{name: "own write ahead is ignored", own: w1, sorted: []string{w1, r2}, self: r2, held: true, position: 1},
		{name: "readers between do not block", own: w1, sorted: []string{w1, r2, r4}, self: r4, held: true, position: 2},
		{name: "another writer behind own blocks", own: w1, sorted: []string{w1, r2, w3, r4}, self: r4, watch: []string{w3}, position: 3},
		{name: "own write absent", own: "write-0000000009", sorted: []string{w1, r2}, self: r2, watch: []string{w1}, position: 1},
		{name: "later nodes ignored", own: w1, sorted: []string{w1, r2, w3}, self: r2, held: true, position: 1},
		{name: "self missing", own: w1, sorted: []string{w1, w3}, self: r2, notInList: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.sorted)
			d, err := readBeside(driver.Read(WriteLockName), tc.own).Decide(in, tc.self)
			if !slices.Equal(in, tc.sorted) {
				t.Fatalf("Decide modified its input: %v", in)
			}
			if tc.notInList {
				if !errors.Is(err, driver.ErrNotInQueue) {
					t.Fatalf("err = %v, want ErrNotInQueue", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Held != tc.held || !slices.Equal(d.Watch, tc.watch) || d.Position != tc.position {
				t.Fatalf("got %+v, want held=%v watch=%v position=%d", d, tc.held, tc.watch, tc.position)
			}
		})
	}
}

// The engine decides again from its known queue minus deleted nodes; check
// the rules it relies on for readBeside on random queues: the verdict
// depends only on nodes ahead of self, deletions never take a hold away,
// and only the deletion of a watched node can turn "wait" into "held".
func TestReadBesideContract(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rnd.IntN(9)
		var sorted []string
		for i := range n {
			name := "read-"
			if rnd.IntN(3) == 0 {
				name = "write-"
			}
			sorted = append(sorted, fmt.Sprintf("_c_x-%s%010d", name, i+1))
		}
		own := sorted[rnd.IntN(n)]
		d := readBeside(driver.Read(WriteLockName), own)
		self := sorted[rnd.IntN(n)]
		i := slices.Index(sorted, self)
		base, err := d.Decide(sorted, self)
		if err != nil {
			t.Fatal(err)
		}
		if base.Position != i {
			t.Fatalf("position %d, want %d", base.Position, i)
		}
		if !base.Held && len(base.Watch) == 0 {
			t.Fatalf("%v self %s: not held and nothing to watch", sorted, self)
		}
		if slices.Contains(base.Watch, self) {
			t.Fatalf("watches itself")
		}
		for _, w := range base.Watch {
			if slices.Index(sorted, w) >= i {
				t.Fatalf("watches %s, not ahead of %s", w, self)
			}
		}
		// Later nodes do not matter.
		if later, _ := d.Decide(sorted[:i+1], self); later.Held != base.Held || !slices.Equal(later.Watch, base.Watch) {
			t.Fatalf("%v: verdict changed without the nodes after %s", sorted, self)
		}
		// Delete a random subset of the other nodes.
		var kept []string
		deletedWatched := false
		for _, s := range sorted {
			if s != self && rnd.IntN(2) == 0 {
				if slices.Contains(base.Watch, s) {
					deletedWatched = true
				}
				continue
			}
			kept = append(kept, s)
		}
		after, err := d.Decide(kept, self)
		if err != nil {
			t.Fatal(err)
		}
		if base.Held && !after.Held {
			t.Fatalf("%v -> %v: a deletion took the hold away from %s", sorted, kept, self)
		}
		if !base.Held && after.Held && !deletedWatched {
			t.Fatalf("%v -> %v: %s became held without a watched deletion", sorted, kept, self)
		}
	}
}
