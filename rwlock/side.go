package rwlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
)

// Side is one mode of an [RWLock] handle, its read side ([RWLock.Reader])
// or its write side ([RWLock.Writer]), as a handle of its own: a
// [recipe.Acquirer] whose Take is RLock or Lock (TryRLock or TryLock
// without wait), and a [recipe.Held] whose Release is RUnlock or Unlock.
// Both sides share the handle's counts, its downgrade and its upgrade
// refusal, and one turn serialises the calls of both.
//
// Done, Err, Token, Node, Revoked, Suspended and Resumed report on the
// node the side's lock rests on, and Commit checks that node: for the read
// side, the write node while the read hold rides on it (see Downgrade in
// the package documentation). Every write hold granted after a read hold
// has a greater token, so a store can tell a reader's view from a later
// writer's.
type Side struct {
	view reentrant.View // of the side's current hold
	rw   *RWLock
	mode Mode
}

// newSide returns the side of rw in mode m.
func newSide(rw *RWLock, m Mode) Side {
	s := Side{rw: rw, mode: m}
	s.view = reentrant.NewView(s.hold, ErrNotHeld, fmt.Sprintf("rwlock %s (%s)", rw.Path(), m))
	return s
}

var (
	_ recipe.Acquirer = (*Side)(nil)
	_ recipe.Held     = (*Side)(nil)
)

// Path returns the lock's path.
func (s *Side) Path() string { return s.rw.Path() }

// Mode returns [Read] or [Write].
func (s *Side) Mode() Mode { return s.mode }

// RWLock returns the handle the side belongs to.
func (s *Side) RWLock() *RWLock { return s.rw }

// lockName is how the side's lock is named in errors.
func (s *Side) lockName() string { return s.mode.String() + " lock" }

// Take acquires the side's lock as [RWLock.RLock] or [RWLock.Lock] do
// (with wait false, as TryRLock or TryLock), and returns the side.
func (s *Side) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	rw := s.rw
	if err := rw.turn.Take(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s on %s: %w", ErrNotAcquired, s.lockName(), rw.Path(), err)
	}
	defer rw.turn.Give()
	again, err := s.reenter()
	if err != nil {
		return nil, err
	}
	if again {
		return s, nil
	}
	rw.mu.Lock()
	w := rw.w
	rw.mu.Unlock()
	if s.mode == Read && w != nil {
		if err := rw.downgrade(ctx, w); err != nil {
			return nil, err
		}
		return s, nil
	}
	lk := rw.write
	if s.mode == Read {
		lk = rw.read
	}
	h, err := lk.Take(ctx, wait)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return nil, fmt.Errorf("%w: %s on %s", ErrLocked, s.lockName(), rw.Path())
	}
	if err != nil {
		return nil, err
	}
	rw.mu.Lock()
	if s.mode == Read {
		rw.r, rw.rn = h.(*recipe.Hold), 1
	} else {
		rw.w, rw.wn = h.(*recipe.Hold), 1
	}
	rw.mu.Unlock()
	return s, nil
}

// reenter counts one more hold when the side holds in force (again), fails
// when its hold was lost, and refuses an upgrade.
func (s *Side) reenter() (again bool, err error) {
	rw := s.rw
	rw.mu.Lock()
	defer rw.mu.Unlock()
	n := s.count()
	if *n == 0 {
		if s.mode == Write && rw.rn > 0 {
			return false, fmt.Errorf("%w: %w: %s", ErrNotAcquired, ErrUpgrade, rw.Path())
		}
		return false, nil
	}
	if err := rw.holdLocked(s.mode).Err(); err != nil {
		return false, fmt.Errorf("%w: %s on %s: %w", ErrNotAcquired, s.lockName(), rw.Path(), err)
	}
	*n++
	return true, nil
}

// Release undoes one Take, as [RWLock.RUnlock] or [RWLock.Unlock] do.
func (s *Side) Release(ctx context.Context) error {
	what := "unlock"
	if s.mode == Read {
		what = "read unlock"
	}
	if ctx == nil {
		return fmt.Errorf("rwlock: %s: %w: nil context", what, recipe.ErrInvalidArgument)
	}
	rw := s.rw
	if err := rw.turn.Take(ctx); err != nil {
		return fmt.Errorf("rwlock: %s %s: %w", what, rw.Path(), err)
	}
	defer rw.turn.Give()
	h, err := s.countDown()
	if h == nil || err != nil {
		return err
	}
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("rwlock: %s %s: %w", what, rw.Path(), err)
	}
	return nil
}

// count is the side's hold count in its RWLock. rw.mu must be held.
func (s *Side) count() *int {
	if s.mode == Read {
		return &s.rw.rn
	}
	return &s.rw.wn
}

// countDown undoes one hold of the side and returns the hold to release
// when none is left and no other hold rests on its node.
func (s *Side) countDown() (*recipe.Hold, error) {
	rw := s.rw
	rw.mu.Lock()
	defer rw.mu.Unlock()
	n := s.count()
	if *n == 0 {
		return nil, ErrNotHeld
	}
	*n--
	var h *recipe.Hold
	switch {
	case *n > 0:
	case s.mode == Read && rw.r != nil:
		h, rw.r = rw.r, nil
	case s.mode == Read && rw.wn == 0:
		h, rw.w = rw.w, nil // the last read hold riding on the write node
	case s.mode == Write && rw.rn > 0 && rw.r == nil:
		// Read holds ride on the write node: keep it for them.
		if err := rw.w.Err(); err != nil {
			return nil, fmt.Errorf("rwlock: unlock %s: %w", rw.Path(), err)
		}
	case s.mode == Write:
		h, rw.w = rw.w, nil
	}
	return h, nil
}

// holdLocked returns the hold behind mode m, nil when the handle holds
// nothing in that mode. rw.mu must be held.
func (rw *RWLock) holdLocked(m Mode) *recipe.Hold {
	switch {
	case m == Read && rw.rn > 0 && rw.r != nil:
		return rw.r
	case m == Read && rw.rn > 0, m == Write && rw.wn > 0:
		return rw.w
	}
	return nil
}

// hold returns the side's hold, nil when it holds nothing.
func (s Side) hold() *recipe.Hold {
	s.rw.mu.Lock()
	defer s.rw.mu.Unlock()
	return s.rw.holdLocked(s.mode)
}
