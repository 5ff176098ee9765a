package demo

import (
	"cmp"
	"slices"
	"time"
)

// Interval is a period of time from Start to End, in Unix nanoseconds.
type Interval struct{ Start, End int64 }

// MaxOverlap returns the largest number of intervals in progress at one
// time, and when that first happened. An interval that ends exactly when
// another starts does not overlap it.
func MaxOverlap(intervals []Interval) (int, time.Time) {
	type edge struct {
		t     int64
		delta int
	}
	edges := make([]edge, 0, 2*len(intervals))
	for _, iv := range intervals {
		edges = append(edges, edge{iv.Start, +1}, edge{iv.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta))
	})
	cur, best, at := 0, 0, int64(0)
	for _, e := range edges {
		cur += e.delta
		if cur > best {
			best, at = cur, e.t
		}
	}
	return best, time.Unix(0, at)
}
