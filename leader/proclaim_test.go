package leader_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The leader's Proclaim is one guarded write, seen by an observer on
// another client (Observe and Leader) with the term's token; a participant
// without a term gets ErrNotLeader without I/O; the next term carries the
// participant's identity again.
func TestProclaim(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	ac := locktest.Client(t, []string{srv.Addr()})
	bc := locktest.Client(t, []string{srv.Addr()})
	alpha := newElection(t, ac, path, leader.WithData([]byte("alpha")))
	beta := newElection(t, bc, path, leader.WithData([]byte("beta")))
	watcher := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)

	o, err := watcher.Observer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) leader.Participant {
		t.Helper()
		select {
		case p, ok := <-o.C:
			if !ok {
				t.Fatalf("observer closed (%v) while waiting for %s", o.Err(), what)
			}
			return p
		case <-ctx.Done():
			t.Fatalf("observer did not deliver %s", what)
		}
		return leader.Participant{}
	}

	if err := beta.Proclaim(ctx, []byte("beta rules")); !errors.Is(err, leader.ErrNotLeader) || !errors.Is(err, recipe.ErrNotHeld) {
		t.Fatalf("Proclaim before campaigning = %v, want ErrNotLeader", err)
	}
	if err := alpha.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if p := next("alpha"); string(p.Data) != "alpha" || p.Token != alpha.Token() {
		t.Fatalf("delivered %+v, want alpha with token %d", p, alpha.Token())
	}
	elected := make(chan error, 1)
	go func() { elected <- beta.Campaign(ctx) }()
	locktest.Queued(t, 2, watcher.Participants)

	locktest.Settle(t, ac)
	locktest.Settle(t, bc)
	before, beforeB := ac.Stats(), bc.Stats()
	if err := beta.Proclaim(ctx, []byte("beta rules")); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("Proclaim while in line = %v, want ErrNotLeader", err)
	}
	if n := bc.Stats().Sub(beforeB).RoundTrips(); n != 0 {
		t.Fatalf("Proclaim without a term made %d round trips", n)
	}
	if err := alpha.Proclaim(ctx, []byte("alpha at 10.0.0.7:8080")); err != nil {
		t.Fatal(err)
	}
	if st := ac.Stats().Sub(before); st.Commits != 1 || st.Creates+st.Deletes+st.Lists+st.Writes != 0 {
		t.Fatalf("Proclaim sent %+v, want one commit", st)
	}
	if p := next("the proclaimed data"); string(p.Data) != "alpha at 10.0.0.7:8080" || p.Token != alpha.Token() || p.Node != alpha.Node() {
		t.Fatalf("delivered %+v, want alpha's node %s, token %d, with the new data", p, alpha.Node(), alpha.Token())
	}
	if got, err := watcher.Leader(ctx); err != nil || string(got.Data) != "alpha at 10.0.0.7:8080" {
		t.Fatalf("Leader = %+v, %v; want the proclaimed data", got, err)
	}
	if !alpha.IsLeader() || alpha.ID() != "alpha" {
		t.Fatalf("after Proclaim: IsLeader %v, ID %q; want leading, with the identity unchanged", alpha.IsLeader(), alpha.ID())
	}

	// The next leader, then alpha's next term, carry their identities.
	if err := alpha.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-elected; err != nil {
		t.Fatal(err)
	}
	if p := next("beta"); string(p.Data) != "beta" || p.Token != beta.Token() {
		t.Fatalf("delivered %+v, want beta with token %d", p, beta.Token())
	}
	if err := alpha.Proclaim(ctx, []byte("alpha again")); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("Proclaim after Resign = %v, want ErrNotLeader", err)
	}
	if err := beta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := alpha.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if p := next("alpha's second term"); string(p.Data) != "alpha" {
		t.Fatalf("delivered %+v, want alpha's identity", p)
	}
	if err := alpha.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Proclaim of a term that was lost fails with ErrLost and changes
// nothing: the node deleted by another client (Proclaim sent at once,
// before the leader may have heard of it, so the server's check may be
// what refuses it), or the session expired.
func TestProclaimAfterLoss(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range []struct {
		name   string
		reason error
		lose   func(t *testing.T, e *leader.Election, proxy *zktest.Proxy)
	}{
		{"node deleted", recipe.ErrNodeDeleted, func(t *testing.T, e *leader.Election, _ *zktest.Proxy) {
			if err := zktest.Connect(t, srv.Addr()).Delete(e.Path()+"/"+e.Node(), -1); err != nil {
				t.Fatal(err)
			}
		}},
		{"session expired", recipe.ErrSessionExpired, func(t *testing.T, e *leader.Election, proxy *zktest.Proxy) {
			if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
				t.Fatalf("ExpireSessions = %d, %v", n, err)
			}
			<-e.Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := zktest.UniquePath(t)
			ctx := locktest.Ctx(t, 30*time.Second)
			proxy := srv.Proxy(t)
			c := locktest.Client(t, []string{proxy.Addr()})
			e := newElection(t, c, path, leader.WithData([]byte("alpha")))
			if err := e.Campaign(ctx); err != nil {
				t.Fatal(err)
			}
			tc.lose(t, e, proxy)
			before := c.Stats()
			err := e.Proclaim(ctx, []byte("stale"))
			if !errors.Is(err, leader.ErrLost) || !errors.Is(err, tc.reason) {
				t.Fatalf("Proclaim after the loss = %v, want ErrLost and %v", err, tc.reason)
			}
			t.Logf("Proclaim = %v (%d commits sent)", err, c.Stats().Sub(before).Commits)
			if err := e.Err(); !errors.Is(err, leader.ErrLost) {
				t.Fatalf("Err after the refused Proclaim = %v, want ErrLost", err)
			}
			// Nothing was written: no node of the election carries the data.
			raw := zktest.Connect(t, srv.Addr())
			for _, n := range locktest.Children(t, raw, path) {
				data, _, err := raw.Get(path + "/" + n)
				if err == nil && bytes.Equal(data, []byte("stale")) {
					t.Fatalf("node %s carries the data of a Proclaim that failed", n)
				}
			}
		})
	}
}

// Proclaim checks its input before anything else, without I/O, whether
// the handle leads or not.
func TestProclaimBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	e := newElection(t, c, zktest.UniquePath(t))
	ctx := locktest.Ctx(t, 30*time.Second)
	check := func(state string) {
		t.Helper()
		locktest.Settle(t, c)
		before := c.Stats()
		//lint:ignore SA1012 a nil context is the bad input under test
		if err := e.Proclaim(nil, []byte("x")); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
			t.Errorf("%s: Proclaim(nil ctx) = %v", state, err)
		}
		if err := e.Proclaim(ctx, nil); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s: Proclaim(no data) = %v", state, err)
		}
		if err := e.Proclaim(ctx, make([]byte, 1<<20)); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s: Proclaim(1 MiB) = %v", state, err)
		}
		if n := c.Stats().Sub(before).RoundTrips(); n != 0 {
			t.Errorf("%s: bad input made %d round trips", state, n)
		}
	}
	check("not leading")
	if err := e.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	check("leading")
	if !e.IsLeader() {
		t.Fatal("bad input ended the term")
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
