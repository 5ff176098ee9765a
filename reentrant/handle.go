package reentrant

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Handle is the handle of a recipe built on a [recipe.Lock], as the mutex
// is. It excludes like a [sync.Mutex] and re-enters only on request:
//
//   - Take on a handle that holds, or that another call is acquiring
//     through, waits until that hold is released on this handle and then
//     queues like any other contender: two goroutines sharing a handle
//     never both hold. With wait false it fails at once, wrapping
//     [recipe.LockSpec].WouldBlock, without I/O.
//   - [Handle.Enter] returns, with the hold, a context that carries it.
//     Take and Enter called with that context, or one derived from it,
//     re-enter: they only count, without I/O. The lock is released when
//     Release has been called as many times as Take and Enter succeeded.
//
// The context is the permission to re-enter: a call chain that passes it
// down re-enters, and a goroutine handed it shares the hold, as it would
// if handed the lock itself. A context carrying an earlier hold of the
// handle re-enters nothing.
//
// Release, Commit, Token and the rest report on or act on the handle's
// current hold, whichever goroutine calls them (as [sync.Mutex.Unlock]
// may be called from any goroutine). Its errors carry the recipe's
// sentinels from [recipe.LockSpec]. A Handle is a [recipe.Held] and a
// [recipe.Acquirer], and is safe for concurrent use. Done, Err, Token,
// Node, Commit, Revoked, Suspended and Resumed are its [View]'s, on the
// current hold.
type Handle struct {
	lk   *recipe.Lock
	spec *sentinels // lk's, for its errors; shared by the handles of one kind

	mu   sync.Mutex
	hold *recipe.Hold
	// count is the number of Takes and Enters the hold answers for.
	count int
	// busy is set from the start of an acquire that is not a re-entry
	// until the hold it made is released (or the acquire failed): the
	// handle's local exclusion, a one-token semaphore. freed is made
	// by a Take that waits for it, and closed when it is freed.
	busy  bool
	freed chan struct{}
}

// sentinels is what a handle keeps of its lock's LockSpec: the name and
// errors its own errors carry.
type sentinels struct {
	Recipe                           string
	NotAcquired, WouldBlock, NotHeld error
}

// shared interns the sentinels of the handles' kinds (sentinels ->
// *sentinels), at most maxShared of them: one recipe's handles keep one.
var (
	shared      sync.Map
	sharedCount atomic.Int32
)

const maxShared = 256

// sentinelsOf returns the shared sentinels equal to s, or s itself when
// they do not compare or there are too many kinds already.
func sentinelsOf(s sentinels) (p *sentinels) {
	for _, err := range []error{s.NotAcquired, s.WouldBlock, s.NotHeld} {
		if t := reflect.TypeOf(err); t != nil && !t.Comparable() {
			return &s
		}
	}
	defer func() {
		if recover() != nil { // a value inside a comparable type that is not
			p = &s
		}
	}()
	if got, ok := shared.Load(s); ok {
		return got.(*sentinels)
	}
	if sharedCount.Load() >= maxShared {
		return &s
	}
	got, loaded := shared.LoadOrStore(s, &s)
	if !loaded {
		sharedCount.Add(1)
	}
	return got.(*sentinels)
}

// New returns a handle on lk that holds nothing.
func New(lk *recipe.Lock) *Handle {
	spec := lk.Spec()
	return &Handle{lk: lk, spec: sentinelsOf(sentinels{Recipe: spec.Recipe,
		NotAcquired: spec.NotAcquired, WouldBlock: spec.WouldBlock, NotHeld: spec.NotHeld})}
}

// view is the [View] of the handle's current hold.
func (h *Handle) view() View {
	return View{handle: h, notHeld: h.spec.NotHeld}
}

// Path returns the lock's path.
func (h *Handle) Path() string { return h.lk.Path() }

// Take acquires the lock as [Handle.Enter] does and returns the handle.
func (h *Handle) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	if _, err := h.Enter(ctx, wait); err != nil {
		return nil, err
	}
	return h, nil
}

// Enter acquires the lock and returns a child of ctx that carries the
// hold. When ctx carries the handle's current hold (it comes from an
// earlier Enter of this hold) Enter only counts, without I/O, and returns
// ctx. Otherwise it first waits, until ctx ends, for the handle's own
// hold or acquire in progress to be released (with wait false it returns
// an error wrapping [recipe.LockSpec].WouldBlock instead), then waits in
// line until the lock is free or ctx ends (wait), or looks once.
//
// With wait false and the lock held elsewhere, the error wraps
// [recipe.LockSpec].WouldBlock (the node queued is deleted again). On
// failure nothing more is held and the error wraps
// [recipe.LockSpec].NotAcquired and the cause, such as ctx.Err(); a
// re-entry into a hold that was lost meanwhile fails with the loss: call
// Release first.
func (h *Handle) Enter(ctx context.Context, wait bool) (context.Context, error) {
	// Errors are made in functions of their own: a queued waiter keeps
	// this frame on its stack while it waits.
	if ctx == nil {
		return nil, h.nilContext()
	}
	if again, err := h.reenter(ctx); again || err != nil {
		return ctx, err
	}
	if err := h.takeSlot(ctx, wait); err != nil {
		return nil, err
	}
	var hd *recipe.Hold
	var err error
	if wait {
		hd, err = h.lk.Acquire(ctx)
	} else {
		hd, err = h.lk.TryAcquire(ctx)
	}
	if err != nil {
		return nil, h.failed(err)
	}
	h.mu.Lock()
	h.hold, h.count = hd, 1
	h.mu.Unlock()
	return WithHold(ctx, h, hd), nil
}

// nilContext is the error of an Enter given a nil context.
//
//go:noinline
func (h *Handle) nilContext() error {
	return fmt.Errorf("%w: %w: nil context", h.spec.NotAcquired, recipe.ErrInvalidArgument)
}

// failed frees the handle's local exclusion after a failed acquire and
// returns Enter's error for err.
//
//go:noinline
func (h *Handle) failed(err error) error {
	h.giveSlot()
	if errors.Is(err, recipe.ErrWouldBlock) {
		return fmt.Errorf("%w: %s", h.spec.WouldBlock, h.Path())
	}
	return err
}

// reenter counts one more hold when ctx carries the handle's current hold
// (again), and fails when that hold was lost.
func (h *Handle) reenter(ctx context.Context) (again bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.hold
	if cur == nil || Carried(ctx, h) != cur {
		return false, nil
	}
	if err := cur.Err(); err != nil {
		return false, fmt.Errorf("%w: %s: %w", h.spec.NotAcquired, h.Path(), err)
	}
	h.count++
	return true, nil
}

// takeSlot takes the handle's local exclusion: at once if it is free
// (even when ctx has ended, so the acquire reports the context), else by
// waiting until ctx ends (wait) or not at all.
func (h *Handle) takeSlot(ctx context.Context, wait bool) error {
	for {
		h.mu.Lock()
		if !h.busy {
			h.busy = true
			h.mu.Unlock()
			return nil
		}
		if !wait {
			h.mu.Unlock()
			return fmt.Errorf("%w: %s: held or being acquired through this handle", h.spec.WouldBlock, h.Path())
		}
		if h.freed == nil {
			h.freed = make(chan struct{})
		}
		freed := h.freed
		h.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: waiting for this handle's hold to be released: %w",
				h.spec.NotAcquired, h.Path(), ctx.Err())
		}
	}
}

// giveSlot frees the handle's local exclusion and wakes the Takes
// waiting for it.
func (h *Handle) giveSlot() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.busy = false
	if h.freed != nil {
		close(h.freed)
		h.freed = nil
	}
}

// Release undoes one Take or Enter. When the hold count reaches zero it
// deletes the node (retrying connection loss until ctx ends) and the
// handle holds nothing, whatever the outcome; a Take waiting on the
// handle proceeds. On a handle that holds nothing (including one whose
// first acquire is still in progress) it returns
// [recipe.LockSpec].NotHeld without I/O. A nil ctx is refused with an
// error wrapping [recipe.ErrInvalidArgument] and changes nothing.
//
// If the hold was lost meanwhile, Release deletes nobody's node and returns
// an error wrapping [recipe.ErrLost] and the reason. If ctx ends before the node
// is deleted, the deletion goes on in the background while the session
// lives and the error wraps ctx.Err().
func (h *Handle) Release(ctx context.Context) error {
	spec := h.spec
	if ctx == nil {
		return fmt.Errorf("%s: release: %w: nil context", spec.Recipe, recipe.ErrInvalidArgument)
	}
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
	defer h.giveSlot()
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
