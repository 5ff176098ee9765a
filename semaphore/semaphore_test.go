package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

func newSem(t testing.TB, c *recipe.Client, path string, maxLeases int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(c, path, maxLeases, opts...)
	if err != nil {
		t.Fatalf("semaphore.New(%q, %d): %v", path, maxLeases, err)
	}
	return s
}

func acquire(t testing.TB, s *semaphore.Semaphore) *semaphore.Lease {
	t.Helper()
	l, err := s.Acquire(locktest.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

func release(t testing.TB, l *semaphore.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func nodes(ls ...*semaphore.Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Node())
	}
	slices.Sort(out)
	return out
}

func seq(t testing.TB, node string) int64 {
	t.Helper()
	n, ok := driver.Sequence(node, semaphore.LockName)
	if !ok {
		t.Fatalf("node %q has no sequence number", node)
	}
	return n
}

// 8 sessions x 100 cycles with 3 leases: never more than 3 holders, and 3 at
// once is reached; tokens are unique; nothing is left behind.
func TestAtMostMaxLeases(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const sessions, cycles, leases = 8, 100, 3
	overlap := locktest.Overlap{Max: leases}
	var tokens locktest.Log[int64]
	var wg sync.WaitGroup
	for i := range sessions {
		c := locktest.Client(t, []string{srv.Addr()})
		s := newSem(t, c, path, leases, semaphore.WithData(fmt.Appendf(nil, "worker-%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cycles {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				l, err := s.Acquire(ctx)
				cancel()
				if err != nil {
					t.Errorf("session %d cycle %d: %v", i, j, err)
					return
				}
				overlap.Enter()
				tokens.Add(l.Token())
				time.Sleep(time.Millisecond)
				overlap.Exit()
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("session %d cycle %d: release: %v", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if v := overlap.Violations(); v != 0 {
		t.Fatalf("more than %d holders at once, %d times (peak %d)", leases, v, overlap.Peak())
	}
	if p := overlap.Peak(); p != leases {
		t.Fatalf("peak of %d holders at once, want %d: the leases were not used", p, leases)
	}
	tok := tokens.Items()
	slices.Sort(tok)
	if len(tok) != sessions*cycles || len(slices.Compact(tok)) != sessions*cycles {
		t.Fatalf("got %d grants with %d distinct tokens, want %d", len(tok), len(slices.Compact(tok)), sessions*cycles)
	}
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

// Two leases held by A then B, waiters C then D. When B (not the head of the
// queue) releases, C is granted while A still holds, and D is not; when A
// releases, D is granted.
func TestLivenessAndFairness(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	var sems []*semaphore.Semaphore
	for _, name := range []string{"A", "B", "C", "D"} {
		sems = append(sems, newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 2, semaphore.WithData([]byte(name))))
	}
	ctx := locktest.Ctx(t, 30*time.Second)
	a := acquire(t, sems[0])
	b := acquire(t, sems[1])
	type result struct {
		l   *semaphore.Lease
		err error
	}
	got := []chan result{make(chan result, 1), make(chan result, 1)}
	for i, s := range sems[2:] {
		go func() {
			l, err := s.Acquire(ctx)
			got[i] <- result{l, err}
		}()
		locktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
			p, err := s.Participants(ctx)
			return err == nil && len(p) == 3+i
		})
	}
	p, err := sems[0].Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, x := range p {
		order = append(order, string(x.Data))
	}
	if !slices.Equal(order, []string{"A", "B", "C", "D"}) {
		t.Fatalf("queue %v, want A B C D", order)
	}
	select {
	case r := <-got[0]:
		t.Fatalf("C acquired while both leases were held: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}

	released := time.Now()
	release(t, b)
	var c result
	select {
	case c = <-got[0]:
	case <-time.After(5 * time.Second):
		t.Fatal("B released, but C did not get the free lease within 5s (A still holds)")
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	t.Logf("C granted %v after B's release", time.Since(released).Round(time.Millisecond))
	if err := a.Err(); err != nil {
		t.Fatalf("A should still hold: %v", err)
	}
	select {
	case r := <-got[1]:
		t.Fatalf("D acquired with A and C holding: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}

	release(t, a)
	var d result
	select {
	case d = <-got[1]:
	case <-time.After(5 * time.Second):
		t.Fatal("A released, but D did not get the free lease within 5s")
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	if d.l.Token() <= c.l.Token() {
		t.Fatalf("D's token %d not above C's %d", d.l.Token(), c.l.Token())
	}
	release(t, c.l)
	release(t, d.l)
}

// With 2 leases, 2 holders and 6 waiters on 3 clients, each release wakes at
// most 2 waiters and grants exactly one lease.
func TestReleaseWakesAtMostMaxLeases(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const leases, waiters, clients = 2, 6, 3
	ctx := locktest.Ctx(t, 60*time.Second)
	var holders []*semaphore.Lease
	for range leases {
		holders = append(holders, acquire(t, newSem(t, locktest.Client(t, []string{srv.Addr()}), path, leases)))
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
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range waiters {
		s := newSem(t, cs[i%clients], path, leases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Acquire(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				acquired <- -1
				return
			}
			acquired <- i
			<-done
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("waiter %d: release: %v", i, err)
			}
		}()
	}
	s0 := newSem(t, cs[0], path, leases)
	locktest.Eventually(t, 20*time.Second, "all waiters queued", func() bool {
		p, err := s0.Participants(ctx)
		return err == nil && len(p) == leases+waiters
	})
	// Watches are armed right after the node is listed; give the last ones
	// a moment.
	time.Sleep(200 * time.Millisecond)

	// Release the second holder first (watched by two waiters), then the
	// first (watched by one).
	for _, h := range []*semaphore.Lease{holders[1], holders[0]} {
		before := wakeups()
		release(t, h)
		select {
		case i := <-acquired:
			if i < 0 {
				t.FailNow()
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no waiter acquired the released lease within 5s")
		}
		time.Sleep(300 * time.Millisecond)
		woke := wakeups() - before
		t.Logf("one release woke %d waiters", woke)
		if woke < 1 || woke > leases {
			t.Fatalf("one release woke %d waiters, want 1..%d", woke, leases)
		}
		if n := len(acquired); n != 0 {
			t.Fatalf("one release granted %d leases", 1+n)
		}
	}
	close(done)
	wg.Wait()
}

// AcquireN's nodes are consecutive in the queue (their sequence numbers
// follow each other, so no other create or delete happened in the directory
// between them), even while other clients acquire and release single leases
// as fast as they can; and the bound holds with them counted as n holders.
func TestAcquireNAtomic(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const leases, n, rounds, singles = 4, 3, 20, 3
	overlap := locktest.Overlap{Max: leases}
	x := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, leases)
	y := acquire(t, newSem(t, locktest.Client(t, []string{srv.Addr()}), path, leases))
	overlap.Enter() // y

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var singleGrants locktest.Log[int64]
	for i := range singles {
		s := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, leases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := s.Acquire(ctx)
				cancel()
				if err != nil {
					t.Errorf("single %d: %v", i, err)
					return
				}
				overlap.Enter()
				singleGrants.Add(l.Token())
				time.Sleep(time.Millisecond)
				overlap.Exit()
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("single %d: release: %v", i, err)
					return
				}
			}
		}()
	}
	raw := zktest.Connect(t, srv.Addr())
	for r := range rounds {
		ls, err := x.AcquireN(locktest.Ctx(t, 30*time.Second), n)
		if err != nil {
			t.Fatalf("round %d: AcquireN(%d): %v", r, n, err)
		}
		if len(ls) != n {
			t.Fatalf("round %d: AcquireN(%d) returned %d leases", r, n, len(ls))
		}
		for range ls {
			overlap.Enter()
		}
		for i := 1; i < n; i++ {
			if a, b := seq(t, ls[i-1].Node()), seq(t, ls[i].Node()); b != a+1 {
				t.Fatalf("round %d: AcquireN's nodes have sequences %d and %d: not consecutive", r, a, b)
			}
		}
		for i, l := range ls {
			if err := l.Err(); err != nil {
				t.Fatalf("round %d: lease %d not in force: %v", r, i, err)
			}
		}
		// While x holds 3 and y 1, the directory's holders are exactly those.
		names := driver.Sort(locktest.Children(t, raw, path), semaphore.LockName)
		if len(names) < leases || !slices.Equal(slices.Sorted(slices.Values(names[:leases])), nodes(append([]*semaphore.Lease{y}, ls...)...)) {
			t.Fatalf("round %d: the first %d nodes are %v, want y's and x's %v", r, leases, names[:min(leases, len(names))], nodes(append([]*semaphore.Lease{y}, ls...)...))
		}
		time.Sleep(5 * time.Millisecond)
		for _, l := range ls {
			overlap.Exit()
			release(t, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	overlap.Exit()
	release(t, y)
	if v := overlap.Violations(); v != 0 {
		t.Fatalf("more than %d leases held at once, %d times", leases, v)
	}
	if len(singleGrants.Items()) == 0 {
		t.Fatal("the single acquirers got no lease: the test proved nothing")
	}
	t.Logf("%d rounds of AcquireN(%d) among %d single-lease grants", rounds, n, len(singleGrants.Items()))
}

// A timed-out AcquireN returns an error wrapping context.DeadlineExceeded and
// ErrNotAcquired and leaves none of its nodes behind; so does Acquire.
func TestAcquireTimeoutCleansUp(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	const leases = 4
	var held []*semaphore.Lease
	for range 2 {
		ls, err := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, leases).AcquireN(locktest.Ctx(t, 10*time.Second), 2)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls...)
	}
	raw := zktest.Connect(t, srv.Addr())
	c := locktest.Client(t, []string{srv.Addr()})
	x := newSem(t, c, path, leases)
	for _, mode := range []string{"AcquireN", "Acquire", "cancel"} {
		var err error
		start := time.Now()
		locktest.Settle(t, c)
		before := c.Stats()
		switch mode {
		case "AcquireN":
			_, err = x.AcquireN(locktest.Ctx(t, 200*time.Millisecond), 2)
		case "Acquire":
			_, err = x.Acquire(locktest.Ctx(t, 200*time.Millisecond))
		case "cancel":
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			_, err = x.Acquire(ctx)
		}
		want := context.DeadlineExceeded
		if mode == "cancel" {
			want = context.Canceled
		}
		if !errors.Is(err, want) || !errors.Is(err, semaphore.ErrNotAcquired) {
			t.Fatalf("%s with every lease held: got %v, want %v and ErrNotAcquired", mode, err, want)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("%s returned %v after its 200ms context", mode, took)
		}
		if left := locktest.Children(t, raw, path); !slices.Equal(left, nodes(held...)) {
			t.Fatalf("after the failed %s the directory holds %v, want only the holders' %v", mode, left, nodes(held...))
		}
		st := c.Stats().Sub(before)
		t.Logf("failed %s: %d creates, %d deletes: %v", mode, st.Creates, st.Deletes, err)
	}
	for _, l := range held {
		release(t, l)
	}
}

// A client with another number of leases fails with ErrMaxLeasesMismatch,
// and its node is gone afterwards; clients with the right number go on.
func TestMaxLeasesMismatch(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	raw := zktest.Connect(t, srv.Addr())
	s3 := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 3)
	l := acquire(t, s3)
	c := locktest.Client(t, []string{srv.Addr()})
	for _, max := range []int{2, 5} {
		other := newSem(t, c, path, max)
		calls := map[string]func(context.Context) error{
			"Acquire":    func(ctx context.Context) error { _, err := other.Acquire(ctx); return err },
			"TryAcquire": func(ctx context.Context) error { _, err := other.TryAcquire(ctx); return err },
			"AcquireN":   func(ctx context.Context) error { _, err := other.AcquireN(ctx, 2); return err },
		}
		for name, call := range calls {
			err := call(locktest.Ctx(t, 5*time.Second))
			if !errors.Is(err, semaphore.ErrMaxLeasesMismatch) || !errors.Is(err, recipe.ErrMismatch) || !errors.Is(err, semaphore.ErrNotAcquired) {
				t.Fatalf("%s with %d leases on a path set up with 3: got %v, want ErrMaxLeasesMismatch, recipe.ErrMismatch and ErrNotAcquired", name, max, err)
			}
			if left := locktest.Children(t, raw, path); !slices.Equal(left, []string{l.Node()}) {
				t.Fatalf("after the refused %s the directory holds %v, want only %s", name, left, l.Node())
			}
			if max == 2 && name == "Acquire" {
				t.Log(err)
			}
		}
	}
	data, _, err := raw.Get(path)
	if err != nil || string(data) != "maxLeases=3" {
		t.Fatalf("directory data %q (%v), want maxLeases=3", data, err)
	}
	l2 := acquire(t, newSem(t, c, path, 3))
	release(t, l2)
	release(t, l)
}

// Successive grants get strictly increasing tokens: one lease shared by 4
// sessions, and sequential acquires on a semaphore with several leases.
func TestTokensIncrease(t *testing.T) {
	srv := zktest.Shared(t)
	t.Run("one lease", func(t *testing.T) {
		path := zktest.UniquePath(t)
		const sessions, cycles = 4, 25
		var overlap locktest.Overlap
		type grant struct{ seq, token int64 }
		var grants locktest.Log[grant]
		var wg sync.WaitGroup
		for range sessions {
			s := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range cycles {
					l, err := s.Acquire(locktest.Ctx(t, 30*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					overlap.Enter()
					n, _ := driver.Sequence(l.Node(), semaphore.LockName)
					grants.Add(grant{n, l.Token()})
					overlap.Exit()
					if err := l.Release(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if v := overlap.Violations(); v != 0 {
			t.Fatalf("two holders of the single lease, %d times", v)
		}
		g := grants.Items()
		if len(g) != sessions*cycles {
			t.Fatalf("%d grants, want %d", len(g), sessions*cycles)
		}
		for i := 1; i < len(g); i++ {
			if g[i].seq <= g[i-1].seq {
				t.Fatalf("grant %d has sequence %d after %d: not FIFO", i, g[i].seq, g[i-1].seq)
			}
			if g[i].token <= g[i-1].token {
				t.Fatalf("grant %d has token %d after %d: not increasing", i, g[i].token, g[i-1].token)
			}
		}
	})
	t.Run("sequential", func(t *testing.T) {
		path := zktest.UniquePath(t)
		s := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 3)
		var last int64
		for i := range 10 {
			l := acquire(t, s)
			if l.Token() <= last {
				t.Fatalf("acquire %d: token %d not above %d", i, l.Token(), last)
			}
			last = l.Token()
			release(t, l)
		}
	})
}

// The requests an uncontended acquire makes.
func TestRoundTrips(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c := locktest.Client(t, []string{srv.Addr()})
	s := newSem(t, c, path, 3)
	measure := func(what string, f func()) recipe.Stats {
		t.Helper()
		locktest.Settle(t, c)
		before := c.Stats()
		f()
		d := c.Stats().Sub(before)
		t.Logf("%-34s %2d requests: %d creates, %d reads, %d lists, %d deletes",
			what, d.RoundTrips(), d.Creates, d.Reads, d.Lists, d.Deletes)
		return d
	}
	var l *semaphore.Lease
	measure("first Acquire (creates the path)", func() { l = acquire(t, s) })
	// A child that is no contender keeps the directory from being reaped
	// as an empty container while the measurements settle.
	if _, err := zktest.Connect(t, srv.Addr()).Create(path+"/keep", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	measure("Release", func() { release(t, l) })
	d := measure("uncontended Acquire", func() { l = acquire(t, s) })
	// The token comes with the create's reply; the read of the path's
	// parameters goes with the listing. The hold arms the watch on its
	// own node right after Acquire returns, which may or may not be
	// counted yet.
	if d.Creates != 1 || d.Reads < 1 || d.Reads > 2 || d.Lists != 1 || d.Deletes != 0 {
		t.Fatalf("uncontended Acquire: %+v, want 1 create, 1 list, 1 read (path) and perhaps the hold's watch", d)
	}
	d = measure("Release", func() { release(t, l) })
	if d.Deletes != 1 || d.Creates+d.Lists != 0 || d.Reads > 1 {
		t.Fatalf("Release: %+v, want one delete (and perhaps the hold's watch)", d)
	}
	d = measure("uncontended TryAcquire", func() {
		var err error
		if l, err = s.TryAcquire(locktest.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	if d.RoundTrips() < 3 || d.RoundTrips() > 4 {
		t.Fatalf("uncontended TryAcquire: %+v, want 3 requests and perhaps the hold's watch", d)
	}
	release(t, l)
	var ls []*semaphore.Lease
	d = measure("uncontended AcquireN(3)", func() {
		var err error
		if ls, err = s.AcquireN(locktest.Ctx(t, 10*time.Second), 3); err != nil {
			t.Fatal(err)
		}
	})
	if d.Creates != 1 || d.Lists != 1 || d.Reads != 2 || d.RoundTrips() != 4 {
		t.Fatalf("uncontended AcquireN(3): %+v, want 1 transaction, 1 listing and 2 reads (a node, the directory's data) for all 3", d)
	}
	measure("TryAcquire, all leases taken", func() {
		if _, err := s.TryAcquire(locktest.Ctx(t, 10*time.Second)); !errors.Is(err, semaphore.ErrNoLease) {
			t.Fatalf("TryAcquire with every lease taken: %v", err)
		}
	})
	for _, l := range ls {
		release(t, l)
	}
}

func TestLease(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	raw := zktest.Connect(t, srv.Addr())
	s := newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 2)
	ctx := locktest.Ctx(t, 20*time.Second)

	a, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire on a free semaphore: %v", err)
	}
	b := acquire(t, s) // one handle may hold several leases
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	_, err = newSem(t, locktest.Client(t, []string{srv.Addr()}), path, 2).TryAcquire(ctx)
	if !errors.Is(err, semaphore.ErrNoLease) || !errors.Is(err, recipe.ErrWouldBlock) || errors.Is(err, semaphore.ErrNotAcquired) {
		t.Fatalf("TryAcquire with both leases taken: got %v, want ErrNoLease (matching recipe.ErrWouldBlock) only", err)
	}
	if left := locktest.Children(t, raw, path); !slices.Equal(left, nodes(a, b)) {
		t.Fatalf("after the refused TryAcquire the directory holds %v, want %v", left, nodes(a, b))
	}

	release(t, a)
	if !locktest.Closed(a.Done()) {
		t.Fatal("Done not closed after Release")
	}
	if err := a.Err(); !errors.Is(err, semaphore.ErrNotHeld) {
		t.Fatalf("Err after Release = %v, want ErrNotHeld", err)
	}
	if err := a.Release(ctx); !errors.Is(err, semaphore.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}

	if err := raw.Delete(path+"/"+b.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	if err := b.Err(); !errors.Is(err, semaphore.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if err := b.Release(ctx); !errors.Is(err, semaphore.ErrLost) {
		t.Fatalf("Release after loss = %v, want ErrLost", err)
	}
	var nilLease *semaphore.Lease
	if err := nilLease.Release(ctx); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Fatalf("Release on a nil lease = %v", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	locktest.Settle(t, c)
	before := c.Stats()
	for _, p := range []string{"", "locks/a", "/locks/a/", "/locks//a", "/locks/./a", "/locks/../a", "/", "/zookeeper/x", "/a\x00b"} {
		if _, err := semaphore.New(c, p, 2); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	for _, n := range []int{0, -1} {
		if _, err := semaphore.New(c, "/locks/a", n); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("New(maxLeases %d) = %v, want ErrInvalidArgument", n, err)
		}
	}
	if _, err := semaphore.New(nil, "/locks/a", 2); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil client) = %v, want ErrInvalidArgument", err)
	}
	if _, err := semaphore.New(c, "/locks/a", 2, nil); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil option) = %v, want ErrInvalidArgument", err)
	}
	s := newSem(t, c, zktest.UniquePath(t), 3)
	ctx := locktest.Ctx(t, 5*time.Second)
	for _, n := range []int{0, -1, 4} {
		if _, err := s.AcquireN(ctx, n); !errors.Is(err, recipe.ErrInvalidArgument) || !errors.Is(err, semaphore.ErrNotAcquired) {
			t.Errorf("AcquireN(%d) with 3 leases = %v, want ErrInvalidArgument and ErrNotAcquired", n, err)
		}
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := s.Acquire(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Acquire(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := s.TryAcquire(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("TryAcquire(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := s.AcquireN(nil, 2); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("AcquireN(nil, 2) = %v", err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("bad input caused %d round trips, want 0", got)
	}
}

// Through a proxy that cuts the connection right after every 5th create is
// forwarded (the server applies it, the client never sees the reply), 4
// sessions x 30 cycles on 2 leases complete with no error, never more than
// 2 holders and no orphan node.
func TestLostCreateReply(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.CutAfterCreates(5)
	const sessions, cycles, leases = 4, 30, 2
	overlap := locktest.Overlap{Max: leases}
	var wg sync.WaitGroup
	var clients []*recipe.Client
	for i := range sessions {
		// The address is listed twice so that go-zookeeper reconnects at
		// once, as it would to another ensemble member.
		c := locktest.Client(t, []string{proxy.Addr(), proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
		clients = append(clients, c)
		s := newSem(t, c, path, leases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cycles {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				l, err := s.Acquire(ctx)
				cancel()
				if err != nil {
					t.Errorf("session %d cycle %d: Acquire: %v", i, j, err)
					return
				}
				overlap.Enter()
				overlap.Exit()
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("session %d cycle %d: Release: %v", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := overlap.Violations(); v != 0 {
		t.Fatalf("more than %d holders at once, %d times", leases, v)
	}
	st := proxy.Stats()
	var recovered int64
	for _, c := range clients {
		recovered += c.Stats().Recovered
	}
	if st.Cuts == 0 || recovered == 0 {
		t.Fatalf("proxy %+v, %d nodes recovered by UUID: the test proved nothing", st, recovered)
	}
	t.Logf("proxy: %+v; nodes recovered by UUID: %d", st, recovered)
	raw := zktest.Connect(t, srv.Addr())
	if left := locktest.Children(t, raw, path); len(left) != 0 {
		t.Fatalf("orphan nodes while the clients are still open: %v", left)
	}
}
