package zktest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestEnsembleLeaderFailover(t *testing.T) {
	start := time.Now()
	e := zktest.StartEnsemble(t, 3)
	t.Logf("3-server ensemble started in %v", time.Since(start).Round(time.Millisecond))
	if len(e.Servers) != 3 || len(e.Addrs()) != 3 {
		t.Fatalf("ensemble has %d servers, %d addrs", len(e.Servers), len(e.Addrs()))
	}

	// Exactly one leader, the others followers.
	modes := map[string]int{}
	for _, s := range e.Servers {
		r, err := s.FourLetter("srvr")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(r, "\n") {
			if m, ok := strings.CutPrefix(line, "Mode: "); ok {
				modes[m]++
			}
		}
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes = %v, want 1 leader and 2 followers", modes)
	}
	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Servers[leader].FourLetter("srvr"); !strings.Contains(r, "Mode: leader") {
		t.Fatalf("Leader() = %d but its srvr says %q", leader, r)
	}

	// A write on one server is visible on another.
	a, b := (leader+1)%3, (leader+2)%3
	ca := zktest.Connect(t, e.Servers[a].Addr())
	cb := zktest.Connect(t, e.Servers[b].Addr())
	path := zktest.UniquePath(t)
	createParents(t, ca, path)
	mustCreate(t, ca, path, []byte("replicated"))
	if _, err := cb.Sync(path); err != nil {
		t.Fatal(err)
	}
	if got, _, err := cb.Get(path); err != nil || string(got) != "replicated" {
		t.Fatalf("get on server %d = %q, %v", b, got, err)
	}

	// Killing the leader elects a new one among the survivors.
	if err := e.Kill(leader); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := e.WaitQuorum(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("new quorum %v after killing the leader", time.Since(start).Round(time.Millisecond))
	newLeader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if newLeader == leader {
		t.Fatalf("killed server %d is still the leader", leader)
	}
	// Writes work; the connections to the survivors kept their sessions
	// or reconnect within the session timeout.
	mustCreate(t, ca, path+"-after-failover", nil)
	if _, err := cb.Sync(path + "-after-failover"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := cb.Exists(path + "-after-failover"); err != nil || !ok {
		t.Fatalf("exists on server %d = %v, %v", b, ok, err)
	}

	// The old leader rejoins as a follower and has all the data.
	if err := e.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Servers[leader].FourLetter("srvr"); !strings.Contains(r, "Mode: follower") {
		t.Fatalf("restarted old leader: srvr = %q", r)
	}
	cl := zktest.Connect(t, e.Servers[leader].Addr())
	if _, err := cl.Sync(path + "-after-failover"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-after-failover"} {
		if ok, _, err := cl.Exists(p); err != nil || !ok {
			t.Fatalf("on restarted server: exists %s = %v, %v", p, ok, err)
		}
	}

	// A client given every address survives losing its server.
	call := zktest.Connect(t, e.Addrs()...)
	if _, _, err := call.Get(path); err != nil {
		t.Fatal(err)
	}
	// So does a recipe client of the ensemble, closed with the test.
	rc := e.Client(t)
	if ok, err := rc.Exists(context.Background(), path); err != nil || !ok {
		t.Fatalf("recipe client of the ensemble: exists %s = %v, %v", path, ok, err)
	}
}
