package recipe_test

// Watches across a reconnect. When go-zookeeper reconnects with watches
// set, it sends them again (setWatches) with the last zxid it has read,
// and the server fires at once every watch whose node changed after that
// zxid. A change the client needed is skipped only if that zxid is ahead
// of a change whose notification the client did not read. Neither the
// wire tap nor the engine moves it: the tap writes nothing and passes
// go-zookeeper only whole frames it read in order from the server (it ends
// the connection before a frame it refuses), so go-zookeeper's last zxid
// is always one the server sent, and the server sends a connection's watch
// events before any reply with a later zxid. These tests check the outcome
// on a real server: a change made while the client was away, with the
// client's requests queued during the outage and answered at the
// reconnect, fires the watch, wakes an observer and a semaphore waiter.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// watchRounds is how many outages each test makes.
const watchRounds = 5

// away cuts client a off (the proxy discards what either side sends),
// runs change while it is away, queues requests on a's connection that
// go out, and are answered, as it reconnects, then ends the outage (the
// proxy closes the connections; go-zookeeper dials again at once).
func away(t *testing.T, proxy *zktest.Proxy, a *recipe.Client, change func()) {
	t.Helper()
	proxy.Partition()
	change()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { a.Conn().Get("/") })
	}
	time.Sleep(100 * time.Millisecond)
	proxy.Heal()
	wg.Wait()
}

// A child watch set before the outage fires for a child created during it.
func TestWatchResentAfterReconnect(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	a := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	b := locktest.Client(t, []string{srv.Addr()})
	dir := zktest.UniquePath(t)
	mkdirs(t, b.Conn(), dir)
	for i := range watchRounds {
		_, _, ch, err := a.Conn().ChildrenW(dir)
		if err != nil {
			t.Fatal(err)
		}
		var zxid int64
		away(t, proxy, a, func() {
			p, err := b.Conn().Create(fmt.Sprintf("%s/n-%d", dir, i), nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil {
				t.Fatal(err)
			}
			_, st, err := b.Conn().Exists(p)
			if err != nil {
				t.Fatal(err)
			}
			zxid = st.Czxid
		})
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeChildrenChanged {
				t.Fatalf("round %d: event %v, want a children change", i, ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the child watch did not fire within 10 s of the reconnect: the change at zxid %#x was skipped", i, zxid)
		}
	}
}

// An observer of an empty queue sees the node created while its client
// was away.
func TestObserverAfterReconnect(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	a := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	b := locktest.Client(t, []string{srv.Addr()})
	for i := range watchRounds {
		path := zktest.UniquePath(t) + fmt.Sprint(i)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		obs, err := newLock(t, a, path).Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Let the observer list the empty queue and set its watch.
		time.Sleep(300 * time.Millisecond)
		var h *recipe.Hold
		away(t, proxy, a, func() {
			if h, err = newLock(t, b, path).Acquire(ctx); err != nil {
				t.Fatal(err)
			}
		})
		select {
		case p, ok := <-obs:
			if !ok || p.Node != h.Node() {
				t.Fatalf("round %d: observed %+v (open %v), want %s", i, p, ok, h.Node())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the observer did not see %s within 10 s of the reconnect", i, h.Node())
		}
		h.Release(ctx)
		cancel()
		for range obs {
		}
	}
}

// A semaphore waiter is granted a lease released while its client was
// away.
func TestSemaphoreWaiterAfterReconnect(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	a := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	b := locktest.Client(t, []string{srv.Addr()})
	leases := func(c *recipe.Client, path string) *recipe.Lock {
		d, _ := driver.Leases(2)
		l, err := recipe.NewLock(c, path, recipe.LockSpec{Recipe: "semaphore", LockName: "lease-", Driver: d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range watchRounds {
		path := zktest.UniquePath(t) + fmt.Sprint(i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var held []*recipe.Hold
		for range 2 {
			h, err := leases(b, path).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, h)
		}
		got := make(chan error, 1)
		var mine *recipe.Hold
		go func() {
			h, err := leases(a, path).Acquire(ctx)
			mine = h
			got <- err
		}()
		// Let the waiter queue and watch.
		time.Sleep(300 * time.Millisecond)
		away(t, proxy, a, func() {
			if err := held[0].Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("round %d: the waiter: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter was not granted within 10 s of the reconnect", i)
		}
		mine.Release(ctx)
		held[1].Release(ctx)
		cancel()
	}
}
