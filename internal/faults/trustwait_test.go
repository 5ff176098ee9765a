package faults_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestAcquireResumesWithTrust is the cause of the liveness cell
// TestLiveness/pl (semaphore, tolerant, behind a ghost) that once took
// its workers about 6s past the fault's end: an acquire waiting while its
// session is suspended retries "no trusted session yet" on the client's
// retry schedule, so once the session is trusted again it still sleeps
// out the pause it began during the fault (up to the policy's longest,
// S), and a second suspension right after costs another. The wait for a
// trusted session must end when the session is trusted again.
//
// A waiter whose policy pauses 5s between retries (retry.Forever) is cut
// off for 1.5s (past its loss timeout, within its session) while the
// lock's holder lets go: once the cut heals, it must be granted well
// within the pause it began during the cut.
func TestAcquireResumesWithTrust(t *testing.T) {
	srv := zktest.Shared(t)
	const session = 2 * time.Second
	holder := zktest.Client(t, srv.Addr(), recipe.WithSessionTimeout(session))
	p := srv.Proxy(t)
	waiter := p.Client(t, recipe.WithSessionTimeout(session), recipe.WithSuspensionTolerance(),
		recipe.WithRetryPolicy(retry.Forever(5*time.Second)))
	path := zktest.UniquePath(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hm, err := mutex.New(holder, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wm, err := mutex.New(waiter, path)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() { granted <- wm.Lock(ctx) }()
	time.Sleep(300 * time.Millisecond) // queued behind the holder

	p.Partition()
	time.Sleep(1500 * time.Millisecond) // suspended: the acquire retries without a trusted session
	if err := hm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	healed := time.Now()
	select {
	case err := <-granted:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter was not granted the free lock")
	}
	took := time.Since(healed)
	t.Logf("granted %v after the heal", took.Round(time.Millisecond))
	if took > 2500*time.Millisecond {
		t.Fatalf("granted %v after the heal: the acquire slept out its retry pause after the session was trusted again", took.Round(time.Millisecond))
	}
	if err := wm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireNEnqueuedAgainTogether is the stall of the liveness cell
// TestLiveness/pl (semaphore behind a ghost, its workers granted about 6s
// after the fault's end): an AcquireN whose session expired while it
// waited enqueued its nodes again one by one, so they were no longer
// consecutive, and two such calls could each hold a lease the other waited
// for until one timed out. Its nodes must be enqueued again together, in
// one transaction.
func TestAcquireNEnqueuedAgainTogether(t *testing.T) {
	srv := zktest.Shared(t)
	const session = 4 * time.Second
	holder := zktest.Client(t, srv.Addr(), recipe.WithSessionTimeout(session))
	p := srv.Proxy(t)
	waiter := p.Client(t, recipe.WithSessionTimeout(session))
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	hs, err := semaphore.New(holder, path, 2)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := hs.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := semaphore.New(waiter, path, 2)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		ls  []*semaphore.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		ls, err := ws.AcquireN(ctx, 2)
		done <- result{ls, err}
	}()
	children := func(want int) []string {
		t.Helper()
		for {
			names, _, err := raw.Children(path)
			if err == nil && len(names) == want {
				return names
			}
			if ctx.Err() != nil {
				t.Fatalf("waiting for %d nodes in %s: %v (have %v)", want, path, err, names)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before := children(3) // the holder's and the two queued together

	p.Record()
	if n, err := p.ExpireSessions(); err != nil || n != 1 {
		t.Fatalf("ExpireSessions = %d, %v", n, err)
	}
	for {
		after := children(3)
		if !slices.Equal(after, before) { // both old nodes gone, two new ones
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	creates := 0
	for _, req := range p.Recorded() {
		switch req.Op {
		case zktest.OpCreate, zktest.OpCreate2, zktest.OpCreateContainer, zktest.OpCreateTTL, zktest.OpMulti:
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("the AcquireN sent %d creates after its session expired, want its two nodes in one transaction", creates)
	}
	for _, l := range r.ls {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
