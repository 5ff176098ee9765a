package multilock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Commit applies ops in one ZooKeeper transaction that also checks the
// node of every member: all of them while the whole set is held, or none
// (see [recipe.Hold.Commit] for the ops, the results and the errors). The
// transaction goes through the first member's client; members on other
// clients are checked by their node, which exists exactly as long as
// their hold.
//
// On a set that holds nothing it returns [ErrNotHeld] without I/O. A
// member that was lost, or whose node the server no longer has, makes it
// fail with an error wrapping [ErrLost] and a [*MemberError] for that
// member, with nothing applied; an op the server refuses gives a
// [*recipe.OpError] whose Index counts among ops.
func (s *Set) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	h := s.current()
	if h == nil {
		return nil, ErrNotHeld
	}
	if err := s.lost(h); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	guards := make([]recipe.Op, 0, len(h.parts)-1+len(ops))
	for i, p := range h.parts[1:] {
		guards = append(guards, recipe.Check(s.members[i+1].Path()+"/"+p.Node(), recipe.AnyVersion))
	}
	n := len(guards)
	res, err := h.parts[0].Commit(ctx, append(guards, ops...)...)
	var oe *recipe.OpError
	switch {
	case err == nil:
		return res[n:], nil
	case errors.As(err, &oe) && oe.Index < n && errors.Is(oe.Err, recipe.ErrNoNode):
		i := oe.Index + 1
		gone := fmt.Errorf("%w: %w", ErrLost, recipe.ErrNodeDeleted)
		return nil, fmt.Errorf("multilock: commit: %w", &MemberError{i, s.members[i], gone})
	case errors.As(err, &oe) && oe.Index < n:
		i := oe.Index + 1
		return nil, fmt.Errorf("multilock: commit: %w", &MemberError{i, s.members[i], fmt.Errorf("check of its node: %w", oe.Err)})
	case errors.As(err, &oe):
		oe.Index -= n
		return nil, fmt.Errorf("multilock: commit: %w", oe)
	case errors.Is(err, ErrLost), errors.Is(err, recipe.ErrNotHeld):
		return nil, fmt.Errorf("multilock: commit: %w", &MemberError{0, s.members[0], err})
	}
	return nil, fmt.Errorf("multilock: commit: %w", err)
}
