package retry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// fakeClock is a backoff.Clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withClock returns a copy of p whose schedules read time from clock.
func withClock(t *testing.T, p Policy, clock backoff.Clock) Policy {
	t.Helper()
	pp, ok := p.(*policy)
	if !ok {
		t.Fatalf("policy %T does not use a clock", p)
	}
	cp := *pp
	cp.clock = clock
	return &cp
}

// take returns the first n values of a fresh schedule of p (fewer if the
// schedule stops; the Stop is included).
func take(p Policy, n int) []time.Duration {
	b := p.NewBackOff()
	var out []time.Duration
	for range n {
		d := b.NextBackOff()
		out = append(out, d)
		if d == backoff.Stop {
			break
		}
	}
	return out
}

func TestFixedSchedules(t *testing.T) {
	const stop = backoff.Stop
	ms := time.Millisecond
	tests := []struct {
		name string
		p    Policy
		n    int
		want []time.Duration
	}{
		{"NTimes(3,10ms)", NTimes(3, 10*ms), 10, []time.Duration{10 * ms, 10 * ms, 10 * ms, stop}},
		{"NTimes(1,1s) is RetryOneTime", NTimes(1, time.Second), 10, []time.Duration{time.Second, stop}},
		{"NTimes(0,1s)", NTimes(0, time.Second), 10, []time.Duration{stop}},
		{"NTimes(2,0)", NTimes(2, 0), 10, []time.Duration{0, 0, stop}},
		{"Forever(5ms)", Forever(5 * ms), 5, []time.Duration{5 * ms, 5 * ms, 5 * ms, 5 * ms, 5 * ms}},
		{"Forever(0)", Forever(0), 3, []time.Duration{0, 0, 0}},
		{"None", None(), 10, []time.Duration{stop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := take(tt.p, tt.n)
			if !equal(got, tt.want) {
				t.Errorf("schedule = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestForeverNeverStops(t *testing.T) {
	b := Forever(time.Millisecond).NewBackOff()
	for i := range 100_000 {
		if d := b.NextBackOff(); d != time.Millisecond {
			t.Fatalf("NextBackOff #%d = %v, want 1ms", i, d)
		}
	}
}

// TestExponentialSchedules checks every sleep against its jitter bounds:
// retry k sleeps in [d/2, min(3d/2, maxSleep)] with d = min(base*2^k,
// maxSleep), give or take the 1ns rounding of the underlying library.
func TestExponentialSchedules(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name       string
		p          Policy
		base, cap  time.Duration
		maxRetries int // -1: check that it has not stopped after 200 retries
	}{
		{"Exponential(100ms,5)", Exponential(100*ms, 5), 100 * ms, maxSleepLimit, 5},
		{"Exponential(1ms,0)", Exponential(ms, 0), ms, maxSleepLimit, 0},
		{"Exponential(1ms,-1)", Exponential(ms, -1), ms, maxSleepLimit, -1},
		{"Exponential(maxInt64,3)", Exponential(1<<63-1, 3), maxSleepLimit, maxSleepLimit, 3},
		{"BoundedExponential(50ms,200ms,10)", BoundedExponential(50*ms, 200*ms, 10), 50 * ms, 200 * ms, 10},
		{"BoundedExponential(1s,1s,4)", BoundedExponential(time.Second, time.Second, 4), time.Second, time.Second, 4},
		{"BoundedExponential(3ns,1h,-1)", BoundedExponential(3, time.Hour, -1), 3, time.Hour, -1},
		{"Default", Default(), 50 * ms, 2 * time.Second, 29},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The schedule's elapsed-time budget (Default) must not
			// interfere: freeze the clock.
			p := withClock(t, tt.p, newFakeClock())
			n := tt.maxRetries
			if n < 0 {
				n = 200
			}
			for trial := range 50 {
				b := p.NewBackOff()
				distinct := map[time.Duration]bool{}
				d := tt.base
				for k := range n {
					got := b.NextBackOff()
					lo, hi := d/2-1, min(d+d/2+1, tt.cap)
					if got < lo || got > hi {
						t.Fatalf("trial %d: retry %d slept %v, want in [%v, %v]", trial, k, got, lo, hi)
					}
					distinct[got] = true
					if d <= tt.cap/2 {
						d *= 2
					} else {
						d = tt.cap
					}
				}
				if tt.maxRetries >= 0 {
					if got := b.NextBackOff(); got != backoff.Stop {
						t.Fatalf("trial %d: after %d retries NextBackOff = %v, want Stop", trial, n, got)
					}
				}
				if n >= 5 && tt.base >= ms && len(distinct) < 2 {
					t.Fatalf("trial %d: no jitter: %v", trial, distinct)
				}
			}
		})
	}
}

func TestUntilElapsed(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name       string
		maxElapsed time.Duration
		sleep      time.Duration
		busy       time.Duration // time spent in the operation per attempt
		want       []time.Duration
	}{
		{"fits exactly", time.Second, 250 * ms, 0, []time.Duration{250 * ms, 250 * ms, 250 * ms, 250 * ms, backoff.Stop}},
		{"last sleep would overshoot", time.Second, 300 * ms, 0, []time.Duration{300 * ms, 300 * ms, 300 * ms, backoff.Stop}},
		{"operation time counts", time.Second, 100 * ms, 200 * ms, []time.Duration{100 * ms, 100 * ms, 100 * ms, backoff.Stop}},
		{"sleep longer than budget", time.Second, 2 * time.Second, 0, []time.Duration{backoff.Stop}},
		{"zero budget, zero sleep", 0, 0, time.Nanosecond, []time.Duration{backoff.Stop}},
		{"zero sleep", 10 * ms, 0, 4 * ms, []time.Duration{0, 0, backoff.Stop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			b := withClock(t, UntilElapsed(tt.maxElapsed, tt.sleep), clock).NewBackOff()
			var got []time.Duration
			for range 100 {
				clock.Advance(tt.busy) // the attempt
				d := b.NextBackOff()
				got = append(got, d)
				if d == backoff.Stop {
					break
				}
				clock.Advance(d) // the sleep
			}
			if !equal(got, tt.want) {
				t.Errorf("schedule = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUntilElapsedStartsAtNewBackOff(t *testing.T) {
	clock := newFakeClock()
	p := withClock(t, UntilElapsed(time.Second, 100*time.Millisecond), clock)
	clock.Advance(time.Hour) // time passing before the operation is irrelevant
	b := p.NewBackOff()
	if d := b.NextBackOff(); d != 100*time.Millisecond {
		t.Fatalf("NextBackOff = %v, want 100ms", d)
	}
	clock.Advance(time.Second)
	if d := b.NextBackOff(); d != backoff.Stop {
		t.Fatalf("NextBackOff after the budget = %v, want Stop", d)
	}
	b.Reset()
	if d := b.NextBackOff(); d != 100*time.Millisecond {
		t.Fatalf("NextBackOff after Reset = %v, want 100ms", d)
	}
}

// TestDefaultElapsedBudget runs Default's schedule against a clock that
// advances by each sleep (operations failing instantly) and checks that no
// retry starts after 30 s and that the retry limit holds.
func TestDefaultElapsedBudget(t *testing.T) {
	const trials = 500
	minRetries, maxRetries, total := 1<<31, 0, 0
	for range trials {
		clock := newFakeClock()
		start := clock.Now()
		b := withClock(t, Default(), clock).NewBackOff()
		retries := 0
		for {
			d := b.NextBackOff()
			if d == backoff.Stop {
				break
			}
			clock.Advance(d)
			retries++
			if el := clock.Now().Sub(start); el > defaultMaxElapsed {
				t.Fatalf("retry %d starts %v after the operation began", retries, el)
			}
		}
		minRetries, maxRetries = min(minRetries, retries), max(maxRetries, retries)
		total += retries
	}
	// With every sleep at its maximum (75ms, 150ms, ..., 1.2s, then 2s)
	// the 30 s budget allows 18 retries; with every sleep at its minimum
	// it would allow 34, so the retry limit of 29 binds.
	if minRetries < 18 || maxRetries > defaultMaxRetries {
		t.Errorf("retries ranged over [%d, %d], want within [18, %d]", minRetries, maxRetries, defaultMaxRetries)
	}
	// On average the budget binds after about 21 retries.
	if mean := float64(total) / trials; mean < 20 || mean > 22 {
		t.Errorf("mean retries = %.2f, want about 21", mean)
	}
}

func TestSchedulesAreIndependent(t *testing.T) {
	p := NTimes(2, time.Millisecond)
	a, b := p.NewBackOff(), p.NewBackOff()
	a.NextBackOff()
	a.NextBackOff()
	if d := a.NextBackOff(); d != backoff.Stop {
		t.Fatalf("a: NextBackOff = %v, want Stop", d)
	}
	if d := b.NextBackOff(); d != time.Millisecond {
		t.Fatalf("b: NextBackOff = %v, want 1ms (schedules must not share state)", d)
	}
	a.Reset()
	if d := a.NextBackOff(); d != time.Millisecond {
		t.Fatalf("a after Reset: NextBackOff = %v, want 1ms", d)
	}
}

func TestInvalidPolicies(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
	}{
		{"Exponential zero base", Exponential(0, 3)},
		{"Exponential negative base", Exponential(-time.Second, 3)},
		{"BoundedExponential negative base", BoundedExponential(-1, time.Second, 3)},
		{"BoundedExponential base > maxSleep", BoundedExponential(2*time.Second, 50*time.Millisecond, 3)},
		{"BoundedExponential negative maxSleep", BoundedExponential(time.Millisecond, -1, 3)},
		{"NTimes negative n", NTimes(-1, time.Millisecond)},
		{"NTimes negative sleep", NTimes(3, -time.Millisecond)},
		{"UntilElapsed negative maxElapsed", UntilElapsed(-time.Second, time.Millisecond)},
		{"UntilElapsed negative sleep", UntilElapsed(time.Second, -time.Millisecond)},
		{"Forever negative sleep", Forever(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := tt.p.NewBackOff().NextBackOff(); d != backoff.Stop {
				t.Errorf("NextBackOff = %v, want Stop", d)
			}
			called := false
			err := Do(context.Background(), tt.p, func(context.Context) error {
				called = true
				return nil
			})
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("Do = %v, want ErrInvalidPolicy", err)
			}
			if called {
				t.Error("Do called fn with an invalid policy")
			}
			if Retryable(err) {
				t.Error("ErrInvalidPolicy is retryable")
			}
		})
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
