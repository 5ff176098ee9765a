package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Commit applies ops in one ZooKeeper transaction with a check of the
// current term's node: all of them while this participant leads, or none
// (see [recipe.Hold.Commit] for the ops, the results and the errors). It
// is how a leader writes state kept in ZooKeeper so that no write of a
// deposed leader can land. Without a term it returns [ErrNotLeader]; once
// the term was lost, an error wrapping [ErrLost] and the reason.
func (e *Election) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	return e.view.Commit(ctx, ops...)
}

// Commit is [Election.Commit] for this term only: once it is over, it
// returns [ErrNotLeader] (or the loss), whatever later term the election
// holds.
func (t *term) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	res, err := t.Hold.Commit(ctx, ops...)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, recipe.ErrNotHeld):
		return nil, ErrNotLeader
	}
	return nil, fmt.Errorf("leader %s: %w", t.e.Path(), err)
}
