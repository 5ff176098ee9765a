package recipe

import (
	"context"
)

// Held is something held: a [*Hold], a mutex, either side of a read/write
// lock, a semaphore lease, a leader's term, or a custom recipe's hold.
type Held interface {
	// Done is closed when the hold ends: lost or released.
	Done() <-chan struct{}
	// Context returns a context derived from parent that is cancelled
	// when the hold ends, its [context.Cause] saying why (an error
	// wrapping [ErrLost] and the reason, or the not-held sentinel once
	// released). See [Hold.Context].
	Context(parent context.Context) (context.Context, context.CancelFunc)
	// Err is nil while the hold is in force; it wraps [ErrLost] and the
	// reason once it was lost, [ErrNotHeld] once it was released.
	Err() error
	// Token is the hold's fencing token, 0 when nothing is held.
	Token() int64
	// Node is the name of the hold's node, "" when nothing is held.
	Node() string
	// Release lets go of the hold, deleting its node.
	Release(ctx context.Context) error
	// Commit applies ops in one transaction that also checks the hold's
	// node: all of them while the hold is in force, or none. See
	// [Hold.Commit].
	Commit(ctx context.Context, ops ...Op) ([]Result, error)
}

// Acquirer is something that can be acquired into a [Held]: a [*Lock], a
// reentrant.Handle, a mutex, either side of a read/write lock, a semaphore, an
// election. [multilock] and the zklock command take any of them.
type Acquirer interface {
	// Path is the lock's path.
	Path() string
	// Take acquires, waiting in line when wait is true; with wait false it
	// looks once, and an error wrapping [ErrWouldBlock] says the lock is
	// held elsewhere.
	Take(ctx context.Context, wait bool) (Held, error)
}

// Take is [Lock.Acquire] (wait) or [Lock.TryAcquire] returning the hold as
// a [Held], so that a Lock is an [Acquirer].
func (l *Lock) Take(ctx context.Context, wait bool) (Held, error) {
	h, err := l.acquireOne(ctx, !wait)
	if err != nil {
		return nil, err
	}
	return h, nil
}
