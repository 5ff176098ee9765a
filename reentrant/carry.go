package reentrant

import "context"

// carryKey is the context key under which a context carries a hold of the
// handle owner: one key per handle, so one context can carry the holds of
// several handles (nested locks of different paths).
type carryKey struct{ owner any }

// WithHold returns a child of ctx that carries hold as the hold of the
// handle owner, the permission to re-enter it that [Handle.Enter] hands
// out. owner and hold must be comparable (pointers, as a rule). For
// recipes of your own that keep their holds themselves; a [Handle] does
// this for its users.
func WithHold(ctx context.Context, owner, hold any) context.Context {
	return context.WithValue(ctx, carryKey{owner}, hold)
}

// Carried returns the hold ctx carries for the handle owner (by
// [WithHold]), nil when none. A recipe re-enters only when it is the
// handle's current hold: a context from an earlier hold grants nothing.
func Carried(ctx context.Context, owner any) any {
	return ctx.Value(carryKey{owner})
}
