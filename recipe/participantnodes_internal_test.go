package recipe

import (
	"context"
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/driver"
)

// ParticipantNodes orders and judges a listing as Participants does, from
// the listing alone: each case is a directory's children (in the order
// ZooKeeper might list them) and the queue expected, as "name holds" or
// "name waits" in order, for a lock of the case's spec. Against the fake
// server, the call must send one listing and nothing else.
func TestParticipantNodesTable(t *testing.T) {
	semaphore2, err := driver.Leases(2)
	if err != nil {
		t.Fatal(err)
	}
	kind, ok := driver.KindNamed("lock-")
	if !ok {
		t.Fatal("no kind lock-")
	}
	// As the mutex recipe builds it: kazoo's nodes queue with ours.
	mutex := LockSpec{Recipe: "mutex", LockName: "lock-", Queue: kind.Queue(), Driver: driver.Mutex()}
	rw := []string{"read-", "write-"}
	for _, tc := range []struct {
		name     string
		spec     LockSpec
		children []string
		want     []string // "node holds" or "node waits", in queue order
	}{
		{"mutex", mutex,
			[]string{"_c_b-lock-0000000002", "_c_a-lock-0000000001", "_c_c-lock-0000000003"},
			[]string{"_c_a-lock-0000000001 holds", "_c_b-lock-0000000002 waits", "_c_c-lock-0000000003 waits"}},
		{"mutex, kazoo's nodes in its queue, a name without a sequence, a child of no queue", mutex,
			[]string{"lock-by-hand", "config", "0123abcd__lock__0000000002", "_c_a-lock-0000000001"},
			[]string{"_c_a-lock-0000000001 holds", "0123abcd__lock__0000000002 waits", "lock-by-hand waits"}},
		{"mutex, a kazoo node first", mutex,
			[]string{"_c_a-lock-0000000002", "0123abcd__lock__0000000001"},
			[]string{"0123abcd__lock__0000000001 holds", "_c_a-lock-0000000002 waits"}},
		{"read side: readers before the first writer hold",
			LockSpec{Recipe: "rwlock", LockName: "read-", Queue: rw, Driver: driver.Read("write-")},
			[]string{"_c_d-read-0000000004", "_c_c-write-0000000003", "_c_b-read-0000000002", "_c_a-read-0000000001"},
			[]string{"_c_a-read-0000000001 holds", "_c_b-read-0000000002 holds", "_c_c-write-0000000003 waits", "_c_d-read-0000000004 waits"}},
		{"write side: the same queue, the same judgement",
			LockSpec{Recipe: "rwlock", LockName: "write-", Queue: rw, Driver: driver.Write()},
			[]string{"_c_d-read-0000000004", "_c_c-write-0000000003", "_c_b-read-0000000002", "_c_a-read-0000000001"},
			[]string{"_c_a-read-0000000001 holds", "_c_b-read-0000000002 holds", "_c_c-write-0000000003 waits", "_c_d-read-0000000004 waits"}},
		{"write side: a writer first holds alone",
			LockSpec{Recipe: "rwlock", LockName: "write-", Queue: rw, Driver: driver.Write()},
			[]string{"_c_b-read-0000000002", "_c_a-write-0000000001"},
			[]string{"_c_a-write-0000000001 holds", "_c_b-read-0000000002 waits"}},
		{"semaphore of 2 leases",
			LockSpec{Recipe: "semaphore", LockName: "lease-", Driver: semaphore2},
			[]string{"_c_c-lease-0000000003", "_c_a-lease-0000000001", "_c_d-lease-0000000004", "_c_b-lease-0000000002"},
			[]string{"_c_a-lease-0000000001 holds", "_c_b-lease-0000000002 holds", "_c_c-lease-0000000003 waits", "_c_d-lease-0000000004 waits"}},
		{"no queue nodes", mutex, []string{"config"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeZK()
			f.put("/locks", 0)
			f.put(phaseDir, 0)
			for _, n := range tc.children {
				f.put(join(phaseDir, n), otherSession)
			}
			c := fakeClient(t, f)
			l, err := NewLock(c, phaseDir, tc.spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			nodes, err := l.ParticipantNodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requestCounts(); got != "children=1" {
				t.Errorf("requests %s, want children=1", got)
			}
			got := make([]string, len(nodes))
			for i, n := range nodes {
				got[i] = n.Node + map[bool]string{true: " holds", false: " waits"}[n.Holder]
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ParticipantNodes:\n got %v\nwant %v", got, tc.want)
			}
			ps, err := l.Participants(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != len(nodes) {
				t.Fatalf("Participants: %d nodes, ParticipantNodes %d", len(ps), len(nodes))
			}
			for i, p := range ps {
				if n := nodes[i]; p.Node != n.Node || p.LockName != n.LockName || p.Sequence != n.Sequence || p.Holder != n.Holder {
					t.Errorf("node %d: Participants %s %s %d %v, ParticipantNodes %+v", i, p.Node, p.LockName, p.Sequence, p.Holder, n)
				}
			}
		})
	}
}

// ParticipantNodes of a directory that does not exist is nil, with no
// error, after one listing.
func TestParticipantNodesMissingDir(t *testing.T) {
	f := newFakeZK()
	c := fakeClient(t, f)
	l, err := NewLock(c, phaseDir, LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := l.ParticipantNodes(context.Background())
	if nodes != nil || err != nil || f.requestCounts() != "children=1" {
		t.Errorf("ParticipantNodes = %v, %v after %s; want nil, nil after one listing", nodes, err, f.requestCounts())
	}
}
