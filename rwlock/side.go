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

// Take acquires the side's lock as [Side.Enter] does and returns the side.
func (s *Side) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	if _, err := s.Enter(ctx, wait); err != nil {
		return nil, err
	}
	return s, nil
}

// Enter acquires the side's lock as [RWLock.REnter] or [RWLock.Enter] do
// (with wait false, as TryRLock or TryLock) and returns a child of ctx
// carrying the hold.
func (s *Side) Enter(ctx context.Context, wait bool) (context.Context, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	rw := s.rw
	for {
		if err := rw.turn.Take(ctx); err != nil {
			return nil, fmt.Errorf("%w: %s on %s: %w", ErrNotAcquired, s.lockName(), rw.Path(), err)
		}
		held, busy, err := s.step(ctx, wait)
		rw.turn.Give()
		if busy == nil {
			return held, err
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s on %s: held through this handle", ErrLocked, s.lockName(), rw.Path())
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s on %s: waiting for this handle's holds to be released: %w",
				ErrNotAcquired, s.lockName(), rw.Path(), ctx.Err())
		}
	}
}

// step is one attempt of Enter, on its turn: a re-entry when ctx carries
// the side's current hold, a downgrade when it carries the write hold, a
// share of the handle's read hold for a reader, an acquire when the handle
// holds nothing that excludes it; otherwise busy, a channel closed at the
// handle's next release.
func (s *Side) step(ctx context.Context, wait bool) (held context.Context, busy <-chan struct{}, err error) {
	rw := s.rw
	rw.mu.Lock()
	switch s.relation(ctx) {
	case reenter:
		defer rw.mu.Unlock()
		return s.recount(ctx)
	case upgrade:
		rw.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %w: %s", ErrNotAcquired, ErrUpgrade, rw.Path())
	case downgrade:
		w := rw.w
		rw.mu.Unlock()
		if err := rw.downgrade(ctx, w); err != nil {
			return nil, nil, err
		}
		return s.carry(ctx), nil, nil
	case busyHandle:
		defer rw.mu.Unlock()
		return nil, rw.changed, nil
	}
	rw.mu.Unlock()
	return s.acquire(ctx, wait)
}

// relation is what an Enter of the side with ctx is to the handle's holds.
type relation int

const (
	acquire    relation = iota // the handle holds nothing that excludes it: take the lock
	reenter                    // ctx carries the side's hold, or a reader shares the handle's read hold
	upgrade                    // a write Enter with a read hold's context: refused
	downgrade                  // a read Enter with the write hold's context
	busyHandle                 // the handle holds what excludes it: wait for its release
)

// relation says what ctx and the handle's holds make of an Enter of the
// side. rw.mu must be held.
func (s *Side) relation(ctx context.Context) relation {
	rw := s.rw
	carriesW := rw.wn > 0 && reentrant.Carried(ctx, &rw.writer) == rw.wgen
	carriesR := rw.rn > 0 && reentrant.Carried(ctx, &rw.reader) == rw.rgen
	if s.mode == Write {
		switch {
		case carriesW:
			return reenter
		case carriesR:
			return upgrade
		case rw.wn > 0 || rw.rn > 0:
			return busyHandle
		}
		return acquire
	}
	switch {
	case carriesR, rw.rn > 0 && (carriesW || rw.wn == 0):
		// Readers share the handle's read hold (a lost one fails them,
		// as it fails a re-entry).
		return reenter
	case carriesW:
		return downgrade
	case rw.wn > 0:
		return busyHandle
	}
	return acquire
}

// acquire takes the side's lock for the handle, which holds nothing that
// excludes it, and returns ctx carrying the new hold.
func (s *Side) acquire(ctx context.Context, wait bool) (context.Context, <-chan struct{}, error) {
	rw := s.rw
	lk := rw.write
	if s.mode == Read {
		lk = rw.read
	}
	h, err := lk.Take(ctx, wait)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return nil, nil, fmt.Errorf("%w: %s on %s", ErrLocked, s.lockName(), rw.Path())
	}
	if err != nil {
		return nil, nil, err
	}
	rw.mu.Lock()
	if s.mode == Read {
		rw.r, rw.rn, rw.rgen = h.(*recipe.Hold), 1, new(byte)
	} else {
		rw.w, rw.wn, rw.wgen = h.(*recipe.Hold), 1, new(byte)
	}
	rw.mu.Unlock()
	return s.carry(ctx), nil, nil
}

// recount counts one more hold of the side, unless its hold was lost, and
// returns ctx carrying it. rw.mu must be held.
func (s *Side) recount(ctx context.Context) (context.Context, <-chan struct{}, error) {
	rw := s.rw
	if err := rw.holdLocked(s.mode).Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s on %s: %w", ErrNotAcquired, s.lockName(), rw.Path(), err)
	}
	*s.count()++
	if s.mode == Read {
		return reentrant.WithHold(ctx, &rw.reader, rw.rgen), nil, nil
	}
	return reentrant.WithHold(ctx, &rw.writer, rw.wgen), nil, nil
}

// carry returns ctx carrying the side's current hold.
func (s *Side) carry(ctx context.Context) context.Context {
	rw := s.rw
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if s.mode == Read {
		return reentrant.WithHold(ctx, &rw.reader, rw.rgen)
	}
	return reentrant.WithHold(ctx, &rw.writer, rw.wgen)
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
	if *n == 0 {
		if s.mode == Read {
			rw.rgen = nil
		} else {
			rw.wgen = nil
		}
		close(rw.changed) // wake the callers waiting for this handle's holds
		rw.changed = make(chan struct{})
	}
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
