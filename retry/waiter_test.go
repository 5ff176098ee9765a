package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		p  Policy
		ok bool
	}{
		"nil":                  {nil, true},
		"None":                 {None(), true},
		"Default":              {Default(), true},
		"Exponential(0, 3)":    {Exponential(0, 3), false},
		"Forever(-1)":          {Forever(-1), false},
		"Persistent(valid)":    {Persistent(NTimes(2, time.Millisecond), time.Millisecond), true},
		"Persistent(invalid)":  {Persistent(Exponential(0, 3), time.Millisecond), false},
		"Persistent(floor 0)":  {Persistent(None(), 0), false},
		"Persistent(nil, 1ms)": {Persistent(nil, time.Millisecond), true},
	} {
		err := Validate(tc.p)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidPolicy)) {
			t.Errorf("%s: Validate = %v, want ok=%v", name, err, tc.ok)
		}
	}
}

// Persistent follows the policy's schedule, never below the floor, and
// repeats the last wait where the policy would stop; Reset starts over.
func TestPersistent(t *testing.T) {
	b := Persistent(NTimes(2, 30*time.Millisecond), 10*time.Millisecond).NewBackOff()
	for round := range 2 {
		for i, want := range []time.Duration{30, 30, 30, 30} {
			if got := b.NextBackOff(); got != want*time.Millisecond {
				t.Fatalf("round %d wait %d = %v, want %vms", round, i, got, want)
			}
		}
		b.Reset()
	}
	none := Persistent(None(), 10*time.Millisecond).NewBackOff()
	for i := range 3 {
		if got := none.NextBackOff(); got != 10*time.Millisecond {
			t.Fatalf("None: wait %d = %v, want the 10ms floor", i, got)
		}
	}
	short := Persistent(NTimes(5, time.Millisecond), 10*time.Millisecond).NewBackOff()
	if got := short.NextBackOff(); got != 10*time.Millisecond {
		t.Fatalf("a wait below the floor = %v, want the floor", got)
	}
}

// A Waiter gives up as the policy says, returns other errors as they are,
// and starts the schedule afresh after Reset.
func TestWaiter(t *testing.T) {
	ctx := context.Background()
	lost := zk.ErrConnectionClosed
	var notified int
	w := NewWaiter(NTimes(1, 0), func(error, time.Duration) { notified++ })
	if err := w.Wait(ctx, lost); err != nil {
		t.Fatalf("first retry refused: %v", err)
	}
	if err := w.Wait(ctx, lost); !errors.Is(err, ErrGaveUp) || !errors.Is(err, lost) {
		t.Fatalf("second retry = %v, want ErrGaveUp wrapping the error", err)
	}
	w.Reset()
	if err := w.Wait(ctx, lost); err != nil {
		t.Fatalf("retry after Reset refused: %v", err)
	}
	if notified != 2 {
		t.Fatalf("notified %d times, want 2", notified)
	}
	other := errors.New("not retryable")
	if err := w.Wait(ctx, other); err != other {
		t.Fatalf("a permanent error = %v, want it unchanged", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := NewWaiter(Forever(time.Hour), nil).Wait(cctx, lost); !errors.Is(err, context.Canceled) || !errors.Is(err, lost) {
		t.Fatalf("Wait with an ended ctx = %v, want context.Canceled and the last error", err)
	}
}
