package recipe

import (
	"cmp"
	"strings"
)

// queueEntry is a node of a listing with its sequence number.
type queueEntry struct {
	seq  int64
	name string
}

// compareEntries orders nodes by sequence number, then name.
func compareEntries(a, b queueEntry) int {
	if c := cmp.Compare(a.seq, b.seq); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// sortEntries sorts es by compareEntries without recursion: runs of
// sortRun by insertion, then merged bottom-up through a buffer. A waiter
// sorts the listing it is the first to need, on its own goroutine, and a
// recursive sort of a long queue would grow that stack for the rest of
// the wait (the runtime halves a stack only when a quarter of it is in
// use).
func sortEntries(es []queueEntry) {
	n := len(es)
	for lo := 0; lo < n; lo += sortRun {
		hi := min(lo+sortRun, n)
		for i := lo + 1; i < hi; i++ {
			for j := i; j > lo && compareEntries(es[j], es[j-1]) < 0; j-- {
				es[j], es[j-1] = es[j-1], es[j]
			}
		}
	}
	if n <= sortRun {
		return
	}
	src, dst := es, make([]queueEntry, n)
	for width := sortRun; width < n; width *= 2 {
		for lo := 0; lo < n; lo += 2 * width {
			mid, hi := min(lo+width, n), min(lo+2*width, n)
			i, j, k := lo, mid, lo
			for ; i < mid && j < hi; k++ {
				if compareEntries(src[j], src[i]) < 0 {
					dst[k] = src[j]
					j++
				} else {
					dst[k] = src[i]
					i++
				}
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
		}
		src, dst = dst, src
	}
	if &src[0] != &es[0] {
		copy(es, src)
	}
}

// sortRun is the length of the runs sortEntries sorts by insertion.
const sortRun = 16
