package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
)

var (
	// ErrGaveUp is wrapped, together with the last error, by the error
	// that Do and DoNotify return when the policy allows no further retry.
	ErrGaveUp = errors.New("retry: gave up")

	// ErrInvalidPolicy is wrapped by the error that Do and DoNotify return,
	// without calling the operation, when the policy was built from
	// invalid arguments.
	ErrInvalidPolicy = errors.New("retry: invalid policy")
)

// Do calls fn until it succeeds, fails with an error that is not
// [Retryable], the policy p gives up, or ctx ends. A nil p means [None].
// Do is DoNotify without a notify function.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context) error) error {
	return DoNotify(ctx, p, fn, nil)
}

// DoNotify is like [Do] and, in addition, calls notify (unless it is nil)
// with the error and the wait before every retry, from the calling
// goroutine. notify is not called when the operation is abandoned.
//
// It takes a fresh schedule from p (see [Policy.NewBackOff]) and then, in
// a loop:
//
//   - if ctx is done, it stops (fn is never called with a done context);
//   - it calls fn(ctx); a nil result is returned as nil;
//   - an error that is not [Retryable] is returned at once, unchanged;
//   - otherwise it asks the schedule for the next wait; on [backoff.Stop]
//     (or any negative wait) it returns an error that wraps both
//     [ErrGaveUp] and fn's last error, with the message
//     "retry: gave up after N attempts: <last error>";
//   - otherwise it waits that long, or until ctx is done.
//
// When ctx ends, DoNotify returns an error e for which errors.Is(e,
// ctx.Err()) holds, as does errors.Is(e, context.Cause(ctx)), and, if fn
// was called, errors.Is(e, last) where last is fn's last error. If ctx
// was done before the first call, that error is ctx.Err() itself (unless
// the context carries a distinct cause).
//
// If p was built from invalid arguments, DoNotify returns an error
// wrapping [ErrInvalidPolicy] without calling fn.
func DoNotify(ctx context.Context, p Policy, fn func(ctx context.Context) error, notify func(err error, wait time.Duration)) error {
	if err := Validate(p); err != nil {
		return err
	}
	w := NewWaiter(p, notify)
	for {
		if err := ctx.Err(); err != nil {
			return w.interrupted(ctx)
		}
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if err := w.Wait(ctx, err); err != nil {
			return err
		}
	}
}

// Validate returns nil for a usable policy (nil counts as [None]) and an
// error wrapping [ErrInvalidPolicy] for one built from invalid arguments,
// so that a program can refuse it before the first operation needs it.
func Validate(p Policy) error {
	if inv, ok := p.(invalid); ok {
		return inv.err
	}
	return nil
}

// Waiter is the step-by-step form of [DoNotify], for loops that make
// progress between failures and want a fresh schedule after each success
// ([Waiter.Reset]). It is not safe for concurrent use.
type Waiter struct {
	p        Policy
	b        backoff.BackOff // taken from p at the first retry
	notify   func(err error, wait time.Duration)
	attempts int
	last     error
}

// NewWaiter returns a Waiter on a fresh schedule of p (nil means [None];
// an invalid policy never retries, see [Validate]). notify, if not nil, is
// called with the error and the wait before every retry.
func NewWaiter(p Policy, notify func(err error, wait time.Duration)) *Waiter {
	if p == nil {
		p = None()
	}
	return &Waiter{p: p, notify: notify}
}

// Wait is called after an attempt failed with err. It returns nil once it
// has slept the next interval of the schedule (retry now), or the error
// that ends the loop: err itself when it is not [Retryable], an error
// wrapping [ErrGaveUp] and err when the schedule allows no more retries,
// or, when ctx ends, an error wrapping ctx.Err() (and its cause) and err,
// as [DoNotify] documents.
func (w *Waiter) Wait(ctx context.Context, err error) error {
	w.attempts++
	if !Retryable(err) {
		return err
	}
	w.last = err
	if ctx.Err() != nil {
		return w.interrupted(ctx)
	}
	if w.b == nil {
		w.b = w.p.NewBackOff()
	}
	wait := w.b.NextBackOff()
	if wait < 0 {
		return fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, w.attempts, err)
	}
	if w.notify != nil {
		w.notify(err, wait)
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return w.interrupted(ctx)
		case <-t.C:
		}
	}
	return nil
}

// Reset starts the schedule afresh, after the loop made progress. The
// attempt count goes on.
func (w *Waiter) Reset() {
	if w.b != nil {
		w.b.Reset()
	}
}

func (w *Waiter) interrupted(ctx context.Context) error {
	return interrupted(ctx, w.attempts, w.last)
}

// interrupted builds the error returned when ctx ends after the given
// number of attempts, the last of which failed with last.
func interrupted(ctx context.Context, attempts int, last error) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if last == nil {
		return err
	}
	return fmt.Errorf("retry: interrupted after %d attempts: %w; last error: %w", attempts, err, last)
}

// Pacer spaces the tries of a loop that must go on until something outside
// it stops it (re-campaigning for leadership, observing a lock, cleaning up
// after a lost session): it follows its policy's schedule and, where the
// policy would give up, keeps the last pace ([Persistent]). It is not safe
// for concurrent use.
type Pacer struct{ w *Waiter }

// errPace is what a Pacer hands its Waiter: the loop decides by itself
// which failures to try again.
var errPace = fmt.Errorf("retry: try again later: %w", zk.ErrConnectionClosed)

// NewPacer returns a Pacer on a fresh schedule of Persistent(p, floor).
func NewPacer(p Policy, floor time.Duration) *Pacer {
	return &Pacer{w: NewWaiter(Persistent(p, floor), nil)}
}

// Pause sleeps until the next try is due. It reports false, at once, when
// ctx ends first (or the policy is invalid, see [Validate]).
func (p *Pacer) Pause(ctx context.Context) bool { return p.w.Wait(ctx, errPace) == nil }

// Reset starts the schedule afresh, after the loop made progress.
func (p *Pacer) Reset() { p.w.Reset() }
