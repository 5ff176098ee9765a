package recipe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// suspendedHold acquires a lock through a proxy with a client that
// tolerates suspensions (session 2s, loss timeout 1s), cuts the connection
// and returns once the hold is suspended. The caller heals the proxy.
func suspendedHold(t *testing.T, srv *zktest.Server, path string) (*recipe.Client, *recipe.Hold, *zktest.Proxy) {
	t.Helper()
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	c := locktest.Client(t, []string{proxy.Addr(), proxy.Addr()}, recipe.WithSessionTimeout(2*time.Second), recipe.WithSuspensionTolerance())
	ctx := locktest.Ctx(t, 30*time.Second)
	h, err := newLock(t, c, path).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Conn().Get(path); err != nil { // the silence starts with the cut
		t.Fatal(err)
	}
	proxy.Partition()
	select {
	case <-h.Suspended():
	case <-h.Done():
		t.Fatalf("lost instead of suspended: %v", h.Err())
	case <-time.After(2 * time.Second):
		t.Fatal("not suspended within the session timeout")
	}
	if locktest.Closed(h.Resumed()) || h.Err() != nil {
		t.Fatalf("suspended hold: Resumed closed %v, Err %v; want open, nil", locktest.Closed(h.Resumed()), h.Err())
	}
	return c, h, proxy
}

// A hold whose node was deleted during the suspension is lost with
// ErrNodeDeleted when the session answers again, not kept: the node is
// read again before the suspension clears.
func TestSuspensionNodeDeletedMeanwhile(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	_, h, proxy := suspendedHold(t, srv, path)
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+h.Node(), -1); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	select {
	case <-h.Done():
	case <-h.Resumed():
		t.Fatal("kept a hold whose node was deleted")
	case <-time.After(4 * time.Second):
		t.Fatal("not lost after the heal")
	}
	if err := h.Err(); !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if !locktest.Closed(h.Suspended()) || locktest.Closed(h.Resumed()) {
		t.Fatal("a hold lost while suspended should keep Suspended closed and Resumed open")
	}
	if err := h.Release(locktest.Ctx(t, 5*time.Second)); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("Release = %v, want ErrLost", err)
	}
}

// A hold released while suspended: Release waits for the connection and
// deletes the node; the hold ends released, not lost.
func TestSuspensionReleaseWhileSuspended(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	_, h, proxy := suspendedHold(t, srv, path)
	released := make(chan error, 1)
	go func() { released <- h.Release(locktest.Ctx(t, 10*time.Second)) }()
	time.Sleep(200 * time.Millisecond)
	proxy.Heal()
	if err := <-released; err != nil {
		t.Fatalf("Release while suspended: %v", err)
	}
	if err := h.Err(); !errors.Is(err, recipe.ErrNotHeld) {
		t.Fatalf("Err after Release = %v, want ErrNotHeld", err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("left after Release: %v", left)
	}
}

// By default nothing is ever suspended: silence past the loss timeout is a
// loss (ErrConnectionSuspended), and Suspended stays open.
func TestSuspensionDefaultIsLoss(t *testing.T) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(2*time.Second))
	h, err := newLock(t, c, zktest.UniquePath(t)).Acquire(locktest.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	suspended := h.Suspended()
	proxy.Partition()
	select {
	case <-h.Done():
	case <-suspended:
		t.Fatal("suspended without WithSuspensionTolerance")
	case <-time.After(2 * time.Second):
		t.Fatal("not lost within the session timeout")
	}
	proxy.Heal()
	if err := h.Err(); !errors.Is(err, recipe.ErrConnectionSuspended) {
		t.Fatalf("Err = %v, want ErrConnectionSuspended", err)
	}
	if locktest.Closed(h.Suspended()) || !locktest.Closed(h.Resumed()) {
		t.Fatal("default mode: Suspended must stay open and Resumed closed")
	}
}
