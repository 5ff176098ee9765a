package recipe

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortEntries sorts as slices.SortFunc with compareEntries does, at every
// length around its runs and merges, with ties in sequence broken by name.
func TestSortEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 4097} {
		for _, dups := range []bool{false, true} {
			es := make([]queueEntry, n)
			for i := range es {
				seq := int64(rng.IntN(1 << 30))
				if dups {
					seq = int64(rng.IntN(8))
				}
				es[i] = queueEntry{seq, fmt.Sprintf("n-%010d-%d", seq, rng.IntN(1000))}
			}
			want := slices.Clone(es)
			slices.SortFunc(want, compareEntries)
			sortEntries(es)
			if !slices.Equal(es, want) {
				t.Errorf("n=%d dups=%v: not sorted as slices.SortFunc sorts", n, dups)
			}
		}
	}
}
