package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	if p == nil {
		p = None()
	}
	if inv, ok := p.(invalid); ok {
		return inv.err
	}
	b := p.NewBackOff()
	var last error
	for attempts := 0; ; {
		if ctx.Err() != nil {
			return interrupted(ctx, attempts, last)
		}
		err := fn(ctx)
		attempts++
		if err == nil {
			return nil
		}
		if !Retryable(err) {
			return err
		}
		last = err
		if ctx.Err() != nil {
			return interrupted(ctx, attempts, last)
		}
		wait := b.NextBackOff()
		if wait < 0 {
			return fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, attempts, last)
		}
		if notify != nil {
			notify(last, wait)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return interrupted(ctx, attempts, last)
			case <-t.C:
			}
		}
	}
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
