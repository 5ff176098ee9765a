package recipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// epoch is a period of trust in one session: it begins when the client has a
// session and ends (done closed, err set) when the session expires, the
// client is closed, or the connection has been silent past the loss timeout.
// Everything held is tied to the epoch in which it was verified, so one
// closed channel tells every holder at once, however many there are.
//
// A client that tolerates suspensions ([WithSuspensionTolerance]) does not
// end the epoch at the loss timeout: it suspends it, and resumes it when the
// same session answers again.
type epoch struct {
	session int64
	ctx     context.Context // ends with the epoch
	end     context.CancelFunc
	done    <-chan struct{} // ctx.Done()
	err     error           // why it ended; set before done is closed
	susp    *suspension     // in progress, or the next one; under Client.mu
	nsusp   int             // suspensions begun; under Client.mu

	// The holds with no monitor of their own, told of the epoch's end by
	// one function of the epoch's rather than each by a context of its
	// own: a list through the holds themselves.
	holdsMu   sync.Mutex
	holds     *Hold
	holdsOver bool // the epoch ended and its holds were told
}

// suspension is one silence of a tolerant client's session past the loss
// timeout: begun is closed when it begins, over when the same session
// answers again. An epoch that ends during a suspension leaves over open.
type suspension struct {
	begun chan struct{}
	over  chan struct{}
	began bool // under Client.mu
}

func newSuspension() *suspension {
	return &suspension{begun: make(chan struct{}), over: make(chan struct{})}
}

func (c *Client) newEpoch(session int64) *epoch {
	ctx, cancel := context.WithCancel(c.lifetime)
	e := &epoch{session: session, ctx: ctx, end: cancel, done: ctx.Done(), susp: newSuspension()}
	context.AfterFunc(ctx, e.loseHolds)
	return e
}

// track has h told when e ends (at once, if it has).
func (e *epoch) track(h *Hold) {
	e.holdsMu.Lock()
	if e.holdsOver {
		e.holdsMu.Unlock()
		h.loseIfEpochEnded()
		return
	}
	h.tracked = true
	h.next = e.holds
	if e.holds != nil {
		e.holds.prev = h
	}
	e.holds = h
	e.holdsMu.Unlock()
}

// untrack forgets h, if tracked.
func (e *epoch) untrack(h *Hold) {
	e.holdsMu.Lock()
	defer e.holdsMu.Unlock()
	if !h.tracked {
		return
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		e.holds = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	}
	h.prev, h.next, h.tracked = nil, nil, false
}

// loseHolds tells every tracked hold that e ended.
func (e *epoch) loseHolds() {
	e.holdsMu.Lock()
	e.holdsOver = true
	var holds []*Hold
	for h := e.holds; h != nil; {
		next := h.next
		h.prev, h.next, h.tracked = nil, nil, false
		holds = append(holds, h)
		h = next
	}
	e.holds = nil
	e.holdsMu.Unlock()
	for _, h := range holds {
		h.loseIfEpochEnded()
	}
}

func (e *epoch) ended() bool { return e.ctx.Err() != nil }

// errPresumedExpired ends the epoch of a tolerant client that has heard
// nothing for the whole session timeout: the server may have expired the
// session, but has not said so, so the session may yet answer (and still
// own the nodes of the holds lost with it, which are then cleaned up).
var errPresumedExpired = fmt.Errorf("%w (presumed: nothing heard for the whole session timeout)", ErrSessionExpired)

// suspension returns e's suspension in progress, or the next one to
// begin, and how many of its suspensions began so far.
func (c *Client) suspension(e *epoch) (s *suspension, begun int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.susp, e.nsusp
}

// suspended reports whether e is live and suspended now.
func (c *Client) suspended(e *epoch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !e.ended() && e.susp.began
}

// monotonic is the seam's clock: the time since it was made, monotonic.
func (c *Client) monotonic() int64 { return int64(c.zk.Now()) }

// heard notes that a server was heard from now.
func (c *Client) heard() { c.heardAt(c.monotonic()) }

// heardAt notes that a server was alive at sentAt (by monotonic): it
// answered a request written then. Only answers to our own requests count:
// bytes that merely arrive (watch notifications, or replies buffered
// before the process was paused) prove nothing about the server now.
func (c *Client) heardAt(sentAt int64) {
	for {
		last := c.lastHeard.Load()
		if sentAt <= last || c.lastHeard.CompareAndSwap(last, sentAt) {
			return
		}
	}
}

// silence is how long, on the seam's clock, nothing was heard from a
// server.
func (c *Client) silence() time.Duration {
	return c.zk.Now() - time.Duration(c.lastHeard.Load())
}

// suspendIfSilent judges the silence now, as the watchdog would at its next
// tick: past the loss timeout, the current epoch ends (or, tolerating
// suspensions, is suspended, and ends past the session timeout). It reports
// whether the client was silent past the loss timeout.
func (c *Client) suspendIfSilent() bool {
	silent := c.silence()
	if silent <= c.lossTimeout() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.judgeSilenceLocked(silent)
	return true
}

// judgeSilenceLocked applies the silence rules to the current epoch: past
// the loss timeout it ends, with ErrConnectionSuspended; a tolerant client
// suspends it instead, and ends it only past the whole session timeout.
// c.mu is held.
func (c *Client) judgeSilenceLocked(silent time.Duration) {
	e := c.cur
	if e == nil || e.ended() || silent <= c.lossTimeout() {
		return
	}
	heard := silent.Round(time.Millisecond)
	switch {
	case !c.cfg.tolerateSuspension:
		c.endEpochLocked(e, fmt.Errorf("%w (nothing heard for %v)", ErrConnectionSuspended, heard))
	case silent > c.SessionTimeout():
		c.endEpochLocked(e, fmt.Errorf("%w: nothing heard for %v", errPresumedExpired, heard))
	case !e.susp.began:
		e.susp.began = true
		e.nsusp++
		close(e.susp.begun)
		c.stats.suspensions.Add(1)
		c.log.Warn("zookeeper session suspended; holders must stop acting until it answers again",
			"session", fmt.Sprintf("0x%x", e.session), "silence", heard)
	}
}

// resumeLocked trusts the session again after a silence, once it answers
// on the same session: a suspended epoch resumes (its holds check their
// nodes before they clear); an epoch that ended for the silence is
// replaced by a new one, and what was held stays lost. c.mu is held.
func (c *Client) resumeLocked() {
	e := c.cur
	if e == nil || !c.isConn || c.zk.SessionID() != e.session {
		return
	}
	switch {
	case !e.ended() && e.susp.began:
		close(e.susp.over)
		e.susp = newSuspension()
		c.trustedLocked()
		c.log.Info("zookeeper session answers again; suspension over", "session", fmt.Sprintf("0x%x", e.session))
	case e.ended() && (errors.Is(e.err, ErrConnectionSuspended) || errors.Is(e.err, errPresumedExpired)):
		// The connection outlived the silence (a stalled server or a
		// paused process) and the server answers again on the same
		// session: trust it anew. What was held stays lost.
		c.cur = c.newEpoch(e.session)
		c.trustedLocked()
		c.log.Debug("zookeeper session trusted again", "session", fmt.Sprintf("0x%x", e.session))
	}
}

// watchdog ends (or, tolerating suspensions, suspends) the current epoch
// when the client has heard nothing from any server for longer than the
// loss timeout, and trusts the session again when it answers. go-zookeeper pings every third
// of the session timeout, so a healthy connection is never silent that long;
// the server can expire the session no sooner than about two thirds of the
// session timeout after our last successful exchange, so with the default of
// one half every holder is told first.
func (c *Client) watchdog() {
	for {
		lt := c.lossTimeout()
		tick := min(max(lt/20, 5*time.Millisecond), 250*time.Millisecond)
		t := time.NewTimer(tick)
		select {
		case <-c.lifetime.Done():
			t.Stop()
			return
		case <-t.C:
		}
		silent := c.silence()
		c.mu.Lock()
		if silent > lt {
			c.judgeSilenceLocked(silent)
		} else if silent <= lt/2 {
			c.resumeLocked()
		}
		c.mu.Unlock()
	}
}

// trustedLocked wakes every wait for a trusted session (waitRetry): the
// current epoch is in force now, new or resumed. c.mu is held.
func (c *Client) trustedLocked() {
	close(c.trust)
	c.trust = make(chan struct{})
}

// rewatched is told by the transport that the server answered the watches
// go-zookeeper set again on a new connection (setWatches). go-zookeeper
// v1.0.4 may send them with a last zxid past a change it has not seen (a
// reply to a request queued during the outage can be read before it
// builds them), and the server then never fires those watches for that
// change: every wait that set a watch before rewatchChange gave it looks
// again (a listing after this answer sees every change the watches
// skipped, and the watches fire for every later one).
func (c *Client) rewatched() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rewatchLocked()
}

// rewatchLocked closes the channel rewatchChange gave out, and replaces it.
// The end of an epoch closes it too (endEpochLocked): a waiter then needs
// to look again as well, and one channel to wait on for both costs it less
// than two. c.mu is held.
func (c *Client) rewatchLocked() {
	if c.rewatch != nil {
		close(c.rewatch)
	}
	c.rewatch = make(chan struct{})
}

// rewatchChange returns a channel closed the next time the server answers
// go-zookeeper's watches set again (see rewatched), or the next time an
// epoch ends. Take it before the request that sets (or relies on) a watch.
func (c *Client) rewatchChange() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rewatch == nil {
		c.rewatch = make(chan struct{})
	}
	return c.rewatch
}

// trustChange returns a channel closed the next time a session is trusted
// anew.
func (c *Client) trustChange() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trust
}
