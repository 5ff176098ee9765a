package mutex

import (
	"context"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// What a Mutex answers about the lock it holds, and how it serves code
// that takes any recipe.Acquirer or recipe.Held.

var (
	_ recipe.Acquirer = (*Mutex)(nil)
	_ recipe.Held     = (*Mutex)(nil)
)

// Path returns the mutex's path.
func (m *Mutex) Path() string { return m.h.Path() }

// Done returns a channel that is closed when the lock the handle holds is
// lost (session expired, node deleted by someone else, connection silent
// past the safe window, client closed) or released, and a closed channel
// when it holds nothing. Stop working on the protected state when it
// closes; [Mutex.Err] says why.
func (m *Mutex) Done() <-chan struct{} { return m.h.Done() }

// Context returns a context derived from parent that is cancelled the
// moment the lock the handle holds now is lost or released; its
// [context.Cause] says why (an error wrapping recipe.ErrLost and the
// reason, or recipe.ErrNotHeld once released). Make the calls done as
// holder with it, so that they end when the lock does. When the handle
// holds nothing, the context is cancelled at once, with [ErrNotHeld] as
// its cause. It costs no goroutine; call the cancel function when done.
func (m *Mutex) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return m.h.Context(parent)
}

// Err returns nil while the lock is held and in force; an error wrapping
// [ErrLost] and the reason (recipe.ErrSessionExpired,
// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended, recipe.ErrClosed,
// recipe.ErrMaxHoldExceeded) once it was lost; [ErrNotHeld] when the
// handle holds nothing.
func (m *Mutex) Err() error { return m.h.Err() }

// Token returns the fencing token of the hold: the czxid of the lock's
// node, strictly increasing from one holder to the next across the
// ensemble; 0 when the handle holds nothing. Pass it with every write to
// a store outside ZooKeeper that can refuse a lower one.
func (m *Mutex) Token() int64 { return m.h.Token() }

// Node returns the name of the handle's node in the mutex's directory, ""
// when it holds nothing.
func (m *Mutex) Node() string { return m.h.Node() }

// Commit applies ops (see [recipe.Create], [recipe.SetDataVersion] and the
// other [recipe.Op] constructors) in one ZooKeeper transaction together
// with a check that the handle's node still exists: all of them, only
// while the lock is held, or none. A holder that lost the lock writes
// nothing, however late its request reaches the server.
//
// Without a hold it returns [ErrNotHeld]; after a loss, an error wrapping
// [ErrLost] and the reason; when one op is refused, a [*recipe.OpError]
// naming it; when the reply never came, an error wrapping
// recipe.ErrCommitUnknown. It makes no parents: make them with
// [recipe.Client.EnsurePath]. The whole contract is [recipe.Hold.Commit];
// docs/fencing.md shows the read-then-commit pattern.
func (m *Mutex) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	return m.h.Commit(ctx, ops...)
}

// Revoked returns a channel that is closed when someone asks the holder to
// let go ([Revoke]), on a mutex made [WithRevocable]; nil (never ready)
// when the handle holds nothing or is not revocable. Letting go is up to
// the holder: call Unlock.
func (m *Mutex) Revoked() <-chan struct{} { return m.h.Revoked() }

// Suspended returns a channel that is closed while the session is
// suspended, on a client connected with recipe.WithSuspensionTolerance:
// stop acting as holder until [Mutex.Resumed] or [Mutex.Done] closes. Call
// it again for the next suspension. nil (never ready) when nothing is held.
func (m *Mutex) Suspended() <-chan struct{} { return m.h.Suspended() }

// Resumed returns a channel that is closed when the suspension in progress
// is over and the lock was kept, or at once while none is in progress; nil
// (never ready) when nothing is held. If the lock is lost instead, Done
// closes and this channel never does.
func (m *Mutex) Resumed() <-chan struct{} { return m.h.Resumed() }

// Take is [Mutex.Lock] (wait true) or [Mutex.TryLock] (wait false) for code
// that takes any [recipe.Acquirer]; the Held it returns is the mutex.
func (m *Mutex) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	if _, err := m.h.Take(ctx, wait); err != nil {
		return nil, err
	}
	return m, nil
}

// Release is [Mutex.Unlock], for code that takes any [recipe.Held].
func (m *Mutex) Release(ctx context.Context) error { return m.h.Release(ctx) }
