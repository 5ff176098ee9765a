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

// wantWatch has the monitor watch our node now, if it does not yet: it
// starts a hold's monitor, or tells the one monitoring it from the start.
func (h *Hold) wantWatch() {
	if h.watchNow == nil {
		h.watchOwn()
		return
	}
	h.mu.Lock()
	if !isClosed(h.watchNow) {
		close(h.watchNow)
	}
	h.mu.Unlock()
	h.startMonitor()
}

// watchOwn has a hold nobody asked about yet watch its node (once),
// without a goroutine of its own: it registers with the client's dispatch
// of node events and takes over the watch its acquire set, or, when the
// acquire set none, reads the node once to set it.
func (h *Hold) watchOwn() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mon != monitorIdle {
		return
	}
	h.mon = monitorWatching
	ownW := h.ownW
	h.ownW = nil
	switch {
	case !h.l.c.watchNode(h, ownW):
		if h.err == nil && !h.released {
			h.endLocked(lostError(ErrClosed))
		}
	case ownW == nil:
		h.armLocked()
	}
}

// armLocked has the node read again, setting the watch on it, unless a
// read is under way (then one more follows it). h.mu is held.
func (h *Hold) armLocked() {
	if h.err != nil || h.released {
		return
	}
	if h.arming {
		h.armAgain = true
		return
	}
	h.arming = true
	ctx, cancel := context.WithCancel(h.ep.ctx)
	h.cancel = cancel
	if !h.l.c.goroutine(func() { h.arm(ctx, cancel) }) {
		cancel()
		h.arming, h.cancel = false, nil
		h.endLocked(lostError(ErrClosed))
	}
}

// arm reads the node, setting the watch on it, as often as armLocked asked
// for it, and records what the last read found: the node gone or owned by
// another session, or, when ctx ended first, the end of the epoch.
func (h *Hold) arm(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for {
		_, err := h.rearm(ctx) // the watch's events reach nodeEvent
		h.mu.Lock()
		again := h.armAgain && err == nil && ctx.Err() == nil
		h.armAgain = false
		if !again {
			h.arming = false
			h.cancel = nil
		}
		h.mu.Unlock()
		switch {
		case again:
			continue
		case err != nil:
			h.lose(err)
		case ctx.Err() != nil:
			h.loseIfEpochEnded()
		}
		return
	}
}

// nodeEvent applies an event on the hold's node, from the client's
// dispatch: a deletion or the end of the watches is the loss; a change of
// its data consumed the watch, which is set again.
func (h *Hold) nodeEvent(ev zk.Event) {
	if ev.Type == zk.EventNodeCreated {
		return // not ours to hear: our node exists until it is deleted
	}
	if loss := h.ownNodeEvent(ev); loss != nil {
		h.lose(loss)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armLocked()
}

// awaitWatchWanted waits, for a hold monitored from the start, until the
// own-node watch is wanted or a suspension begins (begun). It reports
// false when the hold's context ended first.
func (h *Hold) awaitWatchWanted(begun <-chan struct{}) bool {
	select {
	case <-h.watchNow:
	case <-begun:
	case <-h.ctx.Done():
		return false
	}
	return true
}

// monitor watches our node and the epoch until the hold ends, and records
// the loss if it was lost. Each concern is a piece of its own: the maximum
// hold time (maxHoldTimer), the first watch on our node of a hold
// monitored from the start (awaitWatchWanted), revocation (firstWatch, and rearm's check of the
// data), suspensions (rideOutStep, armOwn's interruption), the own-node
// watch (armOwn, awaitOwn) and what a deletion means (deletionCause).
func (h *Hold) monitor(ownW <-chan zk.Event) {
	defer close(h.exited)
	deadline, stop := h.maxHoldTimer()
	defer stop()
	m := &watchState{ownW: h.firstWatch(ownW), deadline: deadline, begun: h.nextSuspension()}
	if m.ownW == nil && h.watchNow != nil && !h.awaitWatchWanted(m.begun) {
		h.loseIfEpochEnded()
		return
	}
	for {
		over, loss := h.monitorOnce(m)
		switch {
		case loss != nil:
			h.lose(loss)
			return
		case over:
			h.loseIfEpochEnded()
			return
		}
	}
}

// watchState is what the monitor watches.
type watchState struct {
	ownW     <-chan zk.Event  // the watch on our node; nil: to be (re)armed
	deadline <-chan time.Time // the maximum hold time, if any
	begun    <-chan struct{}  // closed when a suspension begins, if tolerated
}

// monitorOnce takes one step of the monitor: it rides out a suspension,
// (re)arms the watch on our node, or waits for what comes next. over
// reports that the hold's context ended (released, or the epoch ended);
// loss, that the hold is lost and why.
func (h *Hold) monitorOnce(m *watchState) (over bool, loss error) {
	if h.l.c.cfg.tolerateSuspension && h.pending() {
		return h.rideOutStep(m)
	}
	if m.ownW == nil {
		if over, loss := h.armOwn(m); over || loss != nil || m.ownW == nil {
			return over, loss // or suspended meanwhile: ride it out first
		}
	}
	return h.awaitOwn(m)
}

// maxHoldTimer returns a channel that delivers when the hold has lasted
// its maximum hold time (nil: no maximum), and a function that stops it.
func (h *Hold) maxHoldTimer() (<-chan time.Time, func()) {
	d := h.l.spec.MaxHold
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d - h.start.since())
	return t.C, func() { t.Stop() }
}

// firstWatch is the watch the monitor starts from: the one the acquire set
// on our node, except for a revocable lock, whose node is read once more
// (a revocation may have come before the watch).
func (h *Hold) firstWatch(ownW <-chan zk.Event) <-chan zk.Event {
	if h.l.spec.Revocable {
		return nil
	}
	return ownW
}

// nextSuspension returns a channel closed when the next suspension of the
// hold's epoch begins (or the one in progress began); nil when the client
// does not tolerate suspensions.
func (h *Hold) nextSuspension() <-chan struct{} {
	if !h.l.c.cfg.tolerateSuspension {
		return nil
	}
	s, _ := h.l.c.suspension(h.ep)
	return s.begun
}

// rideOutStep rides out the suspensions in progress (see rideOut) and
// watches for the next one.
func (h *Hold) rideOutStep(m *watchState) (over bool, loss error) {
	ch, err := h.rideOut(m.deadline)
	switch {
	case err != nil:
		return false, err
	case ch == nil:
		return true, nil
	}
	m.ownW, m.begun = ch, h.nextSuspension()
	return false, nil
}

// armOwn (re)arms the watch on our node: the hold was acquired without
// reading it, or its data changed. A node deleted meanwhile is found
// missing. A suspension that begins meanwhile interrupts the read, leaving
// m.ownW nil: it is signalled now, and the read is made when it is over.
func (h *Hold) armOwn(m *watchState) (over bool, loss error) {
	ctx, cancel := h.untilSuspended(m.begun)
	ch, err := h.rearm(ctx)
	cancel()
	switch {
	case err != nil:
		return false, err
	case ch == nil:
		return h.ctx.Err() != nil, nil
	}
	m.ownW = ch
	return false, nil
}

// awaitOwn waits for the end of the hold's context, the maximum hold time,
// a suspension or an event on our node.
func (h *Hold) awaitOwn(m *watchState) (over bool, loss error) {
	select {
	case <-h.ctx.Done(): // released, or the epoch ended
		return true, nil
	case <-m.deadline:
		return false, ErrMaxHoldExceeded // and the node is deleted: the next in line proceeds
	case <-m.begun:
		return false, nil // ride it out
	case ev := <-m.ownW:
		m.ownW = nil // someone changed our node's data: watch it again
		return false, h.ownNodeEvent(ev)
	}
}

// ownNodeEvent returns the loss an event on our node's watch means, or nil
// when the node is still ours (its data changed).
func (h *Hold) ownNodeEvent(ev zk.Event) error {
	switch ev.Type {
	case zk.EventNodeDeleted:
		return h.deletionCause()
	case zk.EventNotWatching:
		if errors.Is(ev.Err, zk.ErrSessionExpired) {
			return ErrSessionExpired
		}
		return ErrClosed
	}
	return nil
}

// deletionCause judges what the deletion of our node means. After a
// silence past the loss timeout (a paused process), it is most likely the
// server expiring the session, and the epoch's end says so; otherwise
// someone deleted it ([ErrNodeDeleted]). A client that tolerates
// suspensions has judged the silence already.
func (h *Hold) deletionCause() error {
	c := h.l.c
	if !c.cfg.tolerateSuspension && c.suspendIfSilent() && h.ep.ended() {
		return h.ep.err
	}
	return ErrNodeDeleted
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
		case err == nil && st.EphemeralOwner != h.ep.session:
			// Not ours (cannot happen while our session lives: our node's
			// name is unique): we hold nothing.
			return nil, ErrNodeDeleted
		case err == nil:
			if h.l.spec.Revocable && string(data) == revokeMarker {
				h.mu.Lock()
				if !isClosed(h.revoked) {
					close(h.revoked)
				}
				h.mu.Unlock()
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
