package recipe_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The bounds for a client with a 2 s session and the default retry policy
// (docs/failure-model.md): a hold ended by an expiry is taken again within
// retakeBound of the client telling its holder, and an election's Run
// leads again within rerunBound of the expiry.
const (
	expirySession = 2 * time.Second
	retakeBound   = 2 * time.Second
	rerunBound    = 4 * time.Second
)

// expiryRecipes builds, on one client, the acquirers a user takes: the
// mutex, both sides of a read/write lock, a semaphore and an election.
func expiryRecipes(t *testing.T, c *recipe.Client, path string) map[string]recipe.Acquirer {
	t.Helper()
	m, err := mutex.New(c, path+"/mutex")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := rwlock.New(c, path+"/rw")
	if err != nil {
		t.Fatal(err)
	}
	s, err := semaphore.New(c, path+"/sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	e, err := leader.New(c, path+"/leader")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]recipe.Acquirer{"mutex": m, "read": rw.Reader(), "write": rw.Writer(), "semaphore": s, "leader": e}
}

// After its session expires, a client takes every recipe again, within
// retakeBound of being told, and its Close leaves no goroutine and no
// descriptor behind.
func TestRetakeAfterExpiry(t *testing.T) {
	srv := zktest.Shared(t)
	fds, gs := openFDs(t), runtime.NumGoroutine()
	proxy := srv.Proxy(t)
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(expirySession))
	path := zktest.UniquePath(t)
	recipes := expiryRecipes(t, c, path)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range recipes {
			if !yield(n) {
				return
			}
		}
	})
	took := map[string][]time.Duration{}
	for round := range 3 {
		for _, name := range names {
			a := recipes[name]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			h, err := a.Take(ctx, true)
			cancel()
			if err != nil {
				t.Fatalf("round %d: %s: take: %v", round, name, err)
			}
			if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
				t.Fatalf("expire: %d sessions, %v", n, err)
			}
			select {
			case <-h.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: %s: not told of the expiry within 10s", round, name)
			}
			told := time.Now()
			if !errors.Is(h.Err(), recipe.ErrLost) {
				t.Fatalf("round %d: %s: Err %v, want ErrLost", round, name, h.Err())
			}
			h.Release(context.Background()) // ErrNotHeld: lost

			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
			h, err = a.Take(ctx, true)
			cancel()
			if err != nil {
				t.Fatalf("round %d: %s: take again after the expiry: %v (after %v)", round, name, err, time.Since(told).Round(time.Millisecond))
			}
			d := time.Since(told)
			took[name] = append(took[name], d)
			if d > retakeBound {
				t.Errorf("round %d: %s: taken again %v after the holder was told, bound %v", round, name, d.Round(time.Millisecond), retakeBound)
			}
			if err := h.Release(context.Background()); err != nil {
				t.Fatalf("round %d: %s: release: %v", round, name, err)
			}
		}
	}
	for _, name := range names {
		d := took[name]
		slices.Sort(d)
		t.Logf("%s: re-take after the holder was told, %d takes: p50 %v, max %v", name, len(d),
			d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	closeLeavesNothing(t, c, fds, gs)
}

// leader.Run leads again within rerunBound of an expiry of its session.
func TestRunLeadsAgainAfterExpiry(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(expirySession))
	e, err := leader.New(c, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}
	terms := make(chan time.Time, 16)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- e.Run(ctx, func(ctx context.Context) error {
			terms <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	var took []time.Duration
	for round := range 3 {
		select {
		case <-terms:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Run did not lead within 20s", round)
		}
		expired := time.Now()
		if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
			t.Fatalf("expire: %d sessions, %v", n, err)
		}
		select {
		case at := <-terms:
			d := at.Sub(expired)
			took = append(took, d)
			if d > rerunBound {
				t.Errorf("round %d: Run led again %v after the expiry, bound %v", round, d.Round(time.Millisecond), rerunBound)
			}
			terms <- at // the next round's term
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Run did not lead again within 20s of the expiry", round)
		}
	}
	slices.Sort(took)
	t.Logf("Run leading again after the expiry: p50 %v, max %v", took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// A Lock with no deadline that waits in line while its session expires
// returns: it takes the lock once the holder lets go.
func TestWaitThroughExpiry(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	holder, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
	if err != nil {
		t.Fatal(err)
	}
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(expirySession))
	waiter, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- waiter.Lock(context.Background()) }()
	locktest.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
		ps, err := holder.Participants(ctx)
		return err == nil && len(ps) == 2
	})
	if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
		t.Fatalf("expire: %d sessions, %v", n, err)
	}
	// The waiter queues again on its new session.
	locktest.Eventually(t, 10*time.Second, "the waiter queued again", func() bool {
		ps, err := holder.Participants(ctx)
		return err == nil && len(ps) == 2
	})
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("Lock(context.Background()) waiting through the expiry: %v", err)
		}
		t.Logf("the waiter took the lock %v after it was released", time.Since(released).Round(time.Millisecond))
		if d := time.Since(released); d > retakeBound {
			t.Errorf("taken %v after release, bound %v", d, retakeBound)
		}
		waiter.Unlock(ctx)
	case <-time.After(20 * time.Second):
		t.Fatal("Lock(context.Background()) waiting through the expiry did not return within 20s of the release")
	}
}

// openFDs counts the process's open descriptors (-1 where /proc is not).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// closeLeavesNothing closes c and checks that the goroutines and
// descriptors it had come back to what they were before it was made
// (fds, gs), allowing for the test's own proxy.
func closeLeavesNothing(t *testing.T, c *recipe.Client, fds, gs int) {
	t.Helper()
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	// The proxy's connections to the server close as the client's do.
	locktest.Eventually(t, 5*time.Second, "goroutines and descriptors released", func() bool {
		return runtime.NumGoroutine() <= gs+proxyGoroutines && (fds < 0 || openFDs(t) <= fds+proxyFDs)
	})
	t.Logf("after Close: %d goroutines (%d before the client), %d descriptors (%d before)", runtime.NumGoroutine(), gs, openFDs(t), fds)
}

// What the test's proxy keeps open while it runs: its accept loop and
// listener.
const (
	proxyGoroutines = 2
	proxyFDs        = 1
)

// A Lock(context.Background()) made after an expiry returns: it takes the
// lock within retakeBound of the holder being told. (Before, it never
// returned, not even after Client.Close.)
func TestBackgroundLockAfterExpiry(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(expirySession))
	m, err := mutex.New(c, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
		t.Fatalf("expire: %d sessions, %v", n, err)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not told of the expiry within 10s")
	}
	told := time.Now()
	m.Unlock(context.Background())
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(context.Background()) }()
	select {
	case err := <-locked:
		if err != nil {
			t.Fatalf("Lock(context.Background()) after the expiry: %v", err)
		}
		if d := time.Since(told); d > retakeBound {
			t.Errorf("taken %v after the holder was told, bound %v", d, retakeBound)
		}
		m.Unlock(context.Background())
	case <-time.After(10 * time.Second):
		start := time.Now()
		c.Close()
		select {
		case err := <-locked:
			t.Fatalf("Lock(context.Background()) after the expiry did not return within 10s; it returned %v after Close", err)
		case <-time.After(5 * time.Second):
			t.Fatalf("Lock(context.Background()) after the expiry did not return within 10s, nor within 5s of Close (which took %v)", time.Since(start))
		}
	}
}
