package driver

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxDigits is the longest run of digits Sequence accepts: the number of
// digits of math.MaxInt64. ZooKeeper writes ten.
const maxDigits = 19

// Sequence returns the sequence number of a child name: the digits after
// the last occurrence of any of lockNames, as in Curator, so that a lock
// name appearing earlier in the name (inside a protected prefix, say) does
// not matter.
//
// The occurrence used is the one that starts last in name; if several lock
// names occur at that position, the longest wins. Empty lock names are
// ignored. ok is false when no lock name occurs in name, or when what
// follows that occurrence is not 1 to 19 ASCII digits (no sign, no
// spaces) or does not fit in an int64. Leading zeros are allowed, so
// ZooKeeper's ten zero-padded digits and sequence numbers past 2^31 both
// parse.
func Sequence(name string, lockNames ...string) (seq int64, ok bool) {
	at, length := -1, 0
	for _, ln := range lockNames {
		if ln == "" {
			continue
		}
		i := strings.LastIndex(name, ln)
		if i > at || (i == at && i >= 0 && len(ln) > length) {
			at, length = i, len(ln)
		}
	}
	if at < 0 {
		return 0, false
	}
	return parseDigits(name[at+length:])
}

// parseDigits parses s, which must consist of 1 to maxDigits ASCII digits.
func parseDigits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Sort returns a new slice with names in queue order: ascending by
// [Sequence] (with the same lockNames), names whose sequence cannot be
// parsed after all the others, and ties, including among the unparsable
// names, broken by comparing the names themselves. The order is thus total
// and deterministic: it does not depend on the order of the input, which
// Sort does not modify.
func Sort(names []string, lockNames ...string) []string {
	q := byQueue{names: append(make([]string, 0, len(names)), names...), seqs: make([]int64, len(names))}
	for i, name := range names {
		if seq, ok := Sequence(name, lockNames...); ok {
			q.seqs[i] = seq
		} else {
			q.seqs[i] = -1 // no sequence: after every node that has one
		}
	}
	sort.Sort(q)
	return q.names
}

// byQueue sorts names by their sequence numbers (seqs, -1 for none, last),
// then by name. Two parallel slices cost Sort two allocations per call,
// whatever the length of the queue.
type byQueue struct {
	names []string
	seqs  []int64
}

func (q byQueue) Len() int { return len(q.names) }

func (q byQueue) Less(i, j int) bool {
	a, b := q.seqs[i], q.seqs[j]
	switch {
	case (a < 0) != (b < 0):
		return a >= 0
	case a >= 0 && a != b:
		return a < b
	}
	return q.names[i] < q.names[j]
}

func (q byQueue) Swap(i, j int) {
	q.names[i], q.names[j] = q.names[j], q.names[i]
	q.seqs[i], q.seqs[j] = q.seqs[j], q.seqs[i]
}

// Filter returns a new slice with the names that contain at least one of
// the (non-empty) lockNames, in their original order. Other children of a
// lock directory are not contenders and are ignored.
func Filter(names []string, lockNames ...string) []string {
	kept := make([]string, 0, len(names))
	for _, name := range names {
		if slices.ContainsFunc(lockNames, func(ln string) bool {
			return ln != "" && strings.Contains(name, ln)
		}) {
			kept = append(kept, name)
		}
	}
	return kept
}
