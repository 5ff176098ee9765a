package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

func newRW(t testing.TB, c *recipe.Client, path string, opts ...rwlock.Option) *rwlock.RWLock {
	t.Helper()
	rw, err := rwlock.New(c, path, opts...)
	if err != nil {
		t.Fatalf("rwlock.New(%q): %v", path, err)
	}
	return rw
}

// rwOverlap checks the read/write exclusion rule on a critical section:
// writers alone, readers together.
type rwOverlap struct {
	mu                sync.Mutex
	readers, writers  int
	peakReaders       int
	violations        int
	reads, writeCount int
}

func (o *rwOverlap) enter(write bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if write {
		o.writers++
		o.writeCount++
		if o.writers > 1 || o.readers > 0 {
			o.violations++
		}
		return
	}
	o.readers++
	o.reads++
	o.peakReaders = max(o.peakReaders, o.readers)
	if o.writers > 0 {
		o.violations++
	}
}

func (o *rwOverlap) exit(write bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if write {
		o.writers--
	} else {
		o.readers--
	}
}

// 8 sessions x 200 cycles, 80% reads and 20% writes: writers are always
// alone, readers do share the lock, write tokens strictly increase, and
// nothing is left behind.
func TestReadersShareWritersExclude(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const sessions, cycles = 8, 200
	var o rwOverlap
	var tokens locktest.Log[int64]
	var wg sync.WaitGroup
	for i := range sessions {
		c := locktest.Client(t, []string{srv.Addr()})
		rw := newRW(t, c, path, rwlock.WithData(fmt.Appendf(nil, "worker-%d", i)))
		rnd := rand.New(rand.NewPCG(uint64(i), 7))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cycles {
				write := rnd.IntN(5) == 0
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				var err error
				if write {
					err = rw.Lock(ctx)
				} else {
					err = rw.RLock(ctx)
				}
				cancel()
				if err != nil {
					t.Errorf("session %d cycle %d: %v", i, j, err)
					return
				}
				o.enter(write)
				if write {
					tokens.Add(rw.Token())
				} else {
					time.Sleep(time.Duration(rnd.IntN(1000)) * time.Microsecond)
				}
				o.exit(write)
				if write {
					err = rw.Unlock(context.Background())
				} else {
					err = rw.RUnlock(context.Background())
				}
				if err != nil {
					t.Errorf("session %d cycle %d: unlock: %v", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if o.violations != 0 {
		t.Fatalf("read/write exclusion violated %d times", o.violations)
	}
	if o.reads+o.writeCount != sessions*cycles {
		t.Fatalf("%d reads + %d writes, want %d", o.reads, o.writeCount, sessions*cycles)
	}
	if o.peakReaders < 2 {
		t.Fatalf("never more than %d reader at once: readers do not share", o.peakReaders)
	}
	tk := tokens.Items()
	for i := 1; i < len(tk); i++ {
		if tk[i] <= tk[i-1] {
			t.Fatalf("write %d has token %d after %d: tokens must strictly increase", i, tk[i], tk[i-1])
		}
	}
	t.Logf("%d reads, %d writes, up to %d readers at once", o.reads, o.writeCount, o.peakReaders)
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

// Readers R1 and R2 hold, writer W queues, reader R3 comes after W: R3 must
// not overtake W.
func TestNoWriterStarvation(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	mk := func() *rwlock.RWLock { return newRW(t, locktest.Client(t, []string{srv.Addr()}), path) }
	r1, r2, w, r3, r4 := mk(), mk(), mk(), mk(), mk()
	for _, r := range []*rwlock.RWLock{r1, r2} {
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var order locktest.Log[string]
	wGot, r3Got := make(chan error, 1), make(chan error, 1)
	go func() {
		err := w.Lock(ctx)
		if err == nil {
			order.Add("W")
		}
		wGot <- err
	}()
	locktest.Queued(t, 3, r1.Participants)
	go func() {
		err := r3.RLock(ctx)
		if err == nil {
			order.Add("R3")
		}
		r3Got <- err
	}()
	locktest.Queued(t, 4, r1.Participants)
	time.Sleep(200 * time.Millisecond)
	if got := order.Items(); len(got) != 0 {
		t.Fatalf("%v acquired while R1 and R2 hold", got)
	}
	// Only readers hold, but a writer waits: a new reader is turned away.
	if err := r4.TryRLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryRLock behind a waiting writer = %v, want ErrLocked", err)
	}
	for _, r := range []*rwlock.RWLock{r1, r2} {
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-wGot; err != nil {
		t.Fatalf("writer: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := order.Items(); !slices.Equal(got, []string{"W"}) {
		t.Fatalf("while the writer holds, acquisitions are %v, want [W]", got)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-r3Got; err != nil {
		t.Fatalf("R3: %v", err)
	}
	if got := order.Items(); !slices.Equal(got, []string{"W", "R3"}) {
		t.Fatalf("acquisition order %v, want [W R3]", got)
	}
	if err := r3.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTry(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	a := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	b := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	raw := zktest.Connect(t, srv.Addr())

	if err := a.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryRLock(ctx); err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if err := b.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryLock while a reader holds = %v, want ErrLocked", err)
	}
	if err := a.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryRLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryRLock while a writer holds = %v, want ErrLocked", err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryLock while a writer holds = %v, want ErrLocked", err)
	}
	if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != a.Node() {
		t.Fatalf("after refused tries the directory holds %v, want only %s", left, a.Node())
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestReentrancy(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c1 := locktest.Client(t, []string{srv.Addr()})
	rw := newRW(t, c1, path)
	other := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 20*time.Second)

	// Read side.
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	rw.Reader().Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
	locktest.Settle(t, c1)
	before := c1.Stats()
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c1.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("reentrant RLock/RUnlock made %d round trips, want 0", got)
	}
	if err := rw.Reader().Err(); err != nil {
		t.Fatalf("still reading after RLock, RLock, RUnlock: %v", err)
	}
	if err := other.TryLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryLock while read-held = %v, want ErrLocked", err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Reader().Err(); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("RErr after balanced RUnlock = %v, want ErrNotHeld", err)
	}

	// Write side.
	wctx, err := rw.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rw.Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
	locktest.Settle(t, c1)
	before = c1.Stats()
	if err := rw.Lock(wctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c1.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("reentrant Lock/Unlock made %d round trips, want 0", got)
	}
	if err := other.TryRLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("TryRLock while write-held = %v, want ErrLocked", err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after full release: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Unlock without a hold, in either mode, is refused without I/O.
	locktest.Settle(t, c1)
	before = c1.Stats()
	if err := rw.Unlock(ctx); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("extra Unlock = %v, want ErrNotHeld", err)
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("extra RUnlock = %v, want ErrNotHeld", err)
	}
	if got := c1.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("unlock without hold made %d round trips, want 0", got)
	}
	if !locktest.Closed(rw.Done()) || !locktest.Closed(rw.Reader().Done()) {
		t.Fatal("Done/RDone of an idle handle should be closed")
	}
	if rw.Token() != 0 || rw.Reader().Token() != 0 || rw.Node() != "" || rw.Reader().Node() != "" {
		t.Fatal("an idle handle reports a token or a node")
	}
}

func TestUpgradeRefused(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c := locktest.Client(t, []string{srv.Addr()})
	rw := newRW(t, c, path)
	ctx, err := rw.REnter(locktest.Ctx(t, 20*time.Second)) // carries the read hold
	if err != nil {
		t.Fatal(err)
	}
	rw.Reader().Done() // asked once, the hold arms its own watch now (a read), not inside the call counted below
	locktest.Settle(t, c)
	before := c.Stats()
	start := time.Now()
	for _, lock := range []func(context.Context) error{rw.Lock, rw.TryLock} {
		err := lock(ctx)
		if !errors.Is(err, rwlock.ErrUpgrade) || !errors.Is(err, rwlock.ErrNotAcquired) {
			t.Fatalf("upgrade = %v, want ErrUpgrade and ErrNotAcquired", err)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refusing the upgrade took %v", took)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("refused upgrade made %d round trips, want 0", got)
	}
	if err := rw.Err(); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("Err after refused upgrade = %v, want ErrNotHeld", err)
	}
	if err := rw.Reader().Err(); err != nil {
		t.Fatalf("the read lock suffered from the refused upgrade: %v", err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Lock(ctx); err != nil {
		t.Fatalf("Lock after RUnlock: %v", err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Lock, RLock, Unlock leaves a real read node: other readers join it,
// writers wait for it.
func TestDowngrade(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	raw := zktest.Connect(t, srv.Addr())
	rw := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	reader := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	writer := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)

	ctx, err := rw.Enter(ctx) // carries the write hold: RLock downgrades
	if err != nil {
		t.Fatal(err)
	}
	wnode, wtoken := rw.Node(), rw.Token()
	if err := rw.RLock(ctx); err != nil {
		t.Fatalf("RLock while writing: %v", err)
	}
	if !strings.Contains(rw.Reader().Node(), rwlock.ReadLockName) || rw.Reader().Token() <= wtoken {
		t.Fatalf("downgrade read node %q token %d: want a read node after the write node (token %d)", rw.Reader().Node(), rw.Reader().Token(), wtoken)
	}
	if err := reader.TryRLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("another reader while the write is held = %v, want ErrLocked", err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Err(); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("Err after Unlock = %v, want ErrNotHeld", err)
	}
	if err := rw.Reader().Err(); err != nil {
		t.Fatalf("read hold after downgrade: %v", err)
	}
	if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != rw.Reader().Node() || left[0] == wnode {
		t.Fatalf("after the downgrade the directory holds %v, want only the read node %s", left, rw.Reader().Node())
	}
	if err := reader.TryRLock(ctx); err != nil {
		t.Fatalf("another reader after the downgrade: %v", err)
	}
	if err := writer.TryLock(ctx); !errors.Is(err, rwlock.ErrLocked) {
		t.Fatalf("a writer after the downgrade = %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() { got <- writer.Lock(ctx) }()
	locktest.Queued(t, 3, rw.Participants)
	if err := reader.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("writer got in while the downgraded reader holds (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("writer after the downgraded reader left: %v", err)
	}
	if err := writer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A writer queued behind the write holder before it downgrades: a read node
// queued after that writer could not keep it out, so the read hold rides on
// the write node, which stays until the last RUnlock.
func TestDowngradeBehindQueuedWriter(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	raw := zktest.Connect(t, srv.Addr())
	rw := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	writer := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)

	wctx, err := rw.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wnode := rw.Node()
	got := make(chan error, 1)
	go func() { got <- writer.Lock(ctx) }()
	locktest.Queued(t, 2, rw.Participants)
	if err := rw.RLock(wctx); err != nil {
		t.Fatalf("RLock while writing, a writer queued: %v", err)
	}
	if rw.Reader().Node() != wnode {
		t.Fatalf("read hold rests on %q, want the write node %q", rw.Reader().Node(), wnode)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Reader().Err(); err != nil {
		t.Fatalf("read hold after Unlock: %v", err)
	}
	if p, _ := rw.Participants(ctx); len(p) != 2 || p[0].Node != wnode {
		t.Fatalf("queue %+v, want the write node still first, then the writer", p)
	}
	select {
	case err := <-got:
		t.Fatalf("queued writer got in while the downgraded reader holds (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("queued writer: %v", err)
	}
	if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != writer.Node() {
		t.Fatalf("directory holds %v, want only the writer's %s", left, writer.Node())
	}
	if err := writer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutAndCancelCleanUp(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, tc := range []struct {
		name        string
		holderWrite bool // the holder writes (else reads)
		waiterWrite bool
		cancel      bool // cancel (else deadline)
	}{
		{"read_behind_writer_deadline", true, false, false},
		{"read_behind_writer_cancel", true, false, true},
		{"write_behind_reader_deadline", false, true, false},
		{"write_behind_writer_cancel", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := zktest.UniquePath(t)
			holder := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
			lock, node := holder.RLock, holder.Reader().Node
			if tc.holderWrite {
				lock, node = holder.Lock, holder.Node
			}
			if err := lock(locktest.Ctx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			waiter := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
			var ctx context.Context
			want := context.DeadlineExceeded
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
				want = context.Canceled
			} else {
				ctx = locktest.Ctx(t, 200*time.Millisecond)
			}
			start := time.Now()
			var err error
			if tc.waiterWrite {
				err = waiter.Lock(ctx)
			} else {
				err = waiter.RLock(ctx)
			}
			if !errors.Is(err, want) || !errors.Is(err, rwlock.ErrNotAcquired) {
				t.Fatalf("got %v, want %v and ErrNotAcquired", err, want)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("returned %v after its 200ms context", took)
			}
			if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != node() {
				t.Fatalf("after the failed acquire the directory holds %v, want only the holder's %s", left, node())
			}
			if waiter.Err() == nil || waiter.Reader().Err() == nil {
				t.Fatal("the waiter holds something after its failure")
			}
			unlock := holder.RUnlock
			if tc.holderWrite {
				unlock = holder.Unlock
			}
			if err := unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Queue W1 (holds), R1, R2, W2, R3, each on its own client. Releasing W1
// wakes exactly R1 and R2; W2 (watching R2) and R3 (watching W2) sleep on.
func TestHerdFree(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	names := []string{"W1", "R1", "R2", "W2", "R3"}
	clients := make([]*recipe.Client, len(names))
	locks := make([]*rwlock.RWLock, len(names))
	for i := range names {
		clients[i] = locktest.Client(t, []string{srv.Addr()})
		locks[i] = newRW(t, clients[i], path)
	}
	wakeups := func() (n int64) {
		for _, c := range clients {
			n += c.Stats().Wakeups
		}
		return n
	}
	if err := locks[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan string, len(names))
	for i := 1; i < len(names); i++ {
		go func() {
			var err error
			if strings.HasPrefix(names[i], "W") {
				err = locks[i].Lock(ctx)
			} else {
				err = locks[i].RLock(ctx)
			}
			if err != nil {
				t.Errorf("%s: %v", names[i], err)
				acquired <- "error"
				return
			}
			acquired <- names[i]
		}()
		locktest.Queued(t, i+1, locks[0].Participants)
	}
	p, err := locks[0].Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, q := range p {
		modes = append(modes, q.Mode.String())
	}
	if want := []string{"write", "read", "read", "write", "read"}; !slices.Equal(modes, want) {
		t.Fatalf("queue modes %v, want %v", modes, want)
	}
	// Watches are armed right after the node is listed; give the last ones
	// a moment.
	time.Sleep(200 * time.Millisecond)
	before := wakeups()
	if err := locks[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		select {
		case n := <-acquired:
			got = append(got, n)
		case <-ctx.Done():
			t.Fatal("readers did not acquire after the write was released")
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"R1", "R2"}) {
		t.Fatalf("after releasing W1, %v acquired, want R1 and R2", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := wakeups() - before; n != 2 {
		t.Fatalf("releasing W1 woke %d waiters, want exactly 2 (R1, R2)", n)
	}
	select {
	case n := <-acquired:
		t.Fatalf("%s acquired while R1 and R2 hold", n)
	default:
	}
	for _, i := range []int{1, 2} {
		if err := locks[i].RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := <-acquired; n != "W2" {
		t.Fatalf("after the readers left %s acquired, want W2", n)
	}
	if err := locks[3].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-acquired; n != "R3" {
		t.Fatalf("after W2 left %s acquired, want R3", n)
	}
	if err := locks[4].RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCuratorNames(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	raw := zktest.Connect(t, srv.Addr())
	r := newRW(t, locktest.Client(t, []string{srv.Addr()}), path, rwlock.WithCuratorNames())
	w := newRW(t, locktest.Client(t, []string{srv.Addr()}), path, rwlock.WithCuratorNames())
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	locktest.Queued(t, 2, r.Participants)
	uuid := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	readRE := regexp.MustCompile(`^_c_` + uuid + `-__READ__\d{10}$`)
	writeRE := regexp.MustCompile(`^_c_` + uuid + `-__WRIT__\d{10}$`)
	left := locktest.Children(t, raw, path)
	var reads, writes int
	for _, n := range left {
		switch {
		case readRE.MatchString(n):
			reads++
		case writeRE.MatchString(n):
			writes++
		default:
			t.Errorf("node %q is not in Curator's format", n)
		}
	}
	if reads != 1 || writes != 1 {
		t.Fatalf("nodes %v: want one __READ__ and one __WRIT__", left)
	}
	p, err := r.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p[0].Mode != rwlock.Read || p[1].Mode != rwlock.Write || p[0].LockName != rwlock.CuratorReadLockName {
		t.Fatalf("participants %+v: want the reader, then the writer", p)
	}
	// A handle using the default names does not see this queue.
	other := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	if p, err := other.Participants(ctx); err != nil || len(p) != 0 {
		t.Fatalf("default-named handle sees %+v (%v)", p, err)
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParticipants(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 20*time.Second)
	var rws []*rwlock.RWLock
	for i := range 3 {
		rws = append(rws, newRW(t, locktest.Client(t, []string{srv.Addr()}), path, rwlock.WithData(fmt.Appendf(nil, "p%d", i))))
	}
	if err := rws[0].RLock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	go func() { got <- rws[1].Lock(ctx) }()
	locktest.Queued(t, 2, rws[0].Participants)
	go func() { got <- rws[2].RLock(ctx) }()
	locktest.Queued(t, 3, rws[0].Participants)
	p, err := rws[0].Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		data string
		mode rwlock.Mode
	}{{"p0", rwlock.Read}, {"p1", rwlock.Write}, {"p2", rwlock.Read}}
	for i, w := range want {
		if string(p[i].Data) != w.data || p[i].Mode != w.mode {
			t.Fatalf("participant %d = %q %v, want %q %v", i, p[i].Data, p[i].Mode, w.data, w.mode)
		}
	}
	if p[0].Node != rws[0].Reader().Node() || p[0].Token != rws[0].Reader().Token() {
		t.Fatalf("head %+v is not the reader %s", p[0], rws[0].Reader().Node())
	}
	if !slices.IsSortedFunc(p, func(a, b rwlock.Participant) int { return int(a.Sequence - b.Sequence) }) {
		t.Fatalf("participants not in queue order: %+v", p)
	}
	if err := rws[0].RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := rws[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := rws[2].RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNodeDeletedWhileHeld(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	raw := zktest.Connect(t, srv.Addr())
	rw := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 10*time.Second)
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(path+"/"+rw.Reader().Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rw.Reader().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("RDone not closed after the read node was deleted")
	}
	if err := rw.Reader().Err(); !errors.Is(err, rwlock.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("RErr = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if err := rw.RLock(ctx); !errors.Is(err, rwlock.ErrLost) || !errors.Is(err, rwlock.ErrNotAcquired) {
		t.Fatalf("RLock on a lost read lock = %v, want ErrLost and ErrNotAcquired", err)
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, rwlock.ErrLost) {
		t.Fatalf("RUnlock after loss = %v, want ErrLost", err)
	}
	if err := rw.Lock(ctx); err != nil {
		t.Fatalf("Lock after loss and RUnlock: %v", err)
	}
	if err := raw.Delete(path+"/"+rw.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rw.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the write node was deleted")
	}
	if err := rw.Err(); !errors.Is(err, rwlock.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", err)
	}
	if err := rw.Unlock(ctx); !errors.Is(err, rwlock.ErrLost) {
		t.Fatalf("Unlock after loss = %v, want ErrLost", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	locktest.Settle(t, c)
	before := c.Stats()
	for _, p := range []string{"", "locks/a", "/locks/a/", "/locks//a", "/locks/./a", "/locks/../a", "/", "/zookeeper/x", "/a\x00b"} {
		if _, err := rwlock.New(c, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	if _, err := rwlock.New(nil, "/locks/a"); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil client) = %v, want ErrInvalidArgument", err)
	}
	if _, err := rwlock.New(c, "/locks/a", nil); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil option) = %v, want ErrInvalidArgument", err)
	}
	rw := newRW(t, c, zktest.UniquePath(t))
	for name, f := range map[string]func(context.Context) error{
		"RLock": rw.RLock, "TryRLock": rw.TryRLock, "RUnlock": rw.RUnlock,
		"Lock": rw.Lock, "TryLock": rw.TryLock, "Unlock": rw.Unlock,
	} {
		if err := f(nil); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s(nil) = %v, want ErrInvalidArgument", name, err)
		}
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := rw.Participants(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Participants(nil) = %v, want ErrInvalidArgument", err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("bad input caused %d round trips, want 0", got)
	}
}

// Many goroutines share one handle in both modes: the counts stay
// consistent under the race detector, and the lock is free at the end.
func TestSharedHandle(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	rw := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 30*time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				if g%2 == 0 {
					if err := rw.RLock(ctx); err != nil {
						t.Error(err)
						return
					}
					_, _ = rw.Reader().Token(), rw.Reader().Err()
					if err := rw.RUnlock(ctx); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				// A writer goroutine on a handle other goroutines read
				// through may be refused as an upgrade: that is the rule.
				err := rw.Lock(ctx)
				if errors.Is(err, rwlock.ErrUpgrade) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = rw.Token(), rw.Err()
				if err := rw.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := rw.Err(); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("after balanced use, Err = %v", err)
	}
	if err := rw.Reader().Err(); !errors.Is(err, rwlock.ErrNotHeld) {
		t.Fatalf("after balanced use, RErr = %v", err)
	}
	other := newRW(t, locktest.Client(t, []string{srv.Addr()}), path)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("lock not free after shared use: %v", err)
	}
	_ = other.Unlock(ctx)
}
