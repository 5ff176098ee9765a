package driver

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func FuzzSequence(f *testing.F) {
	for _, seed := range []struct{ name, lockName string }{
		{"_c_" + uuid + "-lock-0000000042", "lock-"},
		{"lock-0000000000", "lock-"},
		{"lock-2147483648", "lock-"},
		{"lock-9223372036854775807", "lock-"},
		{"lock-9223372036854775808", "lock-"},
		{"lock--2147483648", "lock-"},
		{"lock-0000000001-lock-0000000042", "lock-"},
		{"_c_x-__WRIT__0000000005", "__WRIT__"},
		{"", ""},
		{"lock-", "lock-"},
		{"xlock-k-0000000007", "k-"},
		{"lock-lo-0000000007", "lo"},
		{"ab1-0000000003", "ab1-"},
		{"v20000000001", "v2"},
	} {
		f.Add(seed.name, seed.lockName)
	}
	f.Fuzz(func(t *testing.T, name, lockName string) {
		seq, ok := Sequence(name, lockName)
		if ok {
			i := strings.LastIndex(name, lockName)
			digits := name[i+len(lockName):]
			if lockName == "" || i < 0 || seq < 0 || len(digits) < 1 || len(digits) > 19 {
				t.Fatalf("Sequence(%q, %q) = %d, true: bad parse", name, lockName, seq)
			}
			if n, err := strconv.ParseInt(digits, 10, 64); err != nil || n != seq || strings.ContainsAny(digits, "+-_") {
				t.Fatalf("Sequence(%q, %q) = %d, true; digits %q", name, lockName, seq, digits)
			}
		}
		// More lock names: no panic, and a lone lock name never yields a
		// different answer than itself listed twice.
		seq2, ok2 := Sequence(name, lockName, lockName)
		if seq2 != seq || ok2 != ok {
			t.Fatalf("Sequence(%q, %q, %q) = %d, %v; with one lock name %d, %v", name, lockName, lockName, seq2, ok2, seq, ok)
		}
		Sequence(name, lockName, "read-", "__WRIT__", "")
		// The tail-only search agrees with the scan of the whole name, for
		// the fuzzed lock name alone, next to the table's and next to
		// pieces of itself (which overlap it where the tail search looks).
		for _, lns := range [][]string{
			{lockName},
			{lockName, "lock-", "__lock__"},
			{"read-", lockName, "write-"},
			{lockName, lockName[len(lockName)/2:]},
			{lockName[:len(lockName)/2], lockName},
		} {
			got, gotOK := Sequence(name, lns...)
			want, wantOK := sequenceScan(name, lns)
			if got != want || gotOK != wantOK {
				t.Fatalf("Sequence(%q, %q) = %d, %v; a scan of the whole name gives %d, %v", name, lns, got, gotOK, want, wantOK)
			}
		}
		if _, ok := Sequence(name); ok {
			t.Fatalf("Sequence(%q) without lock names = ok", name)
		}
		// Classify agrees with KindOf: a name of a known kind is Native or
		// Foreign, any other is never.
		_, _, known := KindOf(name)
		if c := Classify(name); known != (c == Native || c == Foreign) {
			t.Fatalf("Classify(%q) = %v, KindOf ok = %v", name, c, known)
		}
	})
}

// reference is the queue order, written independently of Sort.
func reference(a, b string, lockNames ...string) int {
	sa, oka := Sequence(a, lockNames...)
	sb, okb := Sequence(b, lockNames...)
	if oka && okb && sa != sb {
		return cmp.Compare(sa, sb)
	}
	if oka && !okb {
		return -1
	}
	if !oka && okb {
		return 1
	}
	return strings.Compare(a, b)
}

// FuzzSort splits its input on "/" (which never occurs in a node name)
// into a list of children.
func FuzzSort(f *testing.F) {
	f.Add("lock-0000000002/lock-0000000001/junk", "lock-")
	f.Add("_c_"+uuid+"-lock-0000000042/lock-0000000041/lock-x/lock-0000000041", "lock-")
	f.Add("read-0000000003/write-2147483648/read-9999999999/write-", "read-")
	f.Add("lock--1/lock-+1/lock-1/lock-01/lock-", "lock-")
	f.Add("lock-9223372036854775807/lock-0000000001/lock-17592186044416", "lock-")
	f.Add("/", "")
	f.Fuzz(func(t *testing.T, blob, lockName string) {
		names := strings.Split(blob, "/")
		in := slices.Clone(names)
		lockNames := []string{lockName, "write-"}
		sorted := Sort(names, lockNames...)

		if !slices.Equal(names, in) {
			t.Fatalf("Sort modified its input")
		}
		a, b := slices.Clone(in), slices.Clone(sorted)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("Sort(%q) = %q is not a permutation", in, sorted)
		}
		for i := 1; i < len(sorted); i++ {
			if reference(sorted[i-1], sorted[i], lockNames...) > 0 {
				t.Fatalf("Sort(%q) = %q: %q before %q", in, sorted, sorted[i-1], sorted[i])
			}
		}
		if again := Sort(sorted, lockNames...); !slices.Equal(again, sorted) {
			t.Fatalf("Sort is not idempotent: %q vs %q", again, sorted)
		}
		reversed := slices.Clone(in)
		slices.Reverse(reversed)
		if got := Sort(reversed, lockNames...); !slices.Equal(got, sorted) {
			t.Fatalf("Sort depends on the input order: %q vs %q", got, sorted)
		}

		for _, name := range Filter(names, lockNames...) {
			if !strings.Contains(name, lockNames[0]) && !strings.Contains(name, lockNames[1]) {
				t.Fatalf("Filter kept %q", name)
			}
		}

		// The drivers accept any sorted list without panicking.
		self := names[0]
		sem, _ := Leases(2)
		for _, d := range []Driver{Mutex(), Write(), Read("write-"), Read(lockName), sem} {
			dec, err := d.Decide(sorted, self)
			if err != nil || sorted[dec.Position] != self {
				t.Fatalf("Decide(%q, %q) = %+v, %v", sorted, self, dec, err)
			}
			if dec.Held == (len(dec.Watch) > 0) {
				t.Fatalf("Decide(%q, %q) = %+v", sorted, self, dec)
			}
		}
	})
}
