package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// errTermOver is the cause of the cancellation of a term's context when
// the term's function returned.
var errTermOver = errors.New("leader: term function returned")

// errNoReturn is the cause of the cancellation of a term's context when
// the term's function did not return: it panicked (or called
// runtime.Goexit).
var errNoReturn = errors.New("leader: term function panicked")

// Run takes part in the election until ctx ends: it campaigns and, each
// time this participant is elected, calls fn with a context that is
// cancelled the moment leadership is lost or can no longer be guaranteed
// (and when ctx ends, or the term is resigned). [context.Cause] of that
// context tells why: an error wrapping [ErrLost] and the reason,
// [ErrResigned], or ctx's cause.
//
// A term ends when fn returns or leadership is lost; Run then resigns
// (deleting its node, if the session still owns it) and, unless ctx is
// done, campaigns again at the back of the line. fn must return soon after
// its context is cancelled: until it does, Run does not campaign again.
// fn is never called for a participant that is not elected.
//
// An error returned by fn is not fatal: Run logs it (see [WithLogger]) and
// campaigns again after a pause that grows with each consecutive failure,
// on the schedule of the client's retry policy (see recipe.WithRetryPolicy;
// at least 100ms, and where the policy would give up its last pace goes
// on), so that a leader that keeps failing does not make the leadership
// change hands in a tight loop. A term whose fn returns nil, or whose
// leadership was lost, starts the schedule afresh. Failed campaigns are
// logged and retried on the same schedule, unless they failed for a
// reason no retry can fix (below).
//
// Run returns ctx.Err() when ctx ends. It returns earlier, with an error,
// only when going on cannot succeed (see recipe.Permanent): the client was
// closed (wrapping recipe.ErrClosed), the path is used by another kind of
// lock (recipe.ErrMismatch), ZooKeeper refused for lack of rights
// (recipe.ErrPermission, also when the term's node cannot be deleted), or
// it refused the request itself (recipe.ErrInvalidArgument, or
// go-zookeeper's zk.ErrNoChildrenForEphemerals when the path lies under an
// ephemeral node). Such an error ends Run at the first campaign that meets
// it, without a retry. A nil ctx or fn, or a second Run on a handle while
// one is in progress, gives an error wrapping recipe.ErrInvalidArgument
// without I/O. Errors returned by fn never end Run, whatever they wrap: to
// stop, fn cancels ctx.
//
// If fn panics, the panic is not recovered: it goes on up Run's caller's
// stack, with its value and stack trace, after Run ended the term on the
// way out: the term's context is cancelled, and the term resigned, which
// deletes its node (one round trip; at most the session timeout while the
// connection is down), so the next participant leads at once rather than
// when the process's session expires. The same holds if fn calls
// runtime.Goexit.
//
// With a client that tolerates suspensions (recipe.WithSuspensionTolerance),
// a suspension of the session does not end the term and does not cancel
// fn's context: fn must stop acting as leader when [Election.Suspended]
// closes, and may act again when [Election.Resumed] does. The context is
// cancelled when leadership is lost, as in the default mode.
//
// Run and the other methods of the handle share its term: [Election.Resign]
// ends the current term (Run then campaigns again), and [Election.Token],
// [Election.IsLeader] and [Election.Done] describe it.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("leader: run: %w: nil context", recipe.ErrInvalidArgument)
	case fn == nil:
		return fmt.Errorf("leader: run: %w: nil function", recipe.ErrInvalidArgument)
	}
	if !e.running.CompareAndSwap(false, true) {
		return fmt.Errorf("leader: run: %w: Run is already in progress on this handle", recipe.ErrInvalidArgument)
	}
	defer e.running.Store(false)
	pace := e.c.Backoff()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := e.campaign(ctx, true)
		if err != nil {
			err = e.campaignFailed(ctx, pace, err)
		} else {
			err = e.afterTerm(ctx, pace, h, e.term(ctx, h, fn))
		}
		if err != nil {
			return err
		}
	}
}

// campaignFailed is what Run does after a campaign failed with err: the
// error that ends Run, or nil after a pause, to campaign again.
func (e *Election) campaignFailed(ctx context.Context, pace *retry.Pacer, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case recipe.Permanent(err):
		return fmt.Errorf("leader: run: %w", err)
	}
	e.log.Warn("campaign failed; trying again", "err", err)
	if !pace.Pause(ctx) {
		return ctx.Err()
	}
	return nil
}

// afterTerm is what Run does once the term of h ended as end: the error
// that ends Run, or nil (after a pause if fn failed), to campaign again.
func (e *Election) afterTerm(ctx context.Context, pace *retry.Pacer, h *recipe.Hold, end termEnd) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case end.resignErr != nil && !errors.Is(end.resignErr, ErrLost) && recipe.Permanent(end.resignErr):
		// The node is left to the session, and a new campaign would
		// queue behind it.
		return fmt.Errorf("leader: run: %w", end.resignErr)
	case end.err == nil || end.lost:
		pace.Reset()
		return nil
	}
	e.log.Warn("leader function failed; campaigning again", "err", end.err, "token", h.Token())
	if !pace.Pause(ctx) {
		return ctx.Err()
	}
	return nil
}

// termEnd is how a term ended: fn's error, whether leadership was lost,
// and the outcome of the resignation.
type termEnd struct {
	err       error
	lost      bool
	resignErr error
}

// term runs fn for the term of h and ends the term: when fn returns, and
// on the way out when it panics (the panic is not recovered).
func (e *Election) term(ctx context.Context, h *recipe.Hold, fn func(context.Context) error) (end termEnd) {
	tctx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	if e.hold == h {
		e.termCancel = cancel
	} else {
		cancel(ErrResigned) // resigned between the campaign and now
	}
	e.mu.Unlock()
	// The term's context ends with the hold, through the engine's
	// contexts (no goroutine of its own): its cause is the loss, or
	// ErrResigned when resigned first.
	hctx, hcancel := h.Context(tctx)
	defer hcancel()
	start := time.Now()
	e.log.Info("leading", "node", h.Node(), "token", h.Token())
	fctx, span := e.c.Tracer().Start(hctx, "leader.term", trace.WithAttributes(
		telemetry.AttrRecipe.String("leader"), telemetry.AttrPath.String(e.Path()),
		telemetry.AttrNode.String(h.Node()), telemetry.AttrToken.Int64(h.Token()),
		attribute.String("zkrecipes.leader.id", e.ID())))
	returned := false
	defer func() {
		// Also on the way out of a panic in fn, which goes on afterwards.
		how := errTermOver
		if !returned {
			how = errNoReturn
			span.SetStatus(codes.Error, errNoReturn.Error())
		}
		cancel(how)
		span.SetAttributes(attribute.String("zkrecipes.leader.term_end", termEndName(context.Cause(hctx))))
		span.End()
		end.lost = errors.Is(context.Cause(hctx), ErrLost)
		// End the term even when ctx is done, so that no node outlives Run;
		// the deletion is bounded by the session timeout (and goes on in the
		// background while the session lives).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.SessionTimeout())
		end.resignErr = e.resignTerm(rctx, h)
		rcancel()
		if !returned {
			e.log.Error("leader function panicked; term resigned", "node", h.Node(), "token", h.Token(),
				"lasted", time.Since(start), "resign_err", end.resignErr)
			return
		}
		e.log.Info("term over", "node", h.Node(), "token", h.Token(), "lasted", time.Since(start),
			"cause", context.Cause(hctx), "resign_err", end.resignErr)
	}()
	end.err = fn(fctx)
	returned = true
	if end.err != nil {
		span.RecordError(end.err)
	}
	return end
}

// termEndName names why a term's context ended, for the term span.
func termEndName(cause error) string {
	switch {
	case errors.Is(cause, ErrLost):
		return "lost"
	case errors.Is(cause, ErrResigned), errors.Is(cause, recipe.ErrNotHeld):
		return "resigned"
	case errors.Is(cause, errNoReturn):
		return "panicked"
	case errors.Is(cause, errTermOver), cause == nil:
		return "returned"
	default:
		return "cancelled"
	}
}
