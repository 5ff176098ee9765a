package reentrant

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Done is [View.Done] of the handle's current hold: closed when it is lost
// or released, and closed when the handle holds nothing.
func (h *Handle) Done() <-chan struct{} { return h.view().Done() }

// Context is [View.Context] of the handle's current hold: a context
// derived from parent, cancelled when that hold is lost or released.
func (h *Handle) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return h.view().Context(parent)
}

// Err is [View.Err] of the handle's current hold: nil while it is in
// force, the loss once lost, the recipe's not-held sentinel without one.
func (h *Handle) Err() error { return h.view().Err() }

// Token is [View.Token]: the fencing token of the current hold, 0 without
// one.
func (h *Handle) Token() int64 { return h.view().Token() }

// Node is [View.Node]: the name of the current hold's node, "" without one.
func (h *Handle) Node() string { return h.view().Node() }

// Commit is [View.Commit]: ops applied in one transaction with a check of
// the current hold's node, all while it is in force or none.
func (h *Handle) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	return h.view().Commit(ctx, ops...)
}

// Revoked is [View.Revoked] of the current hold.
func (h *Handle) Revoked() <-chan struct{} { return h.view().Revoked() }

// Suspended is [View.Suspended] of the current hold.
func (h *Handle) Suspended() <-chan struct{} { return h.view().Suspended() }

// Resumed is [View.Resumed] of the current hold.
func (h *Handle) Resumed() <-chan struct{} { return h.view().Resumed() }
