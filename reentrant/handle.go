package reentrant

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Handle is the reentrant handle of a recipe built on a [recipe.Lock], as the
// mutex is: Take on a handle that holds only counts, and the lock is
// released when Release has been called as many times. Calls on one handle
// run one at a time. Its errors carry the recipe's sentinels from
// [recipe.LockSpec]. A Handle is a [recipe.Held] and an [recipe.Acquirer], and is safe for
// concurrent use; goroutines that must exclude each other need handles of
// their own.
type Handle struct {
	lk   *recipe.Lock
	spec recipe.LockSpec // lk's, for its sentinels and name
	turn Turn            // serialises Take and Release

	mu    sync.Mutex
	hold  *recipe.Hold
	count int
}

// New returns a handle on lk that holds nothing.
func New(lk *recipe.Lock) *Handle { return &Handle{lk: lk, spec: lk.Spec()} }

// Path returns the lock's path.
func (h *Handle) Path() string { return h.lk.Path() }

// Take acquires the lock, waiting in line until it is free or ctx ends
// (wait), or looking once. On a handle that holds it only increments the
// hold count, without I/O, and returns the handle.
//
// With wait false and the lock held elsewhere, the error wraps
// [recipe.LockSpec].WouldBlock (the node queued is deleted again). On failure
// nothing more is held and the error wraps [recipe.LockSpec].NotAcquired and the
// cause, such as ctx.Err(); on a handle whose hold was lost, the loss: call
// Release first.
func (h *Handle) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	spec := &h.spec
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", spec.NotAcquired, recipe.ErrInvalidArgument)
	}
	if err := h.turn.Take(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", spec.NotAcquired, h.Path(), err)
	}
	defer h.turn.Give()
	h.mu.Lock()
	if cur := h.hold; cur != nil {
		defer h.mu.Unlock()
		if err := cur.Err(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", spec.NotAcquired, h.Path(), err)
		}
		h.count++
		return h, nil
	}
	h.mu.Unlock()
	acquire := h.lk.Acquire
	if !wait {
		acquire = h.lk.TryAcquire
	}
	hd, err := acquire(ctx)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return nil, fmt.Errorf("%w: %s", spec.WouldBlock, h.Path())
	}
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.hold, h.count = hd, 1
	h.mu.Unlock()
	return h, nil
}

// Release undoes one Take. When the hold count reaches zero it deletes the
// node (retrying connection loss until ctx ends) and the handle holds
// nothing, whatever the outcome. On a handle that holds nothing it returns
// [recipe.LockSpec].NotHeld without I/O. A nil ctx is refused with an error
// wrapping [recipe.ErrInvalidArgument] and changes nothing.
//
// If the hold was lost meanwhile, Release deletes nobody's node and returns
// an error wrapping [recipe.ErrLost] and the reason. If ctx ends before the node
// is deleted, the deletion goes on in the background while the session
// lives and the error wraps ctx.Err().
func (h *Handle) Release(ctx context.Context) error {
	spec := &h.spec
	if ctx == nil {
		return fmt.Errorf("%s: release: %w: nil context", spec.Recipe, recipe.ErrInvalidArgument)
	}
	if err := h.turn.Take(ctx); err != nil {
		return fmt.Errorf("%s: release %s: %w", spec.Recipe, h.Path(), err)
	}
	defer h.turn.Give()
	h.mu.Lock()
	cur := h.hold
	if cur == nil {
		h.mu.Unlock()
		return spec.NotHeld
	}
	h.count--
	if h.count > 0 {
		h.mu.Unlock()
		return nil
	}
	h.hold = nil
	h.mu.Unlock()
	if err := cur.Release(ctx); err != nil {
		return fmt.Errorf("%s: release %s: %w", spec.Recipe, h.Path(), err)
	}
	return nil
}

// current returns the hold, if any.
func (h *Handle) current() *recipe.Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hold
}

// Done returns a channel that is closed when the hold is lost (session
// expired, node deleted by someone else, connection silent past the safe
// window, client closed) or released; a closed channel when nothing is
// held. It arms the hold's own-node watch as [recipe.Hold.Done] does.
func (h *Handle) Done() <-chan struct{} {
	if cur := h.current(); cur != nil {
		return cur.Done()
	}
	return closedChan
}

// Err returns nil while the lock is held and in force; an error wrapping
// [recipe.ErrLost] and the reason once it was lost; [recipe.LockSpec].NotHeld when the
// handle holds nothing.
func (h *Handle) Err() error {
	cur := h.current()
	if cur == nil {
		return h.spec.NotHeld
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", h.spec.Recipe, h.Path(), err)
	}
	return nil
}

// Token returns the fencing token of the current hold (the czxid of its
// node, strictly increasing from one holder to the next across the whole
// ensemble), or 0 when nothing is held.
func (h *Handle) Token() int64 {
	if cur := h.current(); cur != nil {
		return cur.Token()
	}
	return 0
}

// Node returns the name of the node of the current hold, "" when none.
func (h *Handle) Node() string {
	if cur := h.current(); cur != nil {
		return cur.Node()
	}
	return ""
}

// Revoked is [recipe.Hold.Revoked] of the current hold; nil (a channel that is
// never ready) when nothing is held.
func (h *Handle) Revoked() <-chan struct{} {
	if cur := h.current(); cur != nil {
		return cur.Revoked()
	}
	return nil
}

// Suspended is [recipe.Hold.Suspended] of the current hold: closed while the
// session is suspended (only with [recipe.WithSuspensionTolerance]); the holder
// must stop acting as holder until Resumed closes, or Done does. nil
// (never ready) when nothing is held.
func (h *Handle) Suspended() <-chan struct{} {
	if cur := h.current(); cur != nil {
		return cur.Suspended()
	}
	return nil
}

// Resumed is [recipe.Hold.Resumed] of the current hold: closed when the
// suspension in progress is over and the hold was kept, or when none is in
// progress. nil (never ready) when nothing is held.
func (h *Handle) Resumed() <-chan struct{} {
	if cur := h.current(); cur != nil {
		return cur.Resumed()
	}
	return nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
