package recipe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
)

// Waiters that ask for a listing while one is in flight share the next
// one, sent once the first is answered, and each sees every node created
// before it asked: two listings for eleven waiters, and none left behind.
func TestListShared(t *testing.T) {
	f := newFakeZK()
	f.put("/locks", 0)
	f.put("/locks/d", 0)
	first := f.put("/locks/d/lock-", 0x200)
	gate := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	f.script = func(f *fakeZK, r *fakeCall) {
		if r.op == "children" && r.n == 1 {
			r.after = func() {
				once.Do(func() { close(entered) })
				<-gate // answered only once the others asked
			}
		}
	}
	c := fakeClient(t, f)
	ctx := context.Background()

	var lead *listing
	var leadErr error
	leadDone := make(chan struct{})
	go func() {
		lead, leadErr = c.list(ctx, "/locks/d")
		close(leadDone)
	}()
	<-entered // the first listing was applied: it cannot show what follows
	second := f.put("/locks/d/lock-", 0x200)

	const followers = 10
	got := make([]*listing, followers)
	errs := make([]error, followers)
	var wg sync.WaitGroup
	for i := range followers {
		wg.Go(func() { got[i], errs[i] = c.list(ctx, "/locks/d") })
	}
	// Every follower has asked once it waits for the next listing.
	waitFor(t, func() bool {
		c.listings.mu.Lock()
		defer c.listings.mu.Unlock()
		d := c.listings.dirs["/locks/d"]
		return d != nil && d.next != nil
	})
	time.Sleep(20 * time.Millisecond) // let the last followers join it
	close(gate)
	<-leadDone
	wg.Wait()

	if leadErr != nil {
		t.Fatal(leadErr)
	}
	if !slices.Equal(lead.names, []string{baseOf(first)}) {
		t.Errorf("first listing %v, want only %s", lead.names, baseOf(first))
	}
	for i := range followers {
		if errs[i] != nil {
			t.Fatalf("follower %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Errorf("follower %d got a listing of its own", i)
		}
		if !slices.Contains(got[i].names, baseOf(second)) {
			t.Errorf("follower %d: listing %v lacks %s, created before it asked", i, got[i].names, baseOf(second))
		}
	}
	f.mu.Lock()
	lists := f.requests["children"]
	f.mu.Unlock()
	if lists != 2 {
		t.Errorf("%d listings sent for 11 waiters, want 2", lists)
	}
	c.listings.mu.Lock()
	left := len(c.listings.dirs)
	c.listings.mu.Unlock()
	if left != 0 {
		t.Errorf("%d directories still tracked after every listing was answered", left)
	}
}

// A waiter whose context ends stops waiting at once; the listing goes on
// and serves the others.
func TestListContextEnds(t *testing.T) {
	f := newFakeZK()
	f.put("/locks", 0)
	gate := make(chan struct{})
	f.script = func(f *fakeZK, r *fakeCall) {
		if r.op == "children" {
			r.after = func() { <-gate }
		}
	}
	c := fakeClient(t, f)
	other := make(chan error, 1)
	go func() { _, err := c.list(context.Background(), "/locks"); other <- err }()
	waitFor(t, func() bool {
		c.listings.mu.Lock()
		defer c.listings.mu.Unlock()
		return c.listings.dirs["/locks"] != nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.list(ctx, "/locks"); err != context.DeadlineExceeded {
		t.Errorf("list returned %v, want the context's error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("list returned %v after its context ended", d)
	}
	close(gate)
	if err := <-other; err != nil {
		t.Errorf("the other waiter's listing failed: %v", err)
	}
}

// A listing of a client that is closed fails with ErrClosed, for the
// waiters waiting for the next one too.
func TestListClosed(t *testing.T) {
	f := newFakeZK()
	f.put("/locks", 0)
	c := fakeClient(t, f)
	c.Close()
	if _, err := c.list(context.Background(), "/locks"); err == nil {
		t.Fatal("list on a closed client succeeded")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// The queue a waiter takes from a shared listing's sorted view is the one
// setQueue makes from a listing of its own, for every node of the
// listing: the same nodes, in the same order, and the same error when a
// node of another kind comes first.
func TestSetQueueFromAgreesWithSetQueue(t *testing.T) {
	f := newFakeZK()
	c := fakeClient(t, f)
	rwQueue := []string{"read-", "write-"}
	for _, tc := range []struct {
		name  string
		spec  LockSpec
		queue []string
		extra []string // children that take no part in the queue
	}{
		{"mutex", LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, []string{"lock-"}, nil},
		{"mutex among others", LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, []string{"lock-"},
			[]string{"config", "leases", "lock-", "notes-x"}},
		{"rwlock read", LockSpec{Recipe: "rwlock", LockName: "read-", Driver: driver.Read("write-")}, rwQueue, []string{"config"}},
		{"rwlock write", LockSpec{Recipe: "rwlock", LockName: "write-", Driver: driver.Write()}, rwQueue, nil},
		{"mutex behind a semaphore", LockSpec{Recipe: "mutex", LockName: "lock-", Driver: driver.Mutex()}, []string{"lock-"},
			[]string{"_c_4c1a9e0a-3b9c-4c3e-9a53-1e0b8f6f1a2b-lease-0000000003"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			var names []string
			for i := range 40 {
				ln := tc.queue[rng.IntN(len(tc.queue))]
				seq := i*3 + rng.IntN(3)
				if rng.IntN(5) == 0 && i > 0 {
					seq = i*3 - 1 // a few equal sequence numbers under other names
				}
				names = append(names, fmt.Sprintf("_c_%08x-0000-4000-8000-%012x-%s%010d", rng.Uint32(), i, ln, seq))
			}
			names = append(names, tc.extra...)
			rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
			l := &Lock{c: c, dir: "/locks/d", lockKind: &lockKind{spec: tc.spec, queue: tc.queue}}
			shared := &listing{names: slices.Clone(names)}
			for _, own := range names {
				if _, ok := driver.Sequence(own, tc.queue...); !ok {
					continue
				}
				a := &attempt{l: l, node: own, prefix: own[:40]}
				b := &attempt{l: l, node: own, prefix: own[:40]}
				errA := a.setQueue(slices.Clone(names))
				errB := b.setQueueFrom(shared)
				if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
					t.Fatalf("%s: setQueue: %v; setQueueFrom: %v", own, errA, errB)
				}
				if errA != nil {
					continue
				}
				if !slices.Equal(a.queue, b.queue) {
					t.Fatalf("%s: setQueue %v\nsetQueueFrom %v", own, a.queue, b.queue)
				}
				if b.at != len(b.queue) || b.queue[b.at-1] != own {
					t.Fatalf("%s: at %d in %v", own, b.at, b.queue)
				}
				da, errA := a.decision()
				db, errB := b.decision()
				if errA != nil || errB != nil || da.Held != db.Held || !slices.Equal(da.Watch, db.Watch) {
					t.Fatalf("%s: decisions differ: %+v (%v), %+v (%v)", own, da, errA, db, errB)
				}
			}
			if !slices.Equal(shared.names, names) {
				t.Error("the shared listing was edited")
			}
		})
	}
}
