package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

// script returns an operation that fails with errs[0], errs[1], ... and
// succeeds once they are exhausted. It counts its calls and reports a
// call made with a done context.
func script(t *testing.T, calls *int, errs ...error) func(context.Context) error {
	return func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("fn called with a done context (call %d)", *calls+1)
		}
		i := *calls
		*calls++
		if i < len(errs) {
			return errs[i]
		}
		return nil
	}
}

func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func TestDo(t *testing.T) {
	lost := zk.ErrConnectionClosed
	wrappedNoNode := fmt.Errorf("get /lock: %w", zk.ErrNoNode)
	tests := []struct {
		name      string
		p         Policy
		errs      []error
		wantCalls int
		wantErr   error   // identical to the returned error; nil: Do succeeds
		wantIs    []error // errors.Is must hold for each
		wantMsg   string
	}{
		{name: "success", p: NTimes(3, 0), wantCalls: 1},
		{name: "retries connection loss", p: NTimes(3, 0), errs: []error{lost, zk.ErrNoServer, zk.ErrSessionMoved}, wantCalls: 4},
		{name: "retries with a real sleep", p: NTimes(2, time.Microsecond), errs: []error{lost, lost}, wantCalls: 3},
		{name: "exponential", p: BoundedExponential(time.Microsecond, 10*time.Microsecond, 5), errs: repeat(lost, 5), wantCalls: 6},
		{name: "logical error returned unchanged", p: Forever(0), errs: []error{zk.ErrNoNode}, wantCalls: 1, wantErr: zk.ErrNoNode},
		{name: "wrapped logical error returned unchanged", p: Forever(0), errs: []error{lost, wrappedNoNode}, wantCalls: 2, wantErr: wrappedNoNode},
		{name: "session expiry not retried", p: Forever(0), errs: []error{zk.ErrSessionExpired}, wantCalls: 1, wantErr: zk.ErrSessionExpired},
		{
			name: "gives up", p: NTimes(2, 0), errs: repeat(lost, 10), wantCalls: 3,
			wantIs:  []error{ErrGaveUp, lost},
			wantMsg: "retry: gave up after 3 attempts: zk: connection closed",
		},
		{
			name: "gives up with the last error", p: NTimes(1, 0), errs: []error{lost, zk.ErrNoServer}, wantCalls: 2,
			wantIs:  []error{ErrGaveUp, zk.ErrNoServer},
			wantMsg: "retry: gave up after 2 attempts: zk: could not connect to a server",
		},
		{name: "None", p: None(), errs: repeat(lost, 10), wantCalls: 1, wantIs: []error{ErrGaveUp, lost}},
		{name: "nil policy is None", p: nil, errs: repeat(lost, 10), wantCalls: 1, wantIs: []error{ErrGaveUp, lost}},
		{name: "until elapsed", p: UntilElapsed(time.Nanosecond, time.Millisecond), errs: []error{lost, lost}, wantCalls: 1, wantIs: []error{ErrGaveUp, lost}},
		{name: "custom schedule with negative wait", p: policyFunc(func() backoff.BackOff { return negative{} }), errs: repeat(lost, 10), wantCalls: 1, wantIs: []error{ErrGaveUp}},
		{name: "invalid policy", p: NTimes(-1, 0), wantCalls: 0, wantIs: []error{ErrInvalidPolicy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Do(context.Background(), tt.p, script(t, &calls, tt.errs...))
			if calls != tt.wantCalls {
				t.Errorf("fn called %d times, want %d", calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr != nil:
				if err != tt.wantErr {
					t.Errorf("Do = %v, want %v unchanged", err, tt.wantErr)
				}
			case tt.wantIs == nil:
				if err != nil {
					t.Errorf("Do = %v, want nil", err)
				}
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			if tt.wantMsg != "" && (err == nil || err.Error() != tt.wantMsg) {
				t.Errorf("Do = %v, want message %q", err, tt.wantMsg)
			}
		})
	}
}

type policyFunc func() backoff.BackOff

func (f policyFunc) NewBackOff() backoff.BackOff { return f() }

type negative struct{}

func (negative) NextBackOff() time.Duration { return -5 }
func (negative) Reset()                     {}

func TestDoContext(t *testing.T) {
	lost := zk.ErrConnectionClosed
	errCause := errors.New("shutting down")
	tests := []struct {
		name      string
		p         Policy
		run       func(ctx context.Context, cancel context.CancelFunc, calls *int) error
		notify    func(cancel context.CancelFunc) func(error, time.Duration)
		ctx       func() (context.Context, context.CancelFunc)
		wantCalls int
		wantIs    []error
		wantLast  bool // errors.Is(err, lost) must hold
	}{
		{
			name: "done before the first call",
			p:    Forever(0),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			wantCalls: 0,
			wantIs:    []error{context.Canceled},
		},
		{
			name: "canceled during the call",
			p:    Forever(0),
			run: func(_ context.Context, cancel context.CancelFunc, calls *int) error {
				if *calls == 3 {
					cancel()
				}
				return lost
			},
			wantCalls: 3,
			wantIs:    []error{context.Canceled},
			wantLast:  true,
		},
		{
			name: "canceled while waiting",
			p:    Forever(time.Hour),
			notify: func(cancel context.CancelFunc) func(error, time.Duration) {
				return func(error, time.Duration) { cancel() }
			},
			wantCalls: 1,
			wantIs:    []error{context.Canceled},
			wantLast:  true,
		},
		{
			name: "deadline while waiting",
			p:    Forever(time.Hour),
			ctx: func() (context.Context, context.CancelFunc) {
				// Long enough that the first call comes before it on a
				// loaded machine.
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			wantCalls: 1,
			wantIs:    []error{context.DeadlineExceeded},
			wantLast:  true,
		},
		{
			name: "deadline during retries",
			p:    Forever(100 * time.Microsecond),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			wantCalls: -1, // some
			wantIs:    []error{context.DeadlineExceeded},
			wantLast:  true,
		},
		{
			name: "cancel cause",
			p:    Forever(time.Hour),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancelCause(context.Background())
				return ctx, func() { cancel(errCause) }
			},
			notify: func(cancel context.CancelFunc) func(error, time.Duration) {
				return func(error, time.Duration) { cancel() }
			},
			wantCalls: 1,
			wantIs:    []error{context.Canceled, errCause},
			wantLast:  true,
		},
		{
			name: "cancel cause before the first call",
			p:    Forever(0),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancelCause(context.Background())
				cancel(errCause)
				return ctx, func() {}
			},
			wantCalls: 0,
			wantIs:    []error{context.Canceled, errCause},
		},
		{
			name: "fn's context error is not retried",
			p:    Forever(0),
			run: func(ctx context.Context, cancel context.CancelFunc, calls *int) error {
				cancel()
				return fmt.Errorf("op: %w", ctx.Err())
			},
			wantCalls: 1,
			wantIs:    []error{context.Canceled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newCtx := tt.ctx
			if newCtx == nil {
				newCtx = func() (context.Context, context.CancelFunc) {
					return context.WithCancel(context.Background())
				}
			}
			ctx, cancel := newCtx()
			defer cancel()
			run := tt.run
			if run == nil {
				run = func(context.Context, context.CancelFunc, *int) error { return lost }
			}
			var notify func(error, time.Duration)
			if tt.notify != nil {
				notify = tt.notify(cancel)
			}
			calls := 0
			start := time.Now()
			_, deadline := ctx.Deadline()
			err := DoNotify(ctx, tt.p, func(ctx context.Context) error {
				// A deadline can pass between DoNotify's check and the
				// call; a cancellation by the test cannot.
				if ctx.Err() != nil && !deadline {
					t.Errorf("fn called with a done context")
				}
				calls++
				return run(ctx, cancel, &calls)
			}, notify)
			if el := time.Since(start); el > time.Second {
				t.Errorf("Do took %v", el)
			}
			if tt.wantCalls >= 0 && calls != tt.wantCalls {
				t.Errorf("fn called %d times, want %d", calls, tt.wantCalls)
			}
			if err == nil {
				t.Fatal("Do = nil, want an error")
			}
			if !errors.Is(err, ctx.Err()) {
				t.Errorf("errors.Is(%v, ctx.Err()=%v) = false", err, ctx.Err())
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			if got := errors.Is(err, lost); got != tt.wantLast {
				t.Errorf("errors.Is(%v, last error) = %v, want %v", err, got, tt.wantLast)
			}
			if errors.Is(err, ErrGaveUp) {
				t.Errorf("errors.Is(%v, ErrGaveUp) = true after the context ended", err)
			}
			if Retryable(err) {
				t.Errorf("Retryable(%v) = true", err)
			}
		})
	}
}

func TestDoNotify(t *testing.T) {
	type call struct {
		err  error
		wait time.Duration
	}
	var got []call
	errs := []error{zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrConnectionClosed}
	calls := 0
	err := DoNotify(context.Background(), NTimes(2, time.Microsecond), script(t, &calls, errs...),
		func(err error, wait time.Duration) { got = append(got, call{err, wait}) })
	if !errors.Is(err, ErrGaveUp) || !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("DoNotify = %v, want a give-up wrapping zk.ErrConnectionClosed", err)
	}
	want := []call{{zk.ErrConnectionClosed, time.Microsecond}, {zk.ErrNoServer, time.Microsecond}}
	if len(got) != len(want) {
		t.Fatalf("notify called %d times (%v), want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("notify #%d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestDoConcurrentPolicy(t *testing.T) {
	p := BoundedExponential(time.Microsecond, 4*time.Microsecond, 4)
	errc := make(chan error)
	for range 8 {
		go func() {
			calls := 0
			errc <- Do(context.Background(), p, func(context.Context) error {
				calls++
				if calls <= 4 {
					return zk.ErrConnectionClosed
				}
				return nil
			})
		}()
	}
	for range 8 {
		if err := <-errc; err != nil {
			t.Errorf("Do = %v, want nil (each operation gets its own schedule)", err)
		}
	}
}
