package recipe

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/retry"
)

// Every backoff in the engine and the recipes takes its schedule from the
// client's retry policy ([WithRetryPolicy]):
//
//   - operations a caller waits for (acquire, release, listing) retry
//     connection loss under the policy as it is, and give up when it does;
//   - background loops that must go on until something else stops them
//     (cleanup of abandoned nodes, re-arming a hold's watch, re-campaigning,
//     observing a leader) follow the same schedule and, where the policy
//     would give up, keep its last pace, at least minBackgroundWait.

// waiter returns a fresh schedule for an operation a caller waits for;
// note (from noteRetry) counts and logs its retries.
func (c *Client) waiter(note func(error, time.Duration)) *retry.Waiter {
	return retry.NewWaiter(firstAtOnce{c.cfg.retry}, note)
}

// waitRetry is w.Wait, except that a wait after errNoTrustedSession ends
// as soon as a session is trusted again: the pause was begun while the
// session was silent, and sleeping it out once the fault is over would
// add up to the policy's longest pause, once per suspension, to the time
// an acquire takes to get going again (docs/failure-model.md's B allows
// one). The policy still decides whether to retry at all.
func (c *Client) waitRetry(ctx context.Context, w *retry.Waiter, err error) error {
	if !errors.Is(err, errNoTrustedSession) {
		return w.Wait(ctx, err)
	}
	trusted := c.trustChange()
	if c.currentEpoch() != nil {
		trusted = closedChan // trusted since the phase looked: go on at once
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-trusted:
			cancel()
		case <-done:
		}
	}()
	werr := w.Wait(wctx, err)
	if werr != nil && ctx.Err() == nil && wctx.Err() != nil {
		// Woken by a session trusted anew, which is progress as a
		// round trip is: retry now, on a fresh schedule.
		w.Reset()
		return nil
	}
	return werr
}

// retryDo runs fn under the client's retry policy.
func (c *Client) retryDo(ctx context.Context, note func(error, time.Duration), fn func(ctx context.Context) error) error {
	return retry.DoNotify(ctx, firstAtOnce{c.cfg.retry}, fn, note)
}

// firstAtOnce is a policy that allows the retries p allows, the first of
// them without a pause. A request sent while the connection is down waits
// in the client for the reconnect (which starts at once, see
// hostProvider), so the first retry after a connection loss costs nothing
// and a dropped connection costs a round trip, not the policy's first
// sleep; if the connection stays down, the next retries follow p.
type firstAtOnce struct{ p retry.Policy }

func (f firstAtOnce) NewBackOff() backoff.BackOff {
	p := f.p
	if p == nil {
		p = retry.None()
	}
	return &firstAtOnceBackOff{next: p.NewBackOff()}
}

type firstAtOnceBackOff struct {
	next backoff.BackOff
	used bool
}

func (b *firstAtOnceBackOff) NextBackOff() time.Duration {
	d := b.next.NextBackOff()
	if d >= 0 && !b.used {
		b.used = true
		return 0
	}
	return d
}

func (b *firstAtOnceBackOff) Reset() {
	b.next.Reset()
	b.used = false
}

// noteRetry counts and logs the retries of operation what. Recipes make
// theirs once, not per call.
func (c *Client) noteRetry(what string) func(err error, wait time.Duration) {
	return func(err error, wait time.Duration) { c.retried(what, err, wait) }
}

// retried counts, and logs, a retry of the operation what.
func (c *Client) retried(what string, err error, wait time.Duration) {
	c.stats.retries.Add(1)
	if c.debugging() {
		c.log.Debug("retrying after connection loss", "op", what, "err", err, "wait", wait)
	}
}

// minBackgroundWait is the shortest pause between two tries of a
// background loop once the client's retry policy has no more retries to
// give, or when it allows none: such loops keep the policy's last pace, at
// least this.
const minBackgroundWait = 100 * time.Millisecond

// Backoff returns a fresh schedule, under the client's retry policy, for
// a loop that must go on until something outside it stops it (a recipe's
// re-campaigning or observing): it follows the policy and, where the
// policy would give up, keeps its last pace, at least 100ms.
func (c *Client) Backoff() *retry.Pacer {
	return retry.NewPacer(c.cfg.retry, minBackgroundWait)
}

// debugging reports whether debug logs are wanted: hot paths check it
// before building a log call's arguments.
func (c *Client) debugging() bool { return c.log.Enabled(context.Background(), slog.LevelDebug) }
