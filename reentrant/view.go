package reentrant

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// View answers, for a handle whose hold changes over time, what its
// current hold answers (loss signal, error, fencing token, node,
// revocation and suspension signals), with the answers of a handle that
// holds nothing: Done closed, Err the recipe's not-held sentinel, Token 0,
// Node "", Revoked, Suspended and Resumed nil (never ready). Keep one in
// an unexported field of a handle type and forward to it, so that the
// handle's methods show in its documentation and no caller can replace
// the view; [Handle] does, and so do the read/write lock's sides and the
// leader election.
type View struct {
	current func() *recipe.Hold
	notHeld error
	label   string
	// handle, when set, is the Handle whose current hold the view
	// answers for, in place of current and label: a Handle makes its
	// view when asked, from what it keeps anyway.
	handle *Handle
}

// hold returns the current hold, nil when there is none.
func (v View) hold() *recipe.Hold {
	if v.handle != nil {
		return v.handle.current()
	}
	return v.current()
}

// labelled wraps err as "label: err".
func (v View) labelled(err error) error {
	if v.handle != nil {
		return fmt.Errorf("%s %s: %w", v.handle.spec.Recipe, v.handle.Path(), err)
	}
	return fmt.Errorf("%s: %w", v.label, err)
}

// NewView returns the view of the hold current returns (nil when there is
// none). Err returns notHeld when nothing is held, and a loss wrapped as
// "label: reason" (label names the handle, such as "mutex /locks/orders").
func NewView(current func() *recipe.Hold, notHeld error, label string) View {
	return View{current: current, notHeld: notHeld, label: label}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel that is closed when the current hold is lost
// (session expired, node deleted by someone else, connection silent past
// the safe window, client closed) or released; a closed channel when
// nothing is held. It arms the hold's own-node watch as
// [recipe.Hold.Done] does.
func (v View) Done() <-chan struct{} {
	if h := v.hold(); h != nil {
		return h.Done()
	}
	return closedChan
}

// Context returns a context derived from parent that is cancelled the
// moment the current hold is lost or released, with the hold's error as
// its [context.Cause] (see [recipe.Hold.Context]); when nothing is held, a
// context cancelled at once with the recipe's not-held sentinel as its
// cause.
func (v View) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if h := v.hold(); h != nil {
		return h.Context(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	cancel(v.notHeld)
	return ctx, func() {}
}

// Err returns nil while the hold is in force; an error wrapping
// [recipe.ErrLost] and the reason once it was lost; the recipe's not-held
// sentinel when nothing is held.
func (v View) Err() error {
	h := v.hold()
	if h == nil {
		return v.notHeld
	}
	if err := h.Err(); err != nil {
		return v.labelled(err)
	}
	return nil
}

// Token returns the fencing token of the current hold (the czxid of its
// node, strictly increasing from one holder to the next across the whole
// ensemble), or 0 when nothing is held.
func (v View) Token() int64 {
	if h := v.hold(); h != nil {
		return h.Token()
	}
	return 0
}

// Node returns the name of the node of the current hold, "" when none.
func (v View) Node() string {
	if h := v.hold(); h != nil {
		return h.Node()
	}
	return ""
}

// Revoked is [recipe.Hold.Revoked] of the current hold; nil (a channel
// that is never ready) when nothing is held.
func (v View) Revoked() <-chan struct{} {
	if h := v.hold(); h != nil {
		return h.Revoked()
	}
	return nil
}

// Suspended is [recipe.Hold.Suspended] of the current hold: closed while
// the session is suspended (only with [recipe.WithSuspensionTolerance]);
// the holder must stop acting as holder until Resumed closes, or Done
// does. After the suspension cleared, call it again for the next one. nil
// (never ready) when nothing is held.
func (v View) Suspended() <-chan struct{} {
	if h := v.hold(); h != nil {
		return h.Suspended()
	}
	return nil
}

// Resumed is [recipe.Hold.Resumed] of the current hold: closed when the
// suspension in progress is over and the hold was kept, or while none is
// in progress. nil (never ready) when nothing is held. If the hold is
// lost instead, Done closes and this channel never does.
func (v View) Resumed() <-chan struct{} {
	if h := v.hold(); h != nil {
		return h.Resumed()
	}
	return nil
}

// Commit is [recipe.Hold.Commit] on the current hold: ops applied in one
// transaction with a check of the hold's node, all while it is in force
// or none. Without a hold, or once it was released, it returns the
// recipe's not-held sentinel; its other errors are the hold's, labelled.
func (v View) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	h := v.hold()
	if h == nil {
		return nil, v.notHeld
	}
	res, err := h.Commit(ctx, ops...)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, recipe.ErrNotHeld):
		return nil, v.notHeld
	}
	return nil, v.labelled(err)
}
