package recipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"

	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// Hold is one acquired node. It watches its node and the session, and
// closes Done the moment ownership is lost or can no longer be guaranteed.
// A Hold is safe for concurrent use.
type Hold struct {
	l       *Lock
	node    string
	path    string
	token   int64
	ep      *epoch // its session is the node's owner
	prefix  string // protected prefix of the node
	sweep   bool   // a duplicate of the node may appear: sweep the prefix when done
	tracked bool   // in ep's list of holds told of its end (under ep.holdsMu)

	// Under mu (packed here, with sweep and tracked).
	released bool
	mon      monitorState
	arming   bool // a read to (re)arm the own-node watch is under way (monitorWatching)
	armAgain bool // and another is wanted after it
	inSusp   bool // a suspension is in progress ([WithSuspensionTolerance])

	// ctx ends the monitor: it is cancelled by Release, or the epoch ends.
	// It is made when the monitor starts, under mu; a hold with no
	// monitor has none.
	ctx    context.Context
	cancel context.CancelFunc
	start  monotime // when the hold began
	prev   *Hold    // neighbours in that list
	next   *Hold
	// watchNow, for a hold monitored from the start, is closed when the
	// own-node watch is wanted: its loss signal was asked for, or it is
	// revocable or has a maximum hold time. Until then, or until a
	// suspension begins, its monitor sends no read.
	watchNow chan struct{} // closed under mu
	revoked  chan struct{} // closed (under mu) when a holder of a revocable lock is asked to let go

	mu     sync.Mutex
	done   chan struct{}
	err    error
	ownW   <-chan zk.Event // the acquire's watch on our node, for the monitor
	exited chan struct{}   // closed when the monitor, once started, ends
	ctxs   []*holdContext  // contexts handed out by Context, cancelled when the hold ends

	// susp is the state of suspensions, for a client that tolerates them
	// ([WithSuspensionTolerance]); nil for any other (most holds: kept
	// apart, so that they do not pay for it).
	susp *holdSuspension
}

// holdSuspension is a hold's state of suspensions, under its mu.
type holdSuspension struct {
	suspended chan struct{} // closed while a suspension is in progress
	resumed   chan struct{} // closed while none is
	cleared   int           // suspensions of the epoch the hold came through, or that began before it
}

// monotime is a reading of the monotonic clock: nanoseconds since
// clockBase. Half the size of a time.Time, which a Hold would keep for
// the same use.
type monotime int64

var clockBase = time.Now()

func monoNow() monotime { return monotime(time.Since(clockBase)) }

// since returns the time elapsed since t.
func (t monotime) since() time.Duration { return time.Duration(monoNow() - t) }

// newHold starts watching an acquired node. ownW is the watch already set
// on it, if any.
func newHold(l *Lock, node, prefix string, token int64, ep *epoch, sweep bool, ownW <-chan zk.Event) *Hold {
	h := &Hold{
		l:       l,
		node:    node,
		path:    join(l.dir, node),
		token:   token,
		prefix:  prefix,
		sweep:   sweep,
		ep:      ep,
		done:    make(chan struct{}),
		start:   monoNow(),
		revoked: neverClosed,
		ownW:    ownW,
	}
	if l.spec.Revocable {
		h.revoked = make(chan struct{})
	}
	if l.c.cfg.tolerateSuspension {
		h.susp = &holdSuspension{suspended: make(chan struct{}), resumed: closedChan}
		s, n := l.c.suspension(ep)
		h.susp.cleared = n
		if s.began {
			h.susp.cleared-- // born suspended: it must come through this one
		}
	}
	if l.spec.Revocable || l.spec.MaxHold > 0 || l.c.cfg.tolerateSuspension {
		// The monitor rides out suspensions, keeps time and carries
		// revocation through the watch: these holds are monitored from the
		// start, and the last two watch their node at once.
		h.watchNow = make(chan struct{})
		if l.spec.Revocable || l.spec.MaxHold > 0 {
			h.wantWatch()
		}
		h.startMonitor()
	} else {
		ep.track(h)
	}
	return h
}

// monitorState says whether a hold's monitor runs.
type monitorState uint8

const (
	// monitorIdle: nobody has asked for the loss signal. The hold has no
	// goroutine and no watch of its own; the end of its epoch is recorded
	// through the epoch's list of holds (epoch.track). Most holds are released in this
	// state, so a lock cycle costs no goroutine and no read.
	monitorIdle monitorState = iota
	// monitorRunning: a monitor goroutine watches the hold (a revocable
	// hold, one with a maximum hold time, or any hold of a client that
	// tolerates suspensions).
	monitorRunning
	monitorNever // released before anyone asked
	// monitorWatching: the loss signal was asked for; the hold watches its
	// node through the client's dispatch of node events (dispatch.go),
	// with no goroutine of its own, and its epoch through the epoch's list.
	monitorWatching
)

// neverClosed is the channel of what never happens to a hold: a
// revocation of a lock that is not revocable, a suspension of a client
// that does not tolerate them.
var neverClosed = make(chan struct{})

// startMonitor starts the monitor (once): it watches our node and the
// epoch until the hold ends, and records the loss. It starts when the loss
// signal is first asked for (Done, Err, Suspended, Resumed), or at once
// for a hold that needs watching whoever asks (see newHold).
func (h *Hold) startMonitor() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mon != monitorIdle {
		return
	}
	h.mon = monitorRunning
	h.ep.untrack(h) // the monitor watches the epoch from now on
	h.ctx, h.cancel = context.WithCancel(h.ep.ctx)
	h.exited = make(chan struct{})
	ownW := h.ownW
	h.ownW = nil
	if !h.l.c.goroutine(func() { h.monitor(ownW) }) {
		if h.err == nil && !h.released {
			h.endLocked(lostError(ErrClosed))
		}
		close(h.exited)
	}
}

// revokeMarker is the data that asks the holder of a revocable lock to let
// go: a revoker writes it to the holder's node ([Lock.Revoke]). It is
// Curator's, so a Curator revoker reaches a holder of this library and the
// other way round.
const revokeMarker = "__REVOKE__"

// Revoked returns a channel closed when someone asks this hold to let go
// (see [LockSpec.Revocable]); it is never closed for a hold of a lock that
// is not revocable. Letting go is up to the holder: release as soon as the
// work allows.
func (h *Hold) Revoked() <-chan struct{} { return h.revoked }

// Node returns the name of the node (a child of the lock directory).
func (h *Hold) Node() string { return h.node }

// Token returns the fencing token: the czxid of the node, which is unique
// and strictly increasing across the whole ensemble, so successive holders
// have increasing tokens. Pass it to the systems the holder writes to, so
// they can reject a stale holder.
func (h *Hold) Token() int64 { return h.token }

// Done returns a channel closed when the hold ends: when ownership is lost
// (see [Hold.Err]) or after [Hold.Release].
//
// Done does two things besides answering. It has the hold watch its node
// now, if it does not yet: a hold starts watching its node (with a
// goroutine of its own and a read) only when its loss signal is first
// asked for (Done, Err, Suspended or Resumed), so that a hold nobody asks
// about costs neither; the end of its session or connection is recorded
// all the same, and a deletion of its node by another client is found
// when the loss signal is asked for. (A revocable hold, one with a
// maximum hold time, and every hold of a client that tolerates
// suspensions are watched from the start.) And it judges the silence of the
// connection now: if nothing has been heard for longer than the loss
// timeout, the loss is recorded first (so the channel is already closed),
// or, with [WithSuspensionTolerance], the suspension begins.
func (h *Hold) Done() <-chan struct{} {
	h.wantWatch()
	h.checkSilence()
	return h.done
}

// Suspended returns a channel that is closed while a suspension of the
// session is in progress: the client has heard nothing from ZooKeeper for
// longer than the loss timeout, and tolerates it ([WithSuspensionTolerance])
// rather than declaring the hold lost. While suspended, the holder must
// stop acting as holder: the server may expire the session, and grant the
// lock to another client, before this one can learn of it.
//
// A suspension ends in one of two ways. The hold is kept: the same session
// answered again and the hold's node, read again, is still owned by it;
// [Hold.Resumed] closes, and Suspended from then on returns a new, open
// channel for the next suspension (the one obtained during the suspension
// stays closed: ask again). Or the hold is lost: Done closes and Err says
// why ([ErrSessionExpired], [ErrNodeDeleted], ...); the channel stays
// closed.
//
// Like Err, Suspended is exact at the moment of the call: a silence past
// the loss timeout that the client has not acted on yet begins the
// suspension now. Without [WithSuspensionTolerance] no suspension ever
// begins (a silence past the loss timeout is a loss) and the channel is
// never closed. After the hold ended, it is the channel of the hold's last
// state: closed if it was lost while suspended, open (and never closed)
// otherwise.
//
// Like Done, Suspended also has the hold watch its node now if it does
// not yet, and records a loss (without tolerance) that the silence means.
func (h *Hold) Suspended() <-chan struct{} {
	h.wantWatch()
	h.checkSilence()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.susp == nil {
		return neverClosed
	}
	return h.susp.suspended
}

// Resumed returns a channel that is closed when the suspension in progress
// (see [Hold.Suspended]) is over and the hold was kept: from then on the
// holder may act again. While no suspension is in progress it returns a
// closed channel. If the hold is lost during the suspension, the channel
// is never closed: wait for Done as well.
//
// Like Done, Resumed first has the hold watch its node now if it does not
// yet, and judges the silence of the connection: a silence past the loss
// timeout begins a suspension (or, without tolerance, is recorded as the
// loss).
func (h *Hold) Resumed() <-chan struct{} {
	h.wantWatch()
	h.checkSilence()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.susp == nil {
		return closedChan
	}
	return h.susp.resumed
}

// suspend records that a suspension began (once per suspension).
func (h *Hold) suspend() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inSusp || h.err != nil || h.susp == nil {
		return
	}
	h.inSusp = true
	close(h.susp.suspended)
	h.susp.resumed = make(chan struct{})
	h.l.c.log.Warn("hold suspended", "path", h.l.dir, "node", h.node)
}

// pending reports whether a suspension of the hold's epoch began that the
// hold has not come through yet.
func (h *Hold) pending() bool {
	_, n := h.l.c.suspension(h.ep)
	h.mu.Lock()
	defer h.mu.Unlock()
	cleared := 0 // without tolerance, no suspension is ever cleared
	if h.susp != nil {
		cleared = h.susp.cleared
	}
	return n > cleared
}

// resume records that the first n suspensions of the epoch are over, the
// node's ownership having been checked after the last of them; it reports
// false, and changes nothing, when another suspension began since or the
// hold ended.
func (h *Hold) resume(n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, now := h.l.c.suspension(h.ep); h.err != nil || s.began || now != n {
		return false
	}
	if h.susp == nil { // not tolerated: a suspension ends the hold, never resumes it
		return false
	}
	h.susp.cleared = n
	if h.inSusp {
		h.inSusp = false
		h.susp.suspended = make(chan struct{})
		close(h.susp.resumed)
		h.l.c.log.Info("hold kept through a suspension", "path", h.l.dir, "node", h.node)
	}
	return true
}

// Err returns nil while the hold is in force; after Done is closed it wraps
// [ErrLost] and the reason ([ErrSessionExpired], [ErrNodeDeleted],
// [ErrConnectionSuspended], [ErrClosed]), or is [ErrNotHeld] after a
// successful [Hold.Release].
//
// Err is exact at the moment of the call: if the client has heard nothing
// from ZooKeeper for longer than the loss timeout (a paused process, a
// partition the watchdog has not reported yet), it reports the loss
// ([ErrConnectionSuspended]) now. With [WithSuspensionTolerance] such a
// silence suspends the hold instead (see [Hold.Suspended]) and Err stays
// nil, until the hold is lost. Like Done, Err also has the hold watch its
// node now, if it does not yet.
func (h *Hold) Err() error {
	h.wantWatch()
	h.checkSilence()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// lose records the loss (first reason wins) and, when the session may still
// own the node, has it deleted in the background so it does not block the
// queue.
func (h *Hold) lose(reason error) {
	h.mu.Lock()
	if h.err != nil || h.released {
		// Ended, or Release is deleting the node and will say how that
		// went.
		h.mu.Unlock()
		return
	}
	// Counted before Done closes, so that whoever Done wakes sees it.
	c := h.l.c
	c.stats.lost.Add(1)
	c.ins.losses.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		telemetry.AttrRecipe.String(h.l.spec.Recipe), telemetry.AttrLossReason.String(lossReason(reason)))))
	h.endLocked(lostError(reason))
	h.mu.Unlock()
	c.log.Warn("lock lost", "path", h.l.dir, "node", h.node, "reason", reason)
	if mayStillOwn(reason) {
		c.cleanup(h.cleanupJob())
	}
}

// mayStillOwn reports whether, after a loss for reason, the session may
// still own the node, which must then be deleted.
func mayStillOwn(reason error) bool {
	if errors.Is(reason, errPresumedExpired) {
		return true
	}
	return !errors.Is(reason, ErrNodeDeleted) && !errors.Is(reason, ErrSessionExpired) && !errors.Is(reason, ErrClosed)
}

// cleanupJob describes the deletion of the node (and any duplicate).
func (h *Hold) cleanupJob() cleanupJob {
	return cleanupJob{dir: h.l.dir, path: h.path, prefix: h.prefix, sweep: h.sweep}
}

// Release deletes the node, after which someone else may hold. Connection
// loss is retried under the client's policy until ctx ends; if the node
// cannot be deleted by then, its deletion goes on in the background for as
// long as the session lives, and the error wraps ctx.Err().
//
// If the hold was lost, Release deletes nothing another client could own
// and returns the loss error (wrapping [ErrLost]). A second Release returns
// [ErrNotHeld]. In every case but a nil ctx (an error wrapping
// [ErrInvalidArgument], with the hold unchanged) the hold is over when
// Release returns.
func (h *Hold) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return ErrNotHeld
	}
	h.released = true
	lost := h.err
	exited := h.exited // nil: no monitor, and none will start
	stopMonitor := h.cancel
	if h.mon == monitorIdle {
		h.mon = monitorNever
	}
	if lost == nil {
		// Whoever works under the hold's contexts stops before the node
		// goes.
		h.cancelContextsLocked(ErrNotHeld)
	}
	h.mu.Unlock()
	h.ep.untrack(h)
	// The monitor stops while the delete is under way (it reports no loss
	// once released is set): waiting for it first would put a goroutine
	// switch before the hand-off to the next in line.
	if exited != nil {
		stopMonitor()
		defer func() { <-exited }()
	}
	if lost != nil {
		return lost
	}
	c := h.l.c
	ctx, span := h.l.startSpan(ctx, h.l.releaseSpan)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrRecipe.String(h.l.spec.Recipe), telemetry.AttrPath.String(h.l.dir),
			telemetry.AttrNode.String(h.node), telemetry.AttrToken.Int64(h.token))
	}
	err, leftOver := h.releaseError(h.deleteNode(ctx))
	if leftOver {
		c.cleanup(h.cleanupJob())
	}
	if err == nil {
		if h.sweep {
			c.cleanup(cleanupJob{dir: h.l.dir, prefix: h.prefix, sweep: true})
		}
		h.finish(ErrNotHeld)
		return nil
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	h.finish(err)
	return err
}

// deleteNode deletes the node for Release, retrying connection loss under
// the client's policy until ctx ends, as long as the hold's session lasts.
func (h *Hold) deleteNode(ctx context.Context) error {
	c := h.l.c
	maybeDeleted := false // a delete was sent whose reply was lost
	err := c.retryDo(ctx, h.l.releaseNote, func(ctx context.Context) error {
		if sid := c.zk.SessionID(); sid != 0 && sid != h.ep.session {
			return ErrSessionExpired
		}
		err := c.delete(ctx, h.path)
		if retry.Retryable(err) {
			maybeDeleted = true
		}
		return err
	})
	if maybeDeleted && errors.Is(err, zk.ErrNoNode) {
		// Our own earlier delete was applied; its reply was lost. (The
		// hold was in force until then: a deletion by anyone else before
		// Release would have been reported as a loss.)
		return nil
	}
	return err
}

// releaseError is Release's error for the outcome err of deleteNode, and
// whether the node may still be there (a delete that failed for another
// reason than the hold's end), to be left to cleanup.
func (h *Hold) releaseError(err error) (_ error, leftOver bool) {
	switch {
	case err == nil:
		return nil, false
	case errors.Is(err, zk.ErrNoNode):
		return lostError(ErrNodeDeleted), false
	case errors.Is(err, ErrSessionExpired), errors.Is(err, zk.ErrSessionExpired):
		return lostError(ErrSessionExpired), false
	case errors.Is(err, ErrClosed):
		return lostError(ErrClosed), false
	}
	return opError("release", h.path, err), true
}

// finish ends the hold with err unless a loss was recorded first.
func (h *Hold) finish(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.endLocked(err)
	}
}

// endLocked records why the hold ended and closes Done. h.mu is held (or
// the hold is not shared yet) and h.err is nil.
func (h *Hold) endLocked(err error) {
	h.err = err
	defer close(h.done) // after the metrics: whoever Done wakes sees them
	defer h.cancelContextsLocked(err)
	h.ep.untrack(h)
	if h.mon == monitorWatching {
		h.l.c.unwatchNode(h)
		if h.cancel != nil {
			h.cancel() // a read arming the watch
		}
	}
	ctx := context.Background()
	h.l.c.ins.holders.Add(ctx, -1, h.l.attrs)
	end := "lost"
	switch {
	case errors.Is(err, ErrNotHeld):
		end = "released"
	case errors.Is(err, ErrMaxHoldExceeded):
		end = "max_hold"
	}
	h.l.c.ins.holdDuration.Record(ctx, h.start.since().Seconds(), h.l.endAttrs[end])
}
