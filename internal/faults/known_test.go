package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReleaseAfterLostDeleteReply: when the connection drops after the
// server applied a release's delete but before its reply arrived, Release
// retries the delete, gets NoNode, and must report success: its own delete
// removed the node and nobody else touched it. (It used to report the hold
// as lost, ErrLost wrapping ErrNodeDeleted; the fault matrix saw it under
// dropped connections and partitions.)
func TestReleaseAfterLostDeleteReply(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, a := range faults.Recipes {
		t.Run(a.Name, func(t *testing.T) {
			p, err := zktest.NewProxy(srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Listed twice: go-zookeeper reconnects at once.
			c, err := recipe.Connect(ctx, []string{p.Addr(), p.Addr()}, recipe.WithSessionTimeout(4*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			path := zktest.UniquePath(t)
			acquire, err := a.New(c, path)
			if err != nil {
				t.Fatal(err)
			}
			h, err := acquire(ctx, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			p.Arm(zktest.LoseReply, 1, zktest.OpDelete)
			errs := h.Release(ctx)
			if cuts := p.Stats().Cuts; cuts != 1 {
				t.Fatalf("the proxy cut %d connections after a delete, want 1", cuts)
			}
			left, err := faults.ListNodes(raw, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Fatalf("nodes left after the release: %v", left)
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("release of %s (deleted by this very release, nobody else touched it) = %v, want nil; errors.Is(err, recipe.ErrNodeDeleted) = %v",
						h.Parts[i].Node, err, errors.Is(err, recipe.ErrNodeDeleted))
				}
				if perr := h.Parts[i].Err(); errors.Is(perr, recipe.ErrLost) {
					t.Errorf("Err() of %s after its release = %v, want no loss", h.Parts[i].Node, perr)
				}
			}
		})
	}
}

// go-zookeeper v1.0.4 (the latest release) reads Conn.lastZxid in
// sendSetWatches while recvLoop writes it, without synchronization, when a
// connection is re-established with watches set and a request queued during
// the reconnect gets its reply first (upstream go-zookeeper/zk PR #35,
// samuel/go-zookeeper#178 and #260). Under -race that fails any test that
// reconnects while watching. The make targets build against the release
// with patches/go-zookeeper-zk-v1.0.4-lastzxid.patch applied (atomics; see
// scripts/patched-zk.sh, which writes the go.work they use); this test
// provokes the race and, under -race, fails without the patch:
// GOWORK=off go test -race -run LastZxid ./internal/faults/ shows it.
func TestGoZookeeperLastZxidRace(t *testing.T) {
	srv := zktest.Shared(t)
	p, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn := zktest.Connect(t, p.Addr(), p.Addr())
	path := zktest.UniquePath(t)
	if _, err := conn.Create("/zktest", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// Many watched nodes make sendSetWatches slow enough to lose the race.
	for i := range 200 {
		n := fmt.Sprintf("%s/n%03d", path, i)
		if _, err := conn.Create(n, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := conn.GetW(n); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		p.DropAll()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { _, _, _ = conn.Get(path) }) // queued during the reconnect
		}
		wg.Wait()
	}
}

// An acquire that sends its create while the client is reconnecting, after
// the server expired its session but before the client learned of it, has
// the create queued by go-zookeeper and sent, and applied, in the new
// session. When the acquire's context ends meanwhile, its cleanup must
// still delete the node: it carries the acquire's UUID, so it is ours
// whatever session owns it. (Cleanup used to stop on seeing the session
// change, leaving the node to block the lock; the soak run found it.)
func TestNoOrphanAfterCreateQueuedAcrossExpiry(t *testing.T) {
	const session = 2 * time.Second
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A holder on a direct connection keeps the directory (a container)
	// from being reaped, so that the late create succeeds.
	hc, err := recipe.Connect(ctx, []string{srv.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	holder, err := mutex.New(hc, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	p, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := recipe.Connect(ctx, []string{p.Addr(), p.Addr()}, recipe.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := c.SessionID()
	m, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}

	// Cut the client off past its session timeout: the server expires the
	// session, while the client, still believing in it, keeps trying to
	// reconnect into the black hole. A create sent now is queued in
	// go-zookeeper; when the partition heals, the reconnect learns of the
	// expiry, opens a new session and sends the create in it.
	p.Partition()
	time.Sleep(session + time.Second)
	if got := c.Conn().SessionID(); got != old {
		t.Fatalf("go-zookeeper already left session %#x (now %#x): the test cannot set up the race", old, got)
	}
	lctx, lcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = m.Lock(lctx) // create queued in go-zookeeper; the context ends first
	lcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while reconnecting = %v, want a deadline error", err)
	}
	p.Heal()
	locktest.Eventually(t, 20*time.Second, "a new session", func() bool {
		s := c.Conn().SessionID()
		return s != 0 && s != old
	})
	time.Sleep(3 * time.Second) // the queued create lands; cleanup has had time

	left, err := faults.ListNodes(raw, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if n.Owner == c.Conn().SessionID() {
			t.Errorf("orphan %s is owned by the client's live session %#x, no acquire is running and nothing will delete it",
				n.Name, n.Owner)
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := mutex.New(hc, path)
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
	defer tcancel()
	if err := other.Lock(tctx); err != nil {
		t.Errorf("the mutex is free (holder released, no acquire running), yet Lock = %v", err)
	} else {
		_ = other.Unlock(ctx)
	}
}
