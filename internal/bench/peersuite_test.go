package main

import (
	"testing"
	"time"
)

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		held [][2]int64
		want int
	}{
		{"none", nil, 0},
		{"one after the other", [][2]int64{{10, 20}, {0, 10}, {20, 30}}, 0},
		{"one inside another", [][2]int64{{0, 100}, {20, 30}, {40, 50}}, 2},
		{"straddling", [][2]int64{{0, 10}, {5, 15}, {15, 20}}, 1},
	} {
		if got := overlaps(tc.held); got != tc.want {
			t.Errorf("%s: overlaps = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPeerResultSkipsUnusableRounds(t *testing.T) {
	rep := newReport(config{sessions: 8, lostSessions: 4}, "x", "true", "3.8.0", []scenario{
		{id: "lost-reply", title: "mutex", kind: kindLostReply},
		{id: "kazoo-lost-reply", title: "kazoo Lock", kind: kindLostReply},
		{id: idRWLockReadHeavy, title: "rwlock", contended: true},
		{id: "kazoo-rwlock", title: "kazoo rwlock", contended: true},
	})
	out := peerOutput{ElapsedNs: int64(time.Second), LatNs: []int64{int64(time.Millisecond), 3 * int64(time.Millisecond)}}
	for range 2 {
		rep.add("lost-reply", out.result(10))
		rep.add(idRWLockReadHeavy, out.result(10))
	}
	slow := out
	slow.ElapsedNs *= 4
	rep.add("kazoo-lost-reply", slow.result(10))
	rep.add("kazoo-lost-reply", peerOutput{Status: statusStalled}.result(-1))
	rep.add("kazoo-rwlock", peerOutput{Status: statusStalled}.result(-1))
	rep.add("kazoo-rwlock", peerOutput{Status: statusStalled}.result(-1))
	rep.finish()

	byName := map[string]ratio{}
	for _, q := range rep.Ratios {
		byName[q.Name] = q
	}
	lost := byName["lost replies: mutex / kazoo"]
	if len(lost.PerRound) != 1 || lost.Value != 4 || !lost.Met {
		t.Errorf("lost-reply ratio = %+v, want the one usable round, 4, met", lost)
	}
	rw := byName["rwlock 90% reads / kazoo"]
	if len(rw.PerRound) != 0 || rw.Note == "" {
		t.Errorf("rwlock ratio = %+v, want no rounds and a note", rw)
	}
	if st := rep.byID["kazoo-lost-reply"]; st.Valid != 1 || st.ServerRequests == nil || *st.ServerRequests != 5 {
		t.Errorf("kazoo lost-reply stats = %+v, want 1 valid round, 5 requests a cycle", st)
	}
}
