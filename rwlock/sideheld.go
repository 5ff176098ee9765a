package rwlock

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// What a Side answers about the lock it holds. Each reports on the node
// the side's lock rests on (for the read side, the write node while the
// read hold rides on it after a downgrade).

// Done returns a channel that is closed when the side's lock is lost
// (session expired, node deleted by someone else, connection silent past
// the safe window, client closed) or released, and a closed channel when
// the side holds nothing. [Side.Err] says why.
func (s *Side) Done() <-chan struct{} { return s.view.Done() }

// Context returns a context derived from parent that is cancelled the
// moment the side's lock is lost or released, its [context.Cause] saying
// why (see recipe.Hold.Context); cancelled at once, with [ErrNotHeld], when
// the side holds nothing. It costs no goroutine; call the cancel function
// when done.
func (s *Side) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return s.view.Context(parent)
}

// Err returns nil while the side's lock is held and in force; an error
// wrapping [ErrLost] and the reason once it was lost; [ErrNotHeld] when
// the side holds nothing.
func (s *Side) Err() error { return s.view.Err() }

// Token returns the fencing token of the side's lock (the czxid of its
// node), 0 when it holds nothing. Every write hold granted after a read
// hold has a greater token.
func (s *Side) Token() int64 { return s.view.Token() }

// Node returns the name of the node the side's lock rests on, "" when it
// holds nothing.
func (s *Side) Node() string { return s.view.Node() }

// Commit applies ops in one ZooKeeper transaction together with a check
// that the side's node still exists: all of them, only while the side's
// lock is held, or none. Readers hold together, so their commits
// interleave; make them conditional ([recipe.SetDataVersion]) where that
// matters. A writer's commits never interleave with a reader's.
//
// Without a hold it returns [ErrNotHeld]; after a loss, an error wrapping
// [ErrLost] and the reason; when an op is refused, a [*recipe.OpError]; when
// the reply never came, an error wrapping recipe.ErrCommitUnknown. It makes
// no parents ([recipe.Client.EnsurePath] does). The whole contract is
// [recipe.Hold.Commit].
func (s *Side) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	return s.view.Commit(ctx, ops...)
}

// Revoked returns a channel that is closed when someone asks the holder to
// let go ([Revoke]), on a lock made [WithRevocable]; nil (never ready)
// otherwise or when the side holds nothing. Letting go is up to the holder.
func (s *Side) Revoked() <-chan struct{} { return s.view.Revoked() }

// Suspended returns a channel that is closed while the session is
// suspended, on a client connected with recipe.WithSuspensionTolerance:
// stop acting as holder until [Side.Resumed] or [Side.Done] closes. nil
// (never ready) when nothing is held.
func (s *Side) Suspended() <-chan struct{} { return s.view.Suspended() }

// Resumed returns a channel that is closed when the suspension in progress
// is over and the lock was kept, or at once while none is in progress; nil
// (never ready) when nothing is held.
func (s *Side) Resumed() <-chan struct{} { return s.view.Resumed() }
