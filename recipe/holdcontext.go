package recipe

import (
	"context"
	"fmt"
	"slices"
)

// holdContext is one context handed out by [Hold.Context]; its stop is the
// cancel function the caller gets (a method value: one allocation for the
// two, where a closure over them would be a third).
type holdContext struct {
	h      *Hold
	cancel context.CancelCauseFunc
}

// stop cancels the context and drops it from the hold's contexts.
func (hc *holdContext) stop() {
	hc.cancel(context.Canceled)
	hc.h.forgetContext(hc)
}

// Context returns a context derived from parent that is cancelled the
// moment the hold ends: when it is lost, or when [Hold.Release] begins. Its
// [context.Cause] is then the hold's [Hold.Err]: an error wrapping
// [ErrLost] and the reason ([ErrSessionExpired], [ErrNodeDeleted],
// [ErrConnectionSuspended], [ErrClosed]), or [ErrNotHeld] once released.
// It also ends with parent, or when the returned cancel function is called
// (with [context.Canceled] as its cause); call it when the work is done, to
// free what the context keeps.
//
// Give it to the calls made as holder, so that they end when the hold
// does: a request on the [Client] made with it returns as soon as the
// hold is lost, even while the connection is down.
//
// Like [Hold.Done], Context has the hold watch its node now, if it does
// not yet; it costs no goroutine (one dispatch of watch events serves
// every hold of the client). A hold that already ended gives a context
// cancelled at once, with the hold's error as its cause. A nil parent is a
// programming error: Context panics, as [context.WithCancel] does.
func (h *Hold) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		panic(fmt.Sprintf("%v: Hold.Context with a nil parent", ErrInvalidArgument))
	}
	ctx, cancel := context.WithCancelCause(parent)
	h.wantWatch()
	h.checkSilence()
	hc := &holdContext{h: h, cancel: cancel}
	h.mu.Lock()
	if h.err != nil || h.released {
		err := h.err
		if err == nil {
			err = ErrNotHeld
		}
		h.mu.Unlock()
		cancel(err)
		return ctx, func() { cancel(context.Canceled) }
	}
	h.ctxs = append(h.ctxs, hc)
	h.mu.Unlock()
	return ctx, hc.stop
}

// forgetContext drops hc from the hold's contexts.
func (h *Hold) forgetContext(hc *holdContext) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.ctxs, hc); i >= 0 {
		h.ctxs = slices.Delete(h.ctxs, i, i+1)
		if len(h.ctxs) == 0 {
			h.ctxs = nil
		}
	}
}

// cancelContextsLocked cancels every context handed out, with cause err.
// h.mu is held.
func (h *Hold) cancelContextsLocked(err error) {
	for _, hc := range h.ctxs {
		hc.cancel(err)
	}
	h.ctxs = nil
}
