package recipe

import (
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Sentinel errors of the engine. Every recipe of this module keeps its own
// sentinels (mutex.ErrLocked, semaphore.ErrNoLease, ...) and each of them
// also matches the engine's with [errors.Is], so one check works for all:
//
//	acquire or campaign did not succeed    ErrNotAcquired (and ctx.Err() when ctx ended)
//	try form finds it held elsewhere       ErrWouldBlock
//	release of nothing held, or twice      ErrNotHeld
//	Err() after ownership was lost         ErrLost and the reason below
//	Commit sent, reply never came          ErrCommitUnknown
var (
	// ErrNotAcquired is wrapped by the error of every acquire that did not
	// succeed, together with the cause: ctx.Err() when its context ended,
	// ErrWouldBlock, ErrMismatch, ErrPermission, ...
	ErrNotAcquired = errors.New("recipe: not acquired")
	// ErrWouldBlock is wrapped by the error of a try-acquire that finds
	// the lock held elsewhere. The node it created has been deleted.
	ErrWouldBlock = errors.New("recipe: held elsewhere")
	// ErrNotHeld is returned by a release when nothing is held (a second
	// release, or one after the hold ended), and by [Hold.Err] after a
	// successful release.
	ErrNotHeld = errors.New("recipe: not held")
	// ErrLost is the loss signal of a hold: [Hold.Err] wraps it together
	// with one of the reasons below.
	ErrLost = errors.New("recipe: lock lost")
	// ErrSessionExpired: the ZooKeeper session that owned the node expired,
	// so the server deleted the node.
	ErrSessionExpired = errors.New("recipe: session expired")
	// ErrConnectionSuspended: the client heard nothing from ZooKeeper for
	// long enough that the server may expire the session before this
	// client could learn of it. Ownership can no longer be guaranteed.
	ErrConnectionSuspended = errors.New("recipe: connection suspended past the safe window")
	// ErrNodeDeleted: the node was deleted by someone else while held.
	ErrNodeDeleted = errors.New("recipe: node deleted by another client")
	// ErrMaxHoldExceeded: the hold lasted longer than [LockSpec.MaxHold]
	// allows; the engine deleted its node.
	ErrMaxHoldExceeded = errors.New("recipe: maximum hold time exceeded")
	// ErrClosed is returned by calls on a closed [Client], and is the loss
	// reason of everything held when the client closes.
	ErrClosed = errors.New("recipe: client closed")
	// ErrMismatch: the lock directory is in use by another kind of lock
	// (say, a mutex where a read/write lock is asked for) or was set up
	// with other parameters (for a semaphore, another number of leases).
	ErrMismatch = errors.New("recipe: lock directory used differently")
	// ErrPermission: ZooKeeper refused the operation for lack of rights
	// (the node's ACL does not grant them to this client's credentials).
	ErrPermission = errors.New("recipe: permission denied")
	// ErrCommitUnknown: a guarded transaction ([Hold.Commit]) was sent
	// but its reply never came (the connection was lost, or the context
	// ended): it may have been applied, while the hold was in force, or
	// not at all. It is not sent again by itself.
	ErrCommitUnknown = errors.New("recipe: commit outcome unknown")
	// ErrNodeExists, ErrNoNode, ErrVersionMismatch and ErrNotEmpty are
	// the common reasons why ZooKeeper refuses an op of a guarded
	// transaction ([OpError]): the node to create exists, the node named
	// does not, its data version is not the one expected, the node to
	// delete has children.
	ErrNodeExists      = errors.New("recipe: node exists")
	ErrNoNode          = errors.New("recipe: no node")
	ErrVersionMismatch = errors.New("recipe: version mismatch")
	ErrNotEmpty        = errors.New("recipe: node has children")
	// ErrInvalidArgument reports bad input detected before any I/O.
	ErrInvalidArgument = errors.New("recipe: invalid argument")
	// ErrInvalidPath reports a lock path that is not an absolute, clean
	// ZooKeeper path. It also matches ErrInvalidArgument.
	ErrInvalidPath = fmt.Errorf("%w: invalid path", ErrInvalidArgument)
)

// lostError builds the error reported by a hold that lost ownership.
func lostError(reason error) error {
	return fmt.Errorf("%w: %w", ErrLost, reason)
}

// opError wraps an error returned by ZooKeeper for operation op on path,
// adding ErrPermission for authorization failures so callers need not know
// go-zookeeper's sentinels.
func opError(op, path string, err error) error {
	if errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed) {
		return fmt.Errorf("%s %s: %w: %w", op, path, ErrPermission, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// notAcquired is the error of a failed acquire: label (ErrNotAcquired, or a
// recipe's sentinel that matches it), the lock directory and the cause.
type notAcquired struct {
	label error
	path  string
	cause error
}

func (e *notAcquired) Error() string {
	return e.label.Error() + ": " + e.path + ": " + e.cause.Error()
}

func (e *notAcquired) Unwrap() []error { return []error{e.label, e.cause} }

// Sentinel returns a sentinel error of a recipe, with message msg, that
// also matches base, one of the engine's sentinels, with [errors.Is]: how
// every recipe of this module makes its own (mutex.ErrLocked matches
// ErrWouldBlock, semaphore.ErrNotHeld matches ErrNotHeld, ...), so that
// one check works for all. Declare them once, in a var block, and give
// the not-acquired one to [LockSpec].NotAcquired.
func Sentinel(msg string, base error) error { return &sentinel{msg, base} }

type sentinel struct {
	msg  string
	base error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.base }

// errOtherKind is wrapped, with ErrMismatch, by the error of an acquire
// that found another kind of lock queued ahead of it, as opposed to a
// directory set up with other parameters ([LockSpec].DirMismatch).
var errOtherKind = errors.New("another kind of lock")
