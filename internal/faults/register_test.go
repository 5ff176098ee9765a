package faults_test

import (
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/faults"
)

// CheckHistory finds, from commit order alone, the writes that could
// only have committed after their hold ended.
func TestCheckHistory(t *testing.T) {
	x := func(token int64) faults.Write { return faults.Write{Token: token, Mode: faults.Exclusive, Node: "n"} }
	s := func(token int64) faults.Write { return faults.Write{Token: token, Mode: faults.Shared, Node: "n"} }
	l := func(token int64) faults.Write { return faults.Write{Token: token, Mode: faults.Lease, Node: "n"} }
	for _, tc := range []struct {
		name      string
		hist      []faults.Write
		maxLeases int
		want      string // substring of a violation, "" for none
	}{
		{"exclusive in order", []faults.Write{x(1), x(1), x(5), x(9), x(9)}, 0, ""},
		{"stale lower token", []faults.Write{x(1), x(5), x(1)}, 0, "by token 1 (n) after the first write of exclusive token 5"},
		{"interleaved higher", []faults.Write{x(5), x(7), x(5)}, 0, "between writes of exclusive token 5"},
		{"readers together", []faults.Write{s(1), s(2), s(1), s(2), x(3), x(3), s(4), s(6), s(4)}, 0, ""},
		{"reader across a writer", []faults.Write{s(1), x(3), s(1)}, 0, "by token 1 (n) after the first write of exclusive token 3"},
		{"reader inside a writer", []faults.Write{x(3), s(4), x(3)}, 0, "between writes of exclusive token 3"},
		{"two leases", []faults.Write{l(1), l(2), l(1), l(2), l(3), l(3)}, 2, ""},
		{"three leases", []faults.Write{l(1), l(2), l(3), l(2), l(1)}, 2, "3 leases in force, more than 2"},
		{"one lease reused", []faults.Write{l(1), l(2), l(1)}, 1, "2 leases in force, more than 1"},
		{"a lease that may have ended", []faults.Write{l(1), l(2), l(3), l(1)}, 2, ""},
		{"empty", nil, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.hist {
				tc.hist[i].Seq = int64(i)
			}
			got := faults.CheckHistory(tc.hist, tc.maxLeases)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("violations %q, want none", got)
			case tc.want != "" && !strings.Contains(strings.Join(got, "\n"), tc.want):
				t.Errorf("violations %q, want one with %q", got, tc.want)
			}
		})
	}
}
