package recipe

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// checkSilence records the loss (or, tolerating suspensions, the
// suspension) at once when the client has been silent past the loss
// timeout, or the hold's epoch has ended, rather than when the watchdog or
// the monitor next looks.
func (h *Hold) checkSilence() {
	c := h.l.c
	if !c.suspendIfSilent() && !c.cfg.tolerateSuspension && !h.ep.ended() {
		return
	}
	// An epoch that ended (expiry, suspension, close) is reported now,
	// not when the monitor goroutine next runs.
	switch {
	case h.ep.ended():
		h.lose(h.ep.err)
	case h.pending():
		h.suspend()
	}
}

// wantWatch asks the monitor to arm the watch on our node now.
func (h *Hold) wantWatch() { h.watchOnce.Do(func() { close(h.watchNow) }) }

// lazyWatchDelay is how long a hold acquired without a watch on its own
// node waits before arming one, unless someone asks for its loss signal
// first (Done or Err). Most holds in a busy queue are released sooner, and
// then the watch, a read on every acquire, is never sent. Loss of the
// session or the connection is signalled as ever; only a deletion of the
// node by another client, during this delay, is reported up to a round
// trip after the delay instead of after the deletion.
const lazyWatchDelay = 100 * time.Millisecond

// awaitWatchWanted waits until the own-node watch is asked for,
// lazyWatchDelay has passed or a suspension begins (begun). It reports
// false when the hold's context ended first.
func (h *Hold) awaitWatchWanted(begun <-chan struct{}) bool {
	t := time.NewTimer(lazyWatchDelay)
	defer t.Stop()
	select {
	case <-h.watchNow:
	case <-t.C:
	case <-begun:
	case <-h.ctx.Done():
		return false
	}
	return true
}

// monitor watches our node and the epoch until the hold ends.
func (h *Hold) monitor(ownW <-chan zk.Event) {
	defer close(h.exited)
	var deadline <-chan time.Time // the maximum hold time, if any
	if d := h.l.spec.MaxHold; d > 0 {
		t := time.NewTimer(d - time.Since(h.start))
		defer t.Stop()
		deadline = t.C
	}
	tolerant := h.l.c.cfg.tolerateSuspension
	var begun <-chan struct{} // closed when a suspension begins, if tolerated
	if tolerant {
		s, _ := h.l.c.suspension(h.ep)
		begun = s.begun
	}
	if ownW == nil && !h.awaitWatchWanted(begun) {
		h.loseIfEpochEnded()
		return
	}
	if ownW != nil && h.l.spec.Revocable {
		ownW = nil // read the data once: a revocation may have come first
	}
	for {
		if tolerant && h.pending() {
			ch, err := h.rideOut(deadline)
			if err != nil {
				h.lose(err)
				return
			}
			if ch == nil {
				h.loseIfEpochEnded()
				return
			}
			ownW = ch
			s, _ := h.l.c.suspension(h.ep)
			begun = s.begun
			continue
		}
		if ownW == nil {
			// Acquired without reading our node, or its data changed:
			// (re)arm the watch. A node deleted meanwhile is found missing.
			// A suspension that begins meanwhile interrupts the read: it
			// is signalled now, and the read is made when it is over.
			ctx, cancel := h.untilSuspended(begun)
			ch, err := h.rearm(ctx)
			cancel()
			if err != nil {
				h.lose(err)
				return
			}
			if ch == nil && h.ctx.Err() == nil {
				continue // suspended
			}
			if ch == nil {
				h.loseIfEpochEnded()
				return
			}
			ownW = ch
		}
		select {
		case <-h.ctx.Done(): // released, or the epoch ended
			h.loseIfEpochEnded()
			return
		case <-deadline:
			h.lose(ErrMaxHoldExceeded) // and the node is deleted: the next in line proceeds
			return
		case <-begun:
			continue // ride it out, above
		case ev := <-ownW:
			switch ev.Type {
			case zk.EventNodeDeleted:
				// After a silence past the loss timeout (a paused
				// process), the deletion is most likely the server
				// expiring the session: say so, not "deleted by another".
				if !h.l.c.cfg.tolerateSuspension && h.l.c.suspendIfSilent() && h.ep.ended() {
					h.lose(h.ep.err)
					return
				}
				h.lose(ErrNodeDeleted)
				return
			case zk.EventNotWatching:
				if errors.Is(ev.Err, zk.ErrSessionExpired) {
					h.lose(ErrSessionExpired)
				} else {
					h.lose(ErrClosed)
				}
				return
			}
			ownW = nil // someone changed our node's data: watch it again
		}
	}
}

// rideOut waits out the suspensions of the hold's epoch: it marks the hold
// suspended, waits until the same session answers again, then reads the
// node (setting a new watch on it) to check that the session still owns
// it, and clears the suspension. It returns the new watch; (nil, nil) when
// the hold's context ended (released, or the epoch ended); or the loss: the
// node is gone or owned by another session ([ErrNodeDeleted]), the session
// expired, or the maximum hold time passed meanwhile.
func (h *Hold) rideOut(deadline <-chan time.Time) (<-chan zk.Event, error) {
	c := h.l.c
	h.suspend()
	for {
		s, n := c.suspension(h.ep)
		if isClosed(s.begun) {
			h.suspend()
			select {
			case <-s.over:
				continue
			case <-h.ctx.Done():
				return nil, nil
			case <-deadline:
				return nil, ErrMaxHoldExceeded
			}
		}
		ch, err := h.rearm(h.ctx) // checks the owner
		if ch == nil || err != nil {
			return ch, err
		}
		if h.resume(n) {
			return ch, nil
		}
		// Suspended again while the read was under way: its answer
		// proves nothing about now. Wait again, and read again.
	}
}

// untilSuspended returns a context derived from the hold's that also ends
// when begun is closed (a suspension begins). Call cancel when done.
func (h *Hold) untilSuspended(begun <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(h.ctx)
	if begun != nil {
		go func() {
			select {
			case <-begun:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// loseIfEpochEnded reports the end of the epoch as a loss, if that is what
// ended the hold's context (rather than Release).
func (h *Hold) loseIfEpochEnded() {
	if h.ep.ended() {
		h.lose(h.ep.err)
	}
}

// rearm sets the watch on our node again, retrying connection loss under
// the client's retry policy for as long as ctx (the hold's context, or one
// derived from it) lives, and checks that the node is still owned by the
// hold's session. It returns (nil, nil) when ctx ended.
func (h *Hold) rearm(ctx context.Context) (<-chan zk.Event, error) {
	c := h.l.c
	p := c.Backoff()
	for {
		data, st, ch, err := c.getDataW(ctx, h.path)
		switch {
		case err == nil && st.EphemeralOwner != h.session:
			// Not ours (cannot happen while our session lives: our node's
			// name is unique): we hold nothing.
			return nil, ErrNodeDeleted
		case err == nil:
			if h.l.spec.Revocable && string(data) == revokeMarker {
				h.revOnce.Do(func() { close(h.revoked) })
			}
			return ch, nil
		case errors.Is(err, zk.ErrNoNode):
			return nil, ErrNodeDeleted
		case errors.Is(err, zk.ErrSessionExpired):
			return nil, ErrSessionExpired
		}
		if !p.Pause(ctx) {
			return nil, nil
		}
	}
}
