package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestPermanent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{recipe.ErrClosed, true},
		{fmt.Errorf("campaign: %w: %w", recipe.ErrNotAcquired, recipe.ErrMismatch), true},
		{fmt.Errorf("create /a: %w: %w", recipe.ErrPermission, zk.ErrNoAuth), true},
		{zk.ErrNoAuth, true},
		{zk.ErrAuthFailed, true},
		{recipe.ErrInvalidPath, true},
		{zk.ErrNoChildrenForEphemerals, true},
		{zk.ErrInvalidACL, true},
		{zk.ErrBadArguments, true},
		{zk.ErrConnectionClosed, false},
		{zk.ErrSessionExpired, false},
		{fmt.Errorf("gave up: %w", retry.ErrGaveUp), false},
		{zk.ErrNoNode, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("something else"), false},
	} {
		if got := recipe.Permanent(tc.err); got != tc.want {
			t.Errorf("Permanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// An Observer delivers a new head, then each change of the head's data
// (not a write of the same data) with the same token, then the next head.
func TestObserverDeliversDataChanges(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	c := locktest.Client(t, []string{srv.Addr()})
	spec := recipe.LockSpec{Recipe: "test", LockName: "lock-", Driver: driver.Mutex()}
	l, err := recipe.NewLock(c, path, spec, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := locktest.Ctx(t, 30*time.Second)
	oc := locktest.Client(t, []string{srv.Addr()})
	ol, err := recipe.NewLock(oc, path, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := ol.Observer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) recipe.Participant {
		t.Helper()
		select {
		case p, ok := <-o.C:
			if !ok {
				t.Fatalf("closed (%v) while waiting for %s", o.Err(), what)
			}
			return p
		case <-ctx.Done():
			t.Fatalf("no delivery of %s", what)
		}
		return recipe.Participant{}
	}
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := next("the holder"); p.Node != h.Node() || p.Token != h.Token() || string(p.Data) != "first" {
		t.Fatalf("delivered %+v, want %s with token %d and data first", p, h.Node(), h.Token())
	}
	raw := zktest.Connect(t, srv.Addr())
	node := path + "/" + h.Node()
	set := func(data string) {
		t.Helper()
		if _, err := raw.Set(node, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
	}
	set("second")
	if p := next("second"); p.Node != h.Node() || p.Token != h.Token() || string(p.Data) != "second" {
		t.Fatalf("delivered %+v, want %s with token %d and data second", p, h.Node(), h.Token())
	}
	// The same data again: the observer reads the node once more (and
	// lists nothing), and delivers nothing.
	before := oc.Stats()
	set("second")
	locktest.Eventually(t, 10*time.Second, "the observer's read", func() bool { return oc.Stats().Reads > before.Reads })
	if st := oc.Stats().Sub(before); st.Reads != 1 || st.Lists != 0 {
		t.Fatalf("after a data change the observer made %d reads and %d listings, want one read", st.Reads, st.Lists)
	}
	set("third")
	if p := next("third"); p.Node != h.Node() || p.Token != h.Token() || string(p.Data) != "third" {
		t.Fatalf("delivered %+v, want %s with token %d and data third", p, h.Node(), h.Token())
	}
	// The next delivery is the next holder: nothing for the write of the
	// same data.
	l2, err := recipe.NewLock(locktest.Client(t, []string{srv.Addr()}), path, spec, []byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan *recipe.Hold, 1)
	go func() {
		h2, err := l2.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		acquired <- h2
	}()
	locktest.Queued(t, 2, l.Participants)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := <-acquired
	if p := next("the next holder"); p.Token != h2.Token() || string(p.Data) != "other" {
		t.Fatalf("delivered %+v, want the next holder, token %d", p, h2.Token())
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An Observer ends with ErrMismatch when a node of another kind is ahead
// of the head of its queue, and not for one behind it.
func TestObserverOtherKind(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	c := locktest.Client(t, []string{srv.Addr()})
	spec := recipe.LockSpec{Recipe: "latch", LockName: "latch-", Driver: driver.Mutex()}
	for _, tc := range []struct {
		order   []string // lock names, in creation order
		wantErr bool
	}{
		{[]string{"latch-", "lock-"}, false},
		{[]string{"lock-", "latch-"}, true},
		{[]string{"lease-"}, true},
	} {
		t.Run(fmt.Sprint(tc.order), func(t *testing.T) {
			path := zktest.UniquePath(t)
			if _, err := raw.Create("/zktest", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
			if _, err := raw.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			for i, name := range tc.order {
				prefix := fmt.Sprintf("%s/_c_00000000-0000-0000-0000-%012d-%s", path, i, name)
				if _, err := raw.Create(prefix, []byte(name), zk.FlagSequence|zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			l, err := recipe.NewLock(c, path, spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(locktest.Ctx(t, 30*time.Second))
			defer cancel()
			o, err := l.Observer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr {
				for p := range o.C {
					t.Errorf("delivered %+v", p)
				}
				if err := o.Err(); !errors.Is(err, recipe.ErrMismatch) {
					t.Fatalf("Err = %v, want ErrMismatch", err)
				}
				return
			}
			if p := <-o.C; string(p.Data) != "latch-" {
				t.Fatalf("delivered %+v, want the latch- node", p)
			}
			cancel()
			for range o.C {
			}
			if err := o.Err(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Err = %v, want context.Canceled", err)
			}
		})
	}
}
