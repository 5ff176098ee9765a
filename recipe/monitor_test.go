package recipe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
)

// The hold's monitor, one concern at a time, against the scripted fake
// (fakezk_test.go): no server.

// fakeHold acquires, on a fresh fake, a lock with spec (a mutex by default).
func fakeHold(t *testing.T, spec LockSpec, script func(f *fakeZK, r *fakeCall), opts ...Option) (*fakeZK, *Hold) {
	t.Helper()
	f := newFakeZK()
	f.put("/locks", 0)
	f.put(phaseDir, 0)
	c := fakeClient(t, f, opts...)
	spec.Recipe, spec.LockName, spec.Driver = "test", "lock-", driver.Mutex()
	l, err := NewLock(c, phaseDir, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	f.setScript(script)
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	return f, h
}

// awaitCount waits until f has seen n requests of op.
func awaitCount(t *testing.T, f *fakeZK, op string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for f.count(op) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s requests, want %d", f.count(op), op, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitLoss waits for the hold to end and checks why.
func awaitLoss(t *testing.T, h *Hold, reason error) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(time.Second):
		t.Fatal("hold not lost")
	}
	if err := h.Err(); !errors.Is(err, ErrLost) || !errors.Is(err, reason) {
		t.Fatalf("Err() = %v, want %v and %v", err, ErrLost, reason)
	}
}

// mute makes the client hear nothing from now on, and moves the clock past
// the loss timeout.
func mute(f *fakeZK) {
	f.mu.Lock()
	f.mute = true
	f.mu.Unlock()
	f.advance(f.c.lossTimeout() + time.Millisecond)
}

func TestHoldMaxHold(t *testing.T) {
	f, h := fakeHold(t, LockSpec{MaxHold: 20 * time.Millisecond}, nil)
	awaitLoss(t, h, ErrMaxHoldExceeded)
	awaitNoneOwned(t, f) // deleted, so the next in line proceeds
}

func TestHoldRevocation(t *testing.T) {
	t.Run("marker written while watched", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{Revocable: true}, nil)
		awaitCount(t, f, "getW", 1)
		if _, err := f.Set(h.path, []byte(revokeMarker), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Revoked():
		case <-time.After(time.Second):
			t.Fatal("not revoked")
		}
		if h.Err() != nil {
			t.Fatalf("Err() = %v: a revocation asks, it does not end the hold", h.Err())
		}
	})
	t.Run("marker written before the acquire's watch", func(t *testing.T) {
		// The acquire read our node after the marker was written, and
		// its watch will never fire: the hold reads the node once more.
		_, h := fakeHold(t, LockSpec{Revocable: true}, func(f *fakeZK, r *fakeCall) {
			switch {
			case r.op == "create":
				r.lose = true // found again: verify reads and watches the node
			case r.op == "getW":
				f.mu.Lock()
				f.nodes[r.path].data = []byte(revokeMarker)
				f.mu.Unlock()
			}
		})
		select {
		case <-h.Revoked():
		case <-time.After(time.Second):
			t.Fatal("not revoked")
		}
	})
}

func TestHoldOwnWatch(t *testing.T) {
	t.Run("armed when the loss signal is asked for", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		if n := f.count("getW"); n != 0 {
			t.Fatalf("%d reads of the node right after acquire, want 0 (the watch is lazy)", n)
		}
		if h.Err() != nil {
			t.Fatal(h.Err())
		}
		awaitCount(t, f, "getW", 1)
	})
	t.Run("not armed until asked", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		time.Sleep(200 * time.Millisecond) // formerly the watch's lazy delay
		if n := f.count("getW"); n != 0 {
			t.Fatalf("%d reads of the node before anyone asked, want 0", n)
		}
		h.mu.Lock()
		mon := h.mon
		h.mu.Unlock()
		if mon != monitorIdle {
			t.Fatalf("monitor state %d before anyone asked, want idle", mon)
		}
		h.Done()
		awaitCount(t, f, "getW", 1)
	})
	t.Run("session expired, nobody asking", func(t *testing.T) {
		// No monitor runs: the epoch's end is recorded all the same.
		f, h := fakeHold(t, LockSpec{}, nil)
		f.expire()
		awaitLoss(t, h, ErrSessionExpired)
		if n := f.count("getW"); n != 0 {
			t.Fatalf("%d reads of the node, want 0", n)
		}
	})
	t.Run("node deleted by another client", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		h.Done()
		awaitCount(t, f, "getW", 1)
		f.remove(h.path)
		awaitLoss(t, h, ErrNodeDeleted)
	})
	t.Run("session expired", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		h.Done()
		awaitCount(t, f, "getW", 1)
		f.expire()
		awaitLoss(t, h, ErrSessionExpired)
	})
	t.Run("data changed: watched again", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		h.Done()
		awaitCount(t, f, "getW", 1)
		if _, err := f.Set(h.path, []byte("x"), -1); err != nil {
			t.Fatal(err)
		}
		awaitCount(t, f, "getW", 2)
		if h.Err() != nil {
			t.Fatal(h.Err())
		}
	})
}

func TestHoldDeletionCause(t *testing.T) {
	t.Run("deleted by another client", func(t *testing.T) {
		_, h := fakeHold(t, LockSpec{}, nil)
		if err := h.deletionCause(); !errors.Is(err, ErrNodeDeleted) {
			t.Fatalf("deletionCause() = %v, want %v", err, ErrNodeDeleted)
		}
	})
	t.Run("after a silence past the loss timeout: the session's end", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil)
		mute(f)
		if err := h.deletionCause(); !errors.Is(err, ErrConnectionSuspended) {
			t.Fatalf("deletionCause() = %v, want %v", err, ErrConnectionSuspended)
		}
	})
}

func TestHoldAccessorRecordsSilence(t *testing.T) {
	f, h := fakeHold(t, LockSpec{}, nil)
	mute(f)
	// No waiting for the watchdog: Err judges the silence itself.
	if err := h.Err(); !errors.Is(err, ErrConnectionSuspended) {
		t.Fatalf("Err() = %v, want %v", err, ErrConnectionSuspended)
	}
	select {
	case <-h.done:
	default:
		t.Fatal("Err reported a loss, Done is open")
	}
}

func TestHoldSuspension(t *testing.T) {
	suspend := func(t *testing.T, f *fakeZK, h *Hold) {
		t.Helper()
		h.Done()
		awaitCount(t, f, "getW", 1)
		mute(f)
		select {
		case <-h.Suspended():
		case <-time.After(time.Second):
			t.Fatal("not suspended")
		}
		if err := h.Err(); err != nil {
			t.Fatalf("Err() = %v while suspended, want nil", err)
		}
	}
	answer := func(f *fakeZK) {
		f.mu.Lock()
		f.mute = false
		f.mu.Unlock()
		f.c.heardAt(int64(f.Now()))
	}
	t.Run("the session answers again: kept", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil, WithSuspensionTolerance())
		suspend(t, f, h)
		answer(f)
		select {
		case <-h.Resumed():
		case <-time.After(time.Second):
			t.Fatal("not resumed")
		}
		awaitCount(t, f, "getW", 2) // the node was read again
		if err := h.Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("node deleted meanwhile: lost", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil, WithSuspensionTolerance())
		suspend(t, f, h)
		f.remove(h.path)
		answer(f)
		awaitLoss(t, h, ErrNodeDeleted)
	})
	t.Run("session expired meanwhile: lost", func(t *testing.T) {
		f, h := fakeHold(t, LockSpec{}, nil, WithSuspensionTolerance())
		suspend(t, f, h)
		answer(f)
		f.expire()
		awaitLoss(t, h, ErrSessionExpired)
	})
}
