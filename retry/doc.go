// Package retry decides when a failed ZooKeeper operation is tried again.
//
// It is the Go counterpart of Apache Curator's RetryPolicy family, built on
// [backoff.BackOff] schedules:
//
//	Curator                           retry
//	ExponentialBackoffRetry           [Exponential]
//	BoundedExponentialBackoffRetry    [BoundedExponential]
//	RetryNTimes                       [NTimes]
//	RetryOneTime                      NTimes(1, sleep)
//	RetryUntilElapsed                 [UntilElapsed]
//	RetryForever                      [Forever]
//	(no retries)                      [None]
//
// A [Policy] is immutable and safe for concurrent use. Because a
// [backoff.BackOff] carries state (the retry count, the current interval,
// the start time), a Policy never hands out a shared schedule: every call
// to [Policy.NewBackOff] returns a fresh one, meant for exactly one
// operation.
//
// [Do] and [DoNotify] run an operation under a policy. Only errors that
// [Retryable] reports as transient (the connection-loss class: the client
// lost or is re-establishing its connection, but the session may still be
// alive) are retried; every other error is returned at once and unchanged,
// so callers can test it with [errors.Is]. When the schedule gives up, the
// returned error wraps both [ErrGaveUp] and the last error. When the
// context ends, the returned error wraps both the context's error and the
// last error.
//
// [Default] is the policy the recipes use unless told otherwise.
//
// # Invalid arguments
//
// The constructors never panic. Given an invalid argument (a negative
// duration, a negative retry count, a base larger than the cap, ...) they
// return a policy that [Do] and [DoNotify] reject with an error wrapping
// [ErrInvalidPolicy] before calling the operation. The schedule such a
// policy returns from NewBackOff never retries, so code that uses the
// schedule directly degrades to a single attempt.
package retry
