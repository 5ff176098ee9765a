package driver

import (
	"cmp"
	"math"
	"slices"
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
	// Every lock name the table knows ends in a non-digit. Then the only
	// occurrence that can be followed by nothing but digits is one that
	// ends where the name's trailing run of digits begins, and Sequence
	// looks only there. A lock name ending in a digit takes the full scan.
	i, n := trailingDigits(name)
	at := -1
	for _, ln := range lockNames {
		switch {
		case ln == "":
		case isDigit(ln[len(ln)-1]):
			return sequenceScan(name, lockNames)
		case i-len(ln) > at && strings.HasSuffix(name[:i], ln):
			at = i - len(ln)
		}
	}
	if at < 0 || occursIn(name[at+1:i], lockNames) {
		// None occurs, or one that starts after at ends before the
		// digits: it is the one that counts, and a non-digit follows it.
		return 0, false
	}
	if i == len(name) || len(name)-i > maxDigits || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// trailingDigits returns where the run of ASCII digits that ends name
// begins, and the value of its last maxDigits digits.
func trailingDigits(name string) (start int, n uint64) {
	i, unit := len(name), uint64(1)
	for i > 0 && isDigit(name[i-1]) {
		i--
		if len(name)-i <= maxDigits {
			n += uint64(name[i]-'0') * unit
			unit *= 10
		}
	}
	return i, n
}

// occursIn reports whether any non-empty lock name occurs in s.
func occursIn(s string, lockNames []string) bool {
	for _, ln := range lockNames {
		if ln != "" && strings.Contains(s, ln) {
			return true
		}
	}
	return false
}

// sequenceScan is Sequence for any lock names: it finds the last
// occurrence of each in the whole name.
func sequenceScan(name string, lockNames []string) (seq int64, ok bool) {
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

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseDigits parses s, which must consist of 1 to maxDigits ASCII digits.
func parseDigits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	var n uint64 // 19 digits fit
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// Sort returns a new slice with names in queue order: ascending by
// [Sequence] (with the same lockNames), names whose sequence cannot be
// parsed after all the others, and ties, including among the unparsable
// names, broken by comparing the names themselves. The order is thus total
// and deterministic: it does not depend on the order of the input, which
// Sort does not modify.
func Sort(names []string, lockNames ...string) []string {
	if out, ok := sortPacked(names, lockNames); ok {
		return out
	}
	q := make([]queued, len(names))
	for i, name := range names {
		seq, ok := Sequence(name, lockNames...)
		if !ok {
			seq = -1 // no sequence: after every node that has one
		}
		q[i] = queued{seq: seq, name: name}
	}
	slices.SortFunc(q, queued.compare)
	out := make([]string, len(q))
	for i, e := range q {
		out[i] = e.name
	}
	return out
}

// packBits is the number of low bits of a packed sort key that hold the
// name's index in the listing; the sequence number takes the others.
const packBits = 20

// sortPacked sorts the common listing, in which every name has a sequence
// number and no two share one, as numbers: each name's sequence number
// and index packed into one integer. That is several times faster than
// comparing pairs for a long queue. ok is false, and Sort compares pairs,
// for any other listing.
func sortPacked(names []string, lockNames []string) (out []string, ok bool) {
	if len(names) >= 1<<packBits {
		return nil, false
	}
	keys := make([]uint64, len(names))
	for i, name := range names {
		seq, ok := Sequence(name, lockNames...)
		if !ok || seq >= 1<<(64-packBits) {
			return nil, false
		}
		keys[i] = uint64(seq)<<packBits | uint64(i)
	}
	slices.Sort(keys)
	out = make([]string, len(keys))
	for i, k := range keys {
		if i > 0 && k>>packBits == keys[i-1]>>packBits {
			return nil, false // a tie, broken by name
		}
		out[i] = names[k&(1<<packBits-1)]
	}
	return out, true
}

// queued is a name with its sequence number parsed once (-1 for none),
// so that sorting a long listing compares numbers.
type queued struct {
	seq  int64
	name string
}

// compare orders by sequence number, names without one last, then by name.
func (a queued) compare(b queued) int {
	switch {
	case (a.seq < 0) != (b.seq < 0):
		if a.seq >= 0 {
			return -1
		}
		return 1
	case a.seq >= 0 && a.seq != b.seq:
		return cmp.Compare(a.seq, b.seq)
	}
	return strings.Compare(a.name, b.name)
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
