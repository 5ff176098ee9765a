package retry

import (
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy describes when to retry an operation. A Policy is immutable and
// safe for concurrent use.
type Policy interface {
	// NewBackOff returns a fresh schedule for one operation. The schedule
	// is not safe for concurrent use and must not be shared between
	// operations. Schedules that limit the elapsed time measure it from
	// the call to NewBackOff (and from each Reset).
	NewBackOff() backoff.BackOff
}

// Parameters of [Default].
const (
	defaultBase       = 50 * time.Millisecond
	defaultMaxSleep   = 2 * time.Second
	defaultMaxRetries = 29
	defaultMaxElapsed = 30 * time.Second
)

// jitter is the randomization factor of the exponential policies: a
// nominal interval d becomes a uniformly distributed sleep in [d/2, 3d/2].
const jitter = 0.5

// maxSleepLimit bounds every duration the exponential schedules work with,
// so that 3/2 of it (the largest jittered value) cannot overflow. It is
// about 146 years.
const maxSleepLimit = time.Duration(math.MaxInt64 / 2)

// Exponential returns a policy that sleeps exponentially longer between
// retries, like Curator's ExponentialBackoffRetry.
//
// Before retry k (k = 0, 1, 2, ...) it sleeps a random duration uniformly
// distributed in [d/2, 3d/2], where d = base * 2^k. It retries at most
// maxRetries times (maxRetries+1 attempts in all); a negative maxRetries
// means no limit. The sleeps are not capped (other than saturating at
// about 146 years instead of overflowing); use [BoundedExponential] to cap
// them.
//
// base must be positive.
func Exponential(base time.Duration, maxRetries int) Policy {
	if base <= 0 {
		return invalidf("Exponential: base %v is not positive", base)
	}
	return newExponential(base, maxSleepLimit, maxRetries, -1)
}

// BoundedExponential returns a policy like [Exponential] whose sleeps never
// exceed maxSleep, like Curator's BoundedExponentialBackoffRetry.
//
// Before retry k (k = 0, 1, 2, ...) it sleeps
// min(maxSleep, x) where x is uniformly distributed in [d/2, 3d/2] and
// d = min(base * 2^k, maxSleep). It retries at most maxRetries times; a
// negative maxRetries means no limit.
//
// base must be positive and maxSleep must be at least base. Durations
// beyond about 146 years are treated as 146 years.
func BoundedExponential(base, maxSleep time.Duration, maxRetries int) Policy {
	switch {
	case base <= 0:
		return invalidf("BoundedExponential: base %v is not positive", base)
	case maxSleep < base:
		return invalidf("BoundedExponential: maxSleep %v is less than base %v", maxSleep, base)
	}
	return newExponential(base, maxSleep, maxRetries, -1)
}

// NTimes returns a policy that retries at most n times, sleeping for sleep
// before each retry, like Curator's RetryNTimes. NTimes(1, sleep) is
// Curator's RetryOneTime and NTimes(0, sleep) never retries.
//
// n and sleep must not be negative.
func NTimes(n int, sleep time.Duration) Policy {
	switch {
	case n < 0:
		return invalidf("NTimes: negative retry count %d", n)
	case sleep < 0:
		return invalidf("NTimes: negative sleep %v", sleep)
	}
	return newFixed(sleep, n, -1)
}

// UntilElapsed returns a policy that sleeps for sleep before each retry
// and retries only while the retry can start within maxElapsed of the
// start of the operation, like Curator's RetryUntilElapsed. Precisely: a
// retry is scheduled only if elapsed+sleep <= maxElapsed, where elapsed is
// the time since [Policy.NewBackOff] was called (which [Do] does right
// before the first attempt). Time spent inside the operation counts. The
// schedule therefore never sleeps past the deadline; an attempt already
// running when the deadline passes is not interrupted (use a context
// deadline for that).
//
// maxElapsed and sleep must not be negative.
func UntilElapsed(maxElapsed, sleep time.Duration) Policy {
	switch {
	case maxElapsed < 0:
		return invalidf("UntilElapsed: negative maxElapsed %v", maxElapsed)
	case sleep < 0:
		return invalidf("UntilElapsed: negative sleep %v", sleep)
	}
	return newFixed(sleep, -1, maxElapsed)
}

// Forever returns a policy that retries without limit, sleeping for sleep
// before each retry, like Curator's RetryForever. Only the context passed
// to [Do] (or a non-retryable error) ends the operation.
//
// sleep must not be negative.
func Forever(sleep time.Duration) Policy {
	if sleep < 0 {
		return invalidf("Forever: negative sleep %v", sleep)
	}
	return newFixed(sleep, -1, -1)
}

// None returns a policy that never retries: the operation is attempted
// once. [Do] treats a nil Policy as None.
func None() Policy { return none{} }

// Default returns the policy the recipes use unless told otherwise.
//
// It is BoundedExponential(50*time.Millisecond, 2*time.Second, 29) with,
// in addition, a 30 s budget on the elapsed time:
//
//   - before retry k (k = 0, 1, 2, ...) it sleeps a random duration in
//     [d/2, min(3d/2, 2s)] where d = min(50ms * 2^k, 2s); the nominal
//     sleeps are 50ms, 100ms, 200ms, 400ms, 800ms, 1.6s, then 2s;
//   - it retries at most 29 times (30 attempts in all);
//   - it schedules a retry only if elapsed+sleep <= 30s, where elapsed is
//     measured from the start of the operation, as for [UntilElapsed].
//
// Whichever limit is reached first ends the retries, so no retry starts
// more than 30 s after the operation began. An operation that keeps
// failing fast is retried about 21 times in all (never fewer than 18):
// the 30 s budget normally binds before the retry limit.
func Default() Policy {
	return newExponential(defaultBase, defaultMaxSleep, defaultMaxRetries, defaultMaxElapsed)
}

// policy is the implementation of every valid Policy except None.
type policy struct {
	exponential bool
	base        time.Duration // first nominal interval, or the fixed sleep
	maxSleep    time.Duration // cap on every sleep
	maxRetries  int           // < 0: unlimited
	maxElapsed  time.Duration // < 0: unlimited
	clock       backoff.Clock // nil: backoff.SystemClock (tests inject a fake)
}

func newExponential(base, maxSleep time.Duration, maxRetries int, maxElapsed time.Duration) *policy {
	return &policy{
		exponential: true,
		base:        min(base, maxSleepLimit),
		maxSleep:    min(maxSleep, maxSleepLimit),
		maxRetries:  maxRetries,
		maxElapsed:  maxElapsed,
	}
}

func newFixed(sleep time.Duration, maxRetries int, maxElapsed time.Duration) *policy {
	return &policy{
		base:       sleep,
		maxSleep:   sleep,
		maxRetries: maxRetries,
		maxElapsed: maxElapsed,
	}
}

// NewBackOff implements [Policy].
func (p *policy) NewBackOff() backoff.BackOff {
	clock := p.clock
	if clock == nil {
		clock = backoff.SystemClock
	}
	var next backoff.BackOff
	if p.exponential {
		next = &backoff.ExponentialBackOff{
			InitialInterval:     p.base,
			RandomizationFactor: jitter,
			Multiplier:          2,
			MaxInterval:         p.maxSleep,
			MaxElapsedTime:      0, // enforced by limit, after capping
			Stop:                backoff.Stop,
			Clock:               clock,
		}
	} else {
		next = backoff.NewConstantBackOff(p.base)
	}
	var b backoff.BackOff = &limit{
		next:       next,
		maxSleep:   p.maxSleep,
		maxElapsed: p.maxElapsed,
		clock:      clock,
	}
	if p.maxRetries >= 0 {
		b = backoff.WithMaxRetries(b, uint64(p.maxRetries))
	}
	b.Reset()
	return b
}

// limit caps each sleep of next at maxSleep and stops once a sleep would
// end more than maxElapsed after the last Reset.
type limit struct {
	next       backoff.BackOff
	maxSleep   time.Duration
	maxElapsed time.Duration // < 0: unlimited
	clock      backoff.Clock
	start      time.Time
}

func (l *limit) NextBackOff() time.Duration {
	d := l.next.NextBackOff()
	if d < 0 {
		return backoff.Stop
	}
	d = min(d, l.maxSleep)
	if l.maxElapsed >= 0 && l.clock.Now().Sub(l.start)+d > l.maxElapsed {
		return backoff.Stop
	}
	return d
}

func (l *limit) Reset() {
	l.next.Reset()
	l.start = l.clock.Now()
}

// none is the Policy returned by None.
type none struct{}

// NewBackOff implements [Policy].
func (none) NewBackOff() backoff.BackOff { return &backoff.StopBackOff{} }

// invalid is the Policy returned by a constructor given invalid arguments.
type invalid struct{ err error }

func invalidf(format string, args ...any) Policy {
	return invalid{err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...)}
}

// NewBackOff implements [Policy]; the schedule never retries.
func (invalid) NewBackOff() backoff.BackOff { return &backoff.StopBackOff{} }

// Persistent returns a policy whose schedule follows p's and, where p's
// would give up, goes on repeating its last sleep (at least floor) for
// ever. It is for loops that must not give up and end only when an outside
// event stops them, such as deleting an abandoned lock node until the
// session ends: they keep p's pace without hammering a server that is
// down. An invalid p yields an invalid policy; floor must be positive.
func Persistent(p Policy, floor time.Duration) Policy {
	if p == nil {
		p = None()
	}
	switch {
	case Validate(p) != nil:
		return p
	case floor <= 0:
		return invalidf("Persistent: floor %v is not positive", floor)
	}
	return persistent{p: p, floor: floor}
}

type persistent struct {
	p     Policy
	floor time.Duration
}

// NewBackOff implements [Policy].
func (p persistent) NewBackOff() backoff.BackOff {
	return &persistentBackOff{next: p.p.NewBackOff(), last: p.floor, floor: p.floor}
}

type persistentBackOff struct {
	next        backoff.BackOff
	last, floor time.Duration
	exhausted   bool
}

func (b *persistentBackOff) NextBackOff() time.Duration {
	if !b.exhausted {
		if d := b.next.NextBackOff(); d >= 0 {
			b.last = max(d, b.floor)
			return b.last
		}
		b.exhausted = true
	}
	return b.last
}

func (b *persistentBackOff) Reset() {
	b.next.Reset()
	b.last, b.exhausted = b.floor, false
}
