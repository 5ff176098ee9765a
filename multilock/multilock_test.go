package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// check returns v, failing the test on err; use it as check(t)(f()).
func check[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func newMutex(t testing.TB, c *recipe.Client, path string) *mutex.Mutex {
	return check[*mutex.Mutex](t)(mutex.New(c, path))
}

func newRW(t testing.TB, c *recipe.Client, path string) *rwlock.RWLock {
	return check[*rwlock.RWLock](t)(rwlock.New(c, path))
}

func newSem(t testing.TB, c *recipe.Client, path string, n int) *semaphore.Semaphore {
	return check[*semaphore.Semaphore](t)(semaphore.New(c, path, n))
}

func newSet(t testing.TB, members ...recipe.Acquirer) *multilock.Set {
	return check[*multilock.Set](t)(multilock.New(members...))
}

// memberErr returns the *MemberError err wraps, failing the test if none.
func memberErr(t testing.TB, err error) *multilock.MemberError {
	t.Helper()
	var me *multilock.MemberError
	if !errors.As(err, &me) {
		t.Fatalf("error %q names no member", err)
	}
	return me
}

// empty fails the test unless every path has no child, right now.
func empty(t testing.TB, raw *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if left := locktest.Children(t, raw, p); len(left) != 0 {
			t.Errorf("%s: nodes left: %v", p, left)
		}
	}
}

func TestNewRefusesBadInputWithoutIO(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	base := zktest.UniquePath(t)
	m := newMutex(t, c, base+"/a")
	m2 := newMutex(t, c, base+"/a")
	rw := newRW(t, c, base+"/b")
	rw2 := newRW(t, c, base+"/b")
	s := newSem(t, c, base+"/a", 2)
	before := c.Stats()

	for _, tc := range []struct {
		name     string
		members  []recipe.Acquirer
		mismatch bool
	}{
		{"no members", nil, false},
		{"nil member", []recipe.Acquirer{m, nil}, false},
		{"nil mutex", []recipe.Acquirer{(*mutex.Mutex)(nil)}, false},
		{"nil rwlock side", []recipe.Acquirer{(*rwlock.Side)(nil)}, false},
		{"nil semaphore", []recipe.Acquirer{(*semaphore.Semaphore)(nil)}, false},
		{"same mutex twice", []recipe.Acquirer{m, m}, false},
		{"two mutex handles on one path", []recipe.Acquirer{m, m2}, false},
		{"two reads on one path", []recipe.Acquirer{rw.Reader(), rw2.Reader()}, false},
		{"write and read of two handles", []recipe.Acquirer{rw2.Reader(), rw.Writer()}, false},
		{"mutex and lease on one path", []recipe.Acquirer{s, m}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := multilock.New(tc.members...)
			if set != nil || !errors.Is(err, recipe.ErrInvalidArgument) {
				t.Fatalf("New = %v, %v; want an error wrapping recipe.ErrInvalidArgument", set, err)
			}
			if got := errors.Is(err, recipe.ErrMismatch); got != tc.mismatch {
				t.Errorf("errors.Is(%q, recipe.ErrMismatch) = %v, want %v", err, got, tc.mismatch)
			}
		})
	}

	set := newSet(t, rw.Reader(), rw.Writer())
	//lint:ignore SA1012 a nil context is what is being tested
	if err := set.Lock(nil); !errors.Is(err, recipe.ErrInvalidArgument) || !errors.Is(err, multilock.ErrNotAcquired) {
		t.Errorf("Lock(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is what is being tested
	if err := set.Unlock(nil); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("Unlock(nil) = %v", err)
	}
	if err := set.Unlock(context.Background()); !errors.Is(err, multilock.ErrNotHeld) || !errors.Is(err, recipe.ErrNotHeld) {
		t.Errorf("Unlock of nothing = %v", err)
	}
	if after := c.Stats(); after != before {
		t.Errorf("bad input sent requests: %+v, then %+v", before, after)
	}
}

// A set of every kind, given in a scrambled order: it is taken in the
// global order (tokens, the nodes' czxids, increase along it), Tokens
// follow the order given to New, and Unlock leaves nothing behind.
// A custom recipe's Lock and Handle are members like the library's
// recipes: taken, fenced, released, and refused next to another kind.
func TestCustomRecipeMembers(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	custom := func(path string) *recipe.Lock {
		return check[*recipe.Lock](t)(recipe.NewLock(c, path, recipe.LockSpec{LockName: "lock-", Driver: driver.Mutex()}, nil))
	}
	lk, h := custom(base+"/a"), reentrant.New(custom(base+"/b"))
	set := newSet(t, h, lk, newMutex(t, c, base+"/c"))
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := set.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tok := range set.Tokens() {
		if tok == 0 {
			t.Errorf("member %d has no token", i)
		}
	}
	if h.Token() != set.Tokens()[0] || h.Err() != nil {
		t.Errorf("the handle member holds token %#x (Err %v), want %#x", h.Token(), h.Err(), set.Tokens()[0])
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base + "/a", base + "/b", base + "/c"} {
		if left := locktest.Children(t, raw, p); len(left) != 0 {
			t.Errorf("%s holds %v after Unlock", p, left)
		}
	}
	if _, err := multilock.New(lk, newSem(t, c, base+"/a", 1)); !errors.Is(err, recipe.ErrMismatch) {
		t.Errorf("a custom lock and a lease on one path: New = %v, want recipe.ErrMismatch", err)
	}
}

func TestLockTakesEveryKindInGlobalOrder(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	pa, pb, pc, pd := base+"/a", base+"/b", base+"/c", base+"/d"
	m := newMutex(t, c, pa)
	rw := newRW(t, c, pb)
	s := newSem(t, c, pc, 2)
	rd := newRW(t, c, pd)
	// Given: d read, c lease, b read, a mutex, b write.
	set := newSet(t, rd.Reader(), s, rw.Reader(), m, rw.Writer())
	ctx := locktest.Ctx(t, 20*time.Second)

	if err := set.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.Err(); err != nil {
		t.Fatalf("Err while held = %v", err)
	}
	if locktest.Closed(set.Done()) {
		t.Fatal("Done closed while held")
	}
	tok := set.Tokens()
	want := []int64{rd.Reader().Token(), 0, rw.Reader().Token(), m.Token(), rw.Token()}
	for i, w := range want {
		if w != 0 && tok[i] != w {
			t.Errorf("Tokens()[%d] = %#x, want the member's %#x", i, tok[i], w)
		}
	}
	// Global order: a mutex, b write, b read, c lease, d read.
	global := []int{3, 4, 2, 1, 0}
	for k := 1; k < len(global); k++ {
		if tok[global[k]] <= tok[global[k-1]] {
			t.Errorf("%s (token %#x) taken before %s (token %#x)", set.Members()[global[k]], tok[global[k]],
				set.Members()[global[k-1]], tok[global[k-1]])
		}
	}
	for p, n := range map[string]int{pa: 1, pb: 2, pc: 1, pd: 1} {
		if got := locktest.Children(t, raw, p); len(got) != n {
			t.Errorf("%s holds %v, want %d nodes", p, got, n)
		}
	}

	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	empty(t, raw, pa, pb, pc, pd)
	if !locktest.Closed(set.Done()) || !errors.Is(set.Err(), multilock.ErrNotHeld) || set.Tokens() != nil {
		t.Errorf("after Unlock: Done closed %v, Err %v, Tokens %v", locktest.Closed(set.Done()), set.Err(), set.Tokens())
	}
	if err := set.Unlock(ctx); !errors.Is(err, multilock.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
}

func TestReentrancy(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	m := newMutex(t, c, base+"/a")
	s := newSem(t, c, base+"/b", 3)
	set := newSet(t, m, s)
	ctx := locktest.Ctx(t, 20*time.Second)

	t.Run("set", func(t *testing.T) {
		if err := set.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		tok := set.Tokens()
		set.Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
		locktest.Settle(t, c)
		before := c.Stats()
		if err := set.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := set.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if after := c.Stats(); after != before {
			t.Errorf("reentrant Lock/Unlock sent requests")
		}
		if locktest.Closed(set.Done()) || set.Err() != nil || set.Tokens()[1] != tok[1] {
			t.Fatalf("set not held after one of two Unlocks: %v", set.Err())
		}
		if err := set.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		empty(t, raw, base+"/a", base+"/b")
	})

	t.Run("member held outside", func(t *testing.T) {
		hctx, err := m.Enter(ctx) // the set's Lock re-enters the mutex through hctx
		if err != nil {
			t.Fatal(err)
		}
		node := m.Node()
		if err := set.Lock(hctx); err != nil {
			t.Fatal(err)
		}
		if set.Tokens()[0] != m.Token() {
			t.Errorf("the set's mutex token %#x is not the handle's %#x", set.Tokens()[0], m.Token())
		}
		if err := set.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Err() != nil || m.Node() != node {
			t.Fatalf("the handle's own hold did not survive the set: %v", m.Err())
		}
		if got := locktest.Children(t, raw, base+"/a"); len(got) != 1 {
			t.Errorf("mutex path holds %v, want the handle's node", got)
		}
		empty(t, raw, base+"/b")
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("upgrade refused", func(t *testing.T) {
		rw := newRW(t, c, base+"/c")
		up := newSet(t, m, rw.Writer())
		rctx, err := rw.REnter(ctx) // the set's Lock asks for the write lock with the read hold
		if err != nil {
			t.Fatal(err)
		}
		err = up.Lock(rctx)
		if !errors.Is(err, rwlock.ErrUpgrade) || !errors.Is(err, multilock.ErrNotAcquired) {
			t.Fatalf("Lock = %v, want ErrUpgrade and ErrNotAcquired", err)
		}
		if me := memberErr(t, err); me.Index != 1 || me.Member.(*rwlock.Side).Mode() != rwlock.Write {
			t.Errorf("failed member = %d (%s), want 1 (write)", me.Index, me.Member)
		}
		empty(t, raw, base+"/a")
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TryLock with one member held elsewhere releases what it took and names
// the member; nothing is left.
func TestTryLock(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	other := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	pa, pb, pc := base+"/a", base+"/b", base+"/c"
	set := newSet(t,
		newSem(t, c, pc, 1),
		newMutex(t, c, pa),
		newRW(t, c, pb).Writer(),
	)
	holder := newRW(t, other, pb)
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := holder.RLock(ctx); err != nil {
		t.Fatal(err)
	}

	err := set.TryLock(ctx)
	if !errors.Is(err, multilock.ErrLocked) || !errors.Is(err, recipe.ErrWouldBlock) || !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryLock = %v, want ErrLocked", err)
	}
	if me := memberErr(t, err); me.Index != 2 || me.Member.Path() != pb {
		t.Errorf("failed member = %d (%s), want 2 (write %s)", me.Index, me.Member, pb)
	}
	empty(t, raw, pa, pc)
	if got := locktest.Children(t, raw, pb); len(got) != 1 {
		t.Errorf("%s holds %v, want the reader's node only", pb, got)
	}
	if !errors.Is(set.Err(), multilock.ErrNotHeld) {
		t.Errorf("Err after a failed TryLock = %v", set.Err())
	}

	if err := holder.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.TryLock(ctx); err != nil {
		t.Fatalf("TryLock on free members = %v", err)
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	empty(t, raw, pa, pb, pc)
}

// A Lock whose ctx ends while it waits for a member held elsewhere returns
// with nothing held and nothing of its own left in ZooKeeper: the member
// taken before is released before Lock returns.
func TestContextEndsMidway(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	other := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	pa, pb, pc := base+"/a", base+"/b", base+"/c"
	ma := newMutex(t, c, pa)
	s := newSem(t, c, pb, 2)
	mc := newMutex(t, c, pc)
	set := newSet(t, mc, s, ma)
	// Both leases of b are held elsewhere: the set takes a, then waits on b.
	holder := newSem(t, other, pb, 2)
	leases := check[[]*semaphore.Lease](t)(holder.AcquireN(locktest.Ctx(t, 20*time.Second), 2))

	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		cause error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 500*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { // cancel once the set waits: two holders and its waiter
				for ctx.Err() == nil {
					if p, err := s.Participants(ctx); err == nil && len(p) == 3 {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			err := set.Lock(ctx)
			took := time.Since(start)
			if !errors.Is(err, multilock.ErrNotAcquired) || !errors.Is(err, recipe.ErrNotAcquired) || !errors.Is(err, tc.cause) {
				t.Fatalf("Lock = %v, want ErrNotAcquired and %v", err, tc.cause)
			}
			if me := memberErr(t, err); me.Index != 1 || me.Member.Path() != pb {
				t.Errorf("failed member = %d (%s), want 1 (lease %s)", me.Index, me.Member, pb)
			}
			// Checked at once: released before Lock returned.
			empty(t, raw, pa, pc)
			if got := locktest.Children(t, raw, pb); len(got) != 2 {
				t.Errorf("%s holds %v, want the two leases held elsewhere", pb, got)
			}
			if !errors.Is(ma.Err(), mutex.ErrNotHeld) || !locktest.Closed(set.Done()) || !errors.Is(set.Err(), multilock.ErrNotHeld) {
				t.Errorf("after a failed Lock: member %v, set Done closed %v, Err %v", ma.Err(), locktest.Closed(set.Done()), set.Err())
			}
			t.Logf("Lock returned after %v", took.Round(time.Millisecond))
		})
	}

	for _, l := range leases {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := set.Lock(ctx); err != nil {
		t.Fatalf("Lock once the leases are free = %v", err)
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	empty(t, raw, pa, pb, pc)
}

// Deleting one member's node (as an operator might) fires the set's Done;
// Err names that member; Unlock releases the others and reports the loss.
func TestLosingOneMemberFiresDone(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	pa, pb, pc := base+"/a", base+"/b", base+"/c"
	set := newSet(t,
		newMutex(t, c, pa),
		newRW(t, c, pb).Reader(),
		newSem(t, c, pc, 2),
	)
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := set.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	done := set.Done()

	nodes := locktest.Children(t, raw, pb)
	if len(nodes) != 1 {
		t.Fatalf("%s holds %v, want one node", pb, nodes)
	}
	if err := raw.Delete(pb+"/"+nodes[0], -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10s after a member's node was deleted")
	}
	err := set.Err()
	if !errors.Is(err, multilock.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if me := memberErr(t, err); me.Index != 1 || me.Member.Path() != pb || me.Member.(*rwlock.Side).Mode() != rwlock.Read {
		t.Errorf("lost member = %d (%s), want 1 (read %s)", me.Index, me.Member, pb)
	}
	t.Logf("Err: %v", err)
	if err := set.Lock(ctx); !errors.Is(err, multilock.ErrLost) || !errors.Is(err, multilock.ErrNotAcquired) {
		t.Errorf("Lock on a set with a lost member = %v, want ErrLost", err)
	}

	err = set.Unlock(ctx)
	if !errors.Is(err, multilock.ErrLost) || memberErr(t, err).Index != 1 {
		t.Errorf("Unlock = %v, want the read member's loss", err)
	}
	empty(t, raw, pa, pb, pc)
	if !errors.Is(set.Err(), multilock.ErrNotHeld) {
		t.Errorf("Err after Unlock = %v", set.Err())
	}
}

// A member lost while the set waits for a later one: Lock does not return
// a set that is already broken; it releases the rest and fails.
func TestMemberLostWhileWaiting(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	other := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	base := zktest.UniquePath(t)
	pa, pb := base+"/a", base+"/b"
	ma, mb := newMutex(t, c, pa), newMutex(t, c, pb)
	set := newSet(t, mb, ma)
	holder := newMutex(t, other, pb)
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	errc := make(chan error, 1)
	go func() { errc <- set.Lock(ctx) }()
	locktest.Queued(t, 2, mb.Participants) // a taken, waiting on b
	nodes := locktest.Children(t, raw, pa)
	if len(nodes) != 1 {
		t.Fatalf("%s holds %v, want the set's node", pa, nodes)
	}
	if err := raw.Delete(pa+"/"+nodes[0], -1); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 10*time.Second, "the loss of a seen by its handle", func() bool { return ma.Err() != nil })
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, multilock.ErrNotAcquired) || !errors.Is(err, multilock.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Lock = %v, want ErrNotAcquired and the loss of a", err)
	}
	if me := memberErr(t, err); me.Member.Path() != pa {
		t.Errorf("member named %s, want %s", me.Member, pa)
	}
	empty(t, raw, pa, pb)
	if !errors.Is(set.Err(), multilock.ErrNotHeld) {
		t.Errorf("Err after the failed Lock = %v", set.Err())
	}
}
