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
// their own. Done, Err, Token, Node, Commit, Revoked, Suspended and Resumed
// are its [View]'s, on the current hold.
type Handle struct {
	view View // of the current hold
	lk   *recipe.Lock
	spec sentinels // lk's, for its errors
	turn Turn      // serialises Take and Release

	mu    sync.Mutex
	hold  *recipe.Hold
	count int
}

// sentinels is what a handle keeps of its lock's LockSpec: the name and
// errors its own errors carry.
type sentinels struct {
	Recipe                           string
	NotAcquired, WouldBlock, NotHeld error
}

// New returns a handle on lk that holds nothing.
func New(lk *recipe.Lock) *Handle {
	spec := lk.Spec()
	h := &Handle{lk: lk, spec: sentinels{Recipe: spec.Recipe, NotAcquired: spec.NotAcquired,
		WouldBlock: spec.WouldBlock, NotHeld: spec.NotHeld}}
	h.view = NewView(h.current, h.spec.NotHeld, h.spec.Recipe+" "+lk.Path())
	return h
}

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
