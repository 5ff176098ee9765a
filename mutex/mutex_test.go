package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

func newMutex(t testing.TB, c *recipe.Client, path string, opts ...mutex.Option) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(c, path, opts...)
	if err != nil {
		t.Fatalf("mutex.New(%q): %v", path, err)
	}
	return m
}

type grant struct {
	seq   int64
	token int64
}

// 8 sessions x 200 cycles: never two holders; grants follow node order; tokens
// strictly increase.
func TestMutualExclusionFIFOAndTokens(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const sessions, cycles = 8, 200
	var overlap locktest.Overlap
	var grants locktest.Log[grant]
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		c := locktest.Client(t, []string{srv.Addr()})
		m := newMutex(t, c, path, mutex.WithData([]byte(fmt.Sprint("worker-", i))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range cycles {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				err := m.Lock(ctx)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				overlap.Enter()
				seq, _ := driver.Sequence(m.Node(), mutex.LockName)
				grants.Add(grant{seq, m.Token()})
				overlap.Exit()
				if err := m.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v := overlap.Violations(); v != 0 {
		t.Fatalf("mutual exclusion violated %d times", v)
	}
	g := grants.Items()
	if len(g) != sessions*cycles {
		t.Fatalf("got %d grants, want %d", len(g), sessions*cycles)
	}
	for i := 1; i < len(g); i++ {
		if g[i].seq <= g[i-1].seq {
			t.Fatalf("grant %d has sequence %d after %d: not FIFO", i, g[i].seq, g[i-1].seq)
		}
		if g[i].token <= g[i-1].token {
			t.Fatalf("grant %d has token %d after %d: tokens must strictly increase", i, g[i].token, g[i-1].token)
		}
	}
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

func TestReentrancy(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c1 := locktest.Client(t, []string{srv.Addr()})
	c2 := locktest.Client(t, []string{srv.Addr()})
	m1, m2 := newMutex(t, c1, path), newMutex(t, c2, path)
	ctx := locktest.Ctx(t, 20*time.Second)

	hctx, err := m1.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m1.Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
	locktest.Settle(t, c1)
	before := c1.Stats()
	if err := m1.Lock(hctx); err != nil {
		t.Fatal(err)
	}
	if got := c1.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("reentrant Lock made %d round trips, want 0", got)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock while held after Lock, Lock, Unlock: got %v, want ErrLocked", err)
	}
	if err := m1.Err(); err != nil {
		t.Fatalf("m1 should still hold: %v", err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after full release: %v", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	m3 := newMutex(t, c1, path)
	locktest.Settle(t, c1)
	before = c1.Stats()
	if err := m3.Unlock(ctx); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("Unlock on a handle holding nothing: got %v, want ErrNotHeld", err)
	}
	if err := m1.Unlock(ctx); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("extra Unlock: got %v, want ErrNotHeld", err)
	}
	if got := c1.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("Unlock without hold made %d round trips, want 0", got)
	}
	if err := m3.Err(); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("Err on idle handle: %v", err)
	}
	if !locktest.Closed(m3.Done()) {
		t.Fatal("Done of an idle handle should be closed")
	}
}

func TestTimeoutAndCancelCleanUp(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, mode := range []string{"deadline", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			path := zktest.UniquePath(t)
			holder := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
			if err := holder.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			waiter := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
			var ctx context.Context
			var want error
			if mode == "deadline" {
				ctx = locktest.Ctx(t, 200*time.Millisecond)
				want = context.DeadlineExceeded
			} else {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
				want = context.Canceled
			}
			start := time.Now()
			err := waiter.Lock(ctx)
			if !errors.Is(err, want) || !errors.Is(err, mutex.ErrNotAcquired) {
				t.Fatalf("Lock behind a holder: got %v, want %v and ErrNotAcquired", err, want)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("Lock returned %v after its 200ms context", took)
			}
			left := locktest.Children(t, raw, path)
			if len(left) != 1 || left[0] != holder.Node() {
				t.Fatalf("after the failed Lock the directory holds %v, want only the holder's %s", left, holder.Node())
			}
			if err := waiter.Err(); !errors.Is(err, mutex.ErrNotHeld) {
				t.Fatalf("waiter after failure: %v", err)
			}
			if err := holder.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With 50 waiters in line, one release wakes exactly one of them, and over
// the whole hand-off chain every waiter is woken exactly once.
func TestHerdFree(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const clients, perClient = 10, 5
	const waiters = clients * perClient
	holderClient := locktest.Client(t, []string{srv.Addr()})
	holder := newMutex(t, holderClient, path)
	ctx := locktest.Ctx(t, 60*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var cs []*recipe.Client
	for range clients {
		cs = append(cs, locktest.Client(t, []string{srv.Addr()}))
	}
	wakeups := func() (n int64) {
		for _, c := range cs {
			n += c.Stats().Wakeups
		}
		return n
	}
	acquired := make(chan int, waiters)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range waiters {
		m := newMutex(t, cs[i%clients], path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				acquired <- -1
				return
			}
			acquired <- i
			<-release
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d unlock: %v", i, err)
			}
		}()
	}
	locktest.Eventually(t, 30*time.Second, "all waiters queued", func() bool {
		p, err := holder.Participants(ctx)
		return err == nil && len(p) == waiters+1
	})
	// Watches are armed right after the node is listed; give the last ones
	// a moment.
	time.Sleep(200 * time.Millisecond)
	before := wakeups()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case i := <-acquired:
		if i < 0 {
			t.FailNow()
		}
	case <-ctx.Done():
		t.Fatal("no waiter acquired after the release")
	}
	time.Sleep(300 * time.Millisecond)
	if got := wakeups() - before; got != 1 {
		t.Fatalf("one release woke %d waiters, want exactly 1", got)
	}
	if n := len(acquired); n != 0 {
		t.Fatalf("%d more waiters acquired while the first still holds", n)
	}
	close(release)
	wg.Wait()
	if got := wakeups() - before; got != waiters {
		t.Fatalf("the whole chain of %d hand-offs woke waiters %d times, want %d", waiters, got, waiters)
	}
}

func TestNodeDeletedWhileHeld(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	m := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	if err := m.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+m.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	if err := m.Err(); !errors.Is(err, mutex.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if err := m.Unlock(context.Background()); !errors.Is(err, mutex.ErrLost) {
		t.Fatalf("Unlock after loss = %v, want ErrLost", err)
	}
	if err := m.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatalf("Lock again after loss and Unlock: %v", err)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The holder's traffic is black-holed past the session timeout: it is told
// before the server expires its session, another client then gets the lock,
// and the first holder's Unlock returns a clear error and deletes nothing.
func TestSessionExpiryWhileHeld(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const session = 2 * time.Second
	c1 := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(session))
	m1 := newMutex(t, c1, path)
	if err := m1.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	m2 := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	got2 := make(chan time.Time, 1)
	go func() {
		if err := m2.Lock(locktest.Ctx(t, 30*time.Second)); err != nil {
			t.Errorf("second client: %v", err)
			close(got2)
			return
		}
		got2 <- time.Now()
	}()
	proxy.Partition()
	var lostAt time.Time
	select {
	case <-m1.Done():
		lostAt = time.Now()
	case <-time.After(3 * session):
		t.Fatal("holder not told within 3 session timeouts")
	}
	if err := m1.Err(); !errors.Is(err, mutex.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", err)
	}
	var at time.Time
	select {
	case at = <-got2:
	case <-time.After(30 * time.Second):
		t.Fatal("second client never acquired after the session expired")
	}
	if at.IsZero() {
		t.FailNow()
	}
	if !lostAt.Before(at) {
		t.Fatalf("holder told at %v, after the next holder was granted at %v", lostAt, at)
	}
	proxy.Heal()
	err = m1.Unlock(locktest.Ctx(t, 10*time.Second))
	if !errors.Is(err, mutex.ErrLost) {
		t.Fatalf("Unlock after expiry = %v, want ErrLost", err)
	}
	if err := m2.Err(); err != nil {
		t.Fatalf("the new holder lost its lock after the old holder's Unlock: %v", err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != m2.Node() {
		t.Fatalf("directory holds %v, want only the new holder's %s", left, m2.Node())
	}
	if err := m2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Through a proxy that cuts the connection right after every 7th create is
// forwarded (the server applies it, the client never sees the reply), 4
// sessions x 50 cycles complete with no error, no overlap and no orphan.
func TestLostCreateReply(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.CutAfterCreates(7)
	const sessions, cycles = 4, 50
	var overlap locktest.Overlap
	var wg sync.WaitGroup
	var clients []*recipe.Client
	for i := range sessions {
		// The address is listed twice: go-zookeeper pauses a second before
		// retrying a server list it has cycled through, and with two entries
		// it reconnects at once, as it would to another ensemble member.
		c := locktest.Client(t, []string{proxy.Addr(), proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
		clients = append(clients, c)
		m := newMutex(t, c, path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cycles {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				err := m.Lock(ctx)
				cancel()
				if err != nil {
					t.Errorf("session %d cycle %d: Lock: %v", i, j, err)
					return
				}
				overlap.Enter()
				overlap.Exit()
				if err := m.Unlock(context.Background()); err != nil {
					t.Errorf("session %d cycle %d: Unlock: %v", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := overlap.Violations(); v != 0 {
		t.Fatalf("mutual exclusion violated %d times", v)
	}
	st := proxy.Stats()
	if st.Cuts == 0 {
		t.Fatalf("the proxy cut nothing (%+v): the test proved nothing", st)
	}
	var recovered int64
	for _, c := range clients {
		recovered += c.Stats().Recovered
	}
	if recovered == 0 {
		t.Fatalf("no node was recovered by its UUID after %d cuts", st.Cuts)
	}
	t.Logf("proxy: %+v; nodes recovered by UUID: %d", st, recovered)
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("orphan nodes while the clients are still open: %v", left)
	}
	for _, c := range clients {
		c.Close()
	}
}

func TestBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	locktest.Settle(t, c)
	before := c.Stats()
	for _, p := range []string{"", "locks/a", "/locks/a/", "/locks//a", "/locks/./a", "/locks/../a", "/", "/zookeeper/x", "/a\x00b"} {
		if _, err := mutex.New(c, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := mutex.New(nil, "/locks/a"); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil client) = %v, want ErrInvalidArgument", err)
	}
	if _, err := mutex.New(c, "/locks/a", nil); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil option) = %v, want ErrInvalidArgument", err)
	}
	m := newMutex(t, c, zktest.UniquePath(t))
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := m.Lock(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Lock(nil) = %v", err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("bad input caused %d round trips, want 0", got)
	}
}

func TestParticipants(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	var ms []*mutex.Mutex
	for i := range 3 {
		ms = append(ms, newMutex(t, locktest.Client(t, []string{srv.Addr()}), path, mutex.WithData([]byte(fmt.Sprint("p", i)))))
	}
	if err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms[i].Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			_ = ms[i].Unlock(ctx)
		}()
		locktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
			p, err := ms[0].Participants(ctx)
			return err == nil && len(p) == i+1
		})
	}
	p, err := ms[0].Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"p0", "p1", "p2"} {
		if string(p[i].Data) != want {
			t.Fatalf("participant %d data %q, want %q (%+v)", i, p[i].Data, want, p)
		}
	}
	if p[0].Node != ms[0].Node() || p[0].Token != ms[0].Token() {
		t.Fatalf("head %+v is not the holder %s", p[0], ms[0].Node())
	}
	if !sort.SliceIsSorted(p, func(i, j int) bool { return p[i].Sequence < p[j].Sequence }) {
		t.Fatalf("participants not in queue order: %+v", p)
	}
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// Many goroutines share one handle: reentrant counting stays consistent under
// the race detector, and the lock is free at the end.
func TestSharedHandle(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c := locktest.Client(t, []string{srv.Addr()})
	m := newMutex(t, c, path)
	ctx := locktest.Ctx(t, 30*time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				_ = m.Token()
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := m.Err(); !errors.Is(err, mutex.ErrNotHeld) {
		t.Fatalf("after balanced Lock/Unlock: %v", err)
	}
	other := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("lock not free after shared use: %v", err)
	}
	_ = other.Unlock(ctx)
}

// Unlock with a context that has already ended still releases: the handle
// holds nothing afterwards and the node is deleted (in the background if
// need be), every time.
func TestUnlockWithEndedContext(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	m := newMutex(t, locktest.Client(t, []string{srv.Addr()}), path)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		if err := m.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		_ = m.Unlock(ended) // may report the ended context
		if err := m.Err(); !errors.Is(err, mutex.ErrNotHeld) {
			t.Fatalf("round %d: after Unlock with an ended ctx, Err = %v; want ErrNotHeld", i, err)
		}
		locktest.Eventually(t, 10*time.Second, "node deleted", func() bool {
			return len(locktest.Children(t, raw, path)) == 0
		})
	}
}
