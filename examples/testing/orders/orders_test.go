package orders

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// session is the clients' session timeout; zktest's servers grant 1s and
// more. A holder cut off from ZooKeeper is told after half of it (the
// loss timeout), and the server expires its session after all of it.
const session = 2 * time.Second

func TestWorkerStopsWritingWhenLockIsLost(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	store := &Store{}

	// a reaches ZooKeeper through the proxy, b directly.
	a := newWorker(t, proxy.Client(t, recipe.WithSessionTimeout(session)), "a", path, store)
	b := newWorker(t, zktest.Client(t, srv.Addr(), recipe.WithSessionTimeout(session)), "b", path, store)

	runA := start(t, a)
	waitOrders(t, store, "a", 3)

	proxy.Partition() // longer than the session timeout: the server expires a's session
	select {
	case <-a.Lock.Done():
	case <-time.After(2 * session):
		t.Fatal("a still holds the lock after a partition of twice the session timeout")
	}
	lost := len(store.Orders()) // a must write nothing from here on
	if err := <-runA.err; !errors.Is(err, mutex.ErrLost) {
		t.Fatalf("a's worker returned %v, want an error wrapping mutex.ErrLost", err)
	}

	runB := start(t, b) // b gets the lock once the server has expired a's session
	waitOrders(t, store, "b", 3)
	orders := store.Orders()
	for i, o := range orders[lost:] {
		if o.Worker != "b" {
			t.Errorf("order %d, %+v, was written after a lost the lock", lost+i, o)
		}
	}
	if ta, tb := orders[lost-1].Token, orders[lost].Token; tb <= ta {
		t.Errorf("b's fencing token %d is not above a's %d", tb, ta)
	}

	// Healed, a's client gets a new session, and a the lock once b is done.
	proxy.Heal()
	runB.stop(t)
	runA = start(t, a)
	waitOrders(t, store, "a", 6)
	runA.stop(t)
}

func TestLockWorksWhileAMemberIsDown(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	client := ens.Client(t, recipe.WithSessionTimeout(session)) // closed when the test ends
	m, err := mutex.New(client, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}

	before := lockUnlock(t, m)
	leader, err := ens.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := ens.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// Two members of three are a quorum, once they have elected a leader:
	// the Lock made now must be granted soon after they serve again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(ctx) }()
	if err := ens.WaitQuorum(time.Minute); err != nil {
		t.Fatal(err)
	}
	serving := time.Now()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the Lock was not granted within 15s of the ensemble serving again")
	}
	t.Logf("granted %v after the ensemble served again", time.Since(serving).Round(time.Millisecond))
	during := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ens.Restart(leader); err != nil {
		t.Fatal(err)
	}
	after := lockUnlock(t, m)
	if !(before < during && during < after) {
		t.Errorf("fencing tokens %d, %d, %d do not increase", before, during, after)
	}
}

func newWorker(t *testing.T, c *recipe.Client, name, path string, s *Store) *Worker {
	t.Helper()
	m, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	return &Worker{Name: name, Lock: m, Store: s, Every: 10 * time.Millisecond}
}

// running is a Worker's Run in a goroutine; err receives what it returns.
type running struct {
	cancel context.CancelFunc
	err    chan error
}

func start(t *testing.T, w *Worker) *running {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &running{cancel: cancel, err: make(chan error, 1)}
	go func() { r.err <- w.Run(ctx) }()
	return r
}

// stop ends the run and checks that the worker held its lock to the end.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.err; !errors.Is(err, context.Canceled) {
		t.Errorf("worker returned %v, want context.Canceled", err)
	}
}

// waitOrders waits until worker has written n orders in all.
func waitOrders(t *testing.T, s *Store, worker string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		count := 0
		for _, o := range s.Orders() {
			if o.Worker == worker {
				count++
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote %d orders in 10s, want %d", worker, count, n)
		}
	}
}

// lockUnlock takes and releases m, and returns the hold's fencing token.
func lockUnlock(t *testing.T, m *mutex.Mutex) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("locked in %v", time.Since(start).Round(time.Millisecond))
	token := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return token
}
