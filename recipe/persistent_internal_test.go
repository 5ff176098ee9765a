package recipe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
)

// A persistent node with a lock name ahead of ours is found by the read
// that would watch it, in the round trip after the listing that showed it:
// the acquire fails at once with ErrMismatch naming the node, instead of
// waiting for a release that never comes. An ephemeral one is waited on.
func TestPersistentPredecessor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner int64
	}{{"persistent", 0}, {"ephemeral", otherSession}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeZK()
			f.put("/locks", 0)
			f.put(phaseDir, 0)
			pred := f.put(strings.TrimSuffix(phasePred, "0000000000"), tc.owner)
			c := fakeClient(t, f)
			l, err := NewLock(c, phaseDir, LockSpec{Recipe: "test", LockName: "lock-", Driver: driver.Mutex()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = l.Acquire(ctx)
			t.Logf("requests %s: %v", f.requestCounts(), err)
			if tc.owner != 0 {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("waiting on an ephemeral node: %v, want the deadline", err)
				}
				awaitNoneOwned(t, f)
				return
			}
			if !errors.Is(err, ErrMismatch) || !errors.Is(err, ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) ||
				!strings.Contains(err.Error(), pred+" is a persistent node") {
				t.Fatalf("acquire behind a persistent node: %v; want ErrMismatch naming %s at once", err, pred)
			}
			// The create, the listing that shows the node, the one round of
			// reads a waiter makes (the node, and our own), the cleanup.
			if got, want := f.requestCounts(), "children=1 create=1 delete=1 getW=2"; got != want {
				t.Errorf("requests %s, want %s", got, want)
			}
			awaitNoneOwned(t, f)
		})
	}
}
