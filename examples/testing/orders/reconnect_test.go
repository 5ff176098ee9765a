package orders

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A waiter keeps its place in line while its connection is dropped again
// and again (each time the client reconnects within its session, sets its
// watch again and sends the requests queued meanwhile), and gets the lock
// when the holder lets go.
func TestWaiterKeepsItsPlaceThroughDroppedConnections(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	store := &Store{}
	a := newWorker(t, zktest.Client(t, srv.Addr(), recipe.WithSessionTimeout(session)), "a", path, store)
	b := newWorker(t, proxy.Client(t, recipe.WithSessionTimeout(session)), "b", path, store)

	runA := start(t, a)
	waitOrders(t, store, "a", 1)
	runB := start(t, b) // b waits in line, watching a's node

	// Keep requests coming from b's client while its connection drops.
	ctx, cancel := context.WithCancel(context.Background())
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for ctx.Err() == nil {
			_, _ = b.Lock.Participants(ctx)
		}
	}()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		proxy.DropAll()
	}
	cancel()
	<-reading
	if p, err := a.Lock.Participants(context.Background()); err != nil || len(p) != 2 {
		t.Fatalf("after the drops the queue is %v (%v), want a and b", p, err)
	}

	runA.stop(t)
	waitOrders(t, store, "b", 3)
	runB.stop(t)
}
