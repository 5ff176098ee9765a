package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
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
