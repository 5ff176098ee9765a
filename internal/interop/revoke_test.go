package interop

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/mutex"
)

// Curator's Revoker.attemptRevoke asks a revocable Go holder to let go.
func (e *env) curatorRevokesGo(t *testing.T) {
	ctx := locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	m, err := mutex.New(e.clients[0], path, mutex.WithRevocable())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(ctx) }()
	if err := e.java[0].call(ctx, "revoke-sent", "revoke", path+"/"+m.Node()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Revoked():
	case <-time.After(10 * time.Second):
		t.Fatal("the Go holder was not told of Curator's revocation")
	}
	if err := m.Err(); err != nil {
		t.Fatalf("a revocation is a request, not a loss: %v", err)
	}
}

// mutex.Revoke reaches a Curator holder that made its lock revocable: its
// RevocationListener runs.
func (e *env) goRevokesCurator(t *testing.T) {
	ctx := locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	j := e.java[0]
	if err := j.call(ctx, "held", "hold-revocable", path); err != nil {
		t.Fatal(err)
	}
	watcher, err := mutex.New(e.watcher, path)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := watcher.Participants(ctx)
	if err != nil || len(ps) != 1 || !ps[0].Holder {
		t.Fatalf("participants = %+v, %v; want Curator's holder", ps, err)
	}
	if err := mutex.Revoke(ctx, e.clients[0], path, ps[0].Node); err != nil {
		t.Fatal(err)
	}
	if err := j.await(ctx, "revoked", 10*time.Second); err != nil {
		t.Fatalf("Curator's RevocationListener did not run: %v", err)
	}
	if err := j.call(ctx, "released", "release"); err != nil {
		t.Fatal(err)
	}
}
