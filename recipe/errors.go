package recipe

import (
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Sentinel errors of the engine. Recipes wrap them with their own sentinels,
// so callers can test either with [errors.Is].
var (
	// ErrClosed is returned by calls on a closed [Client], and is the loss
	// reason of everything held when the client closes.
	ErrClosed = errors.New("recipe: client closed")
	// ErrInvalidPath reports a lock path that is not an absolute, clean
	// ZooKeeper path.
	ErrInvalidPath = errors.New("recipe: invalid path")
	// ErrInvalidArgument reports bad input detected before any I/O.
	ErrInvalidArgument = errors.New("recipe: invalid argument")
	// ErrWouldBlock is returned by a non-blocking acquire when the lock is
	// held elsewhere. The node it created has been deleted.
	ErrWouldBlock = errors.New("recipe: held elsewhere")
	// ErrLost is the loss signal of a hold: [Hold.Err] wraps it together with
	// one of the reasons below.
	ErrLost = errors.New("recipe: lock lost")
	// ErrSessionExpired: the ZooKeeper session that owned the node expired, so
	// the server deleted the node.
	ErrSessionExpired = errors.New("recipe: session expired")
	// ErrConnectionSuspended: the client heard nothing from ZooKeeper for
	// long enough that the server may expire the session before this client
	// could learn of it. Ownership can no longer be guaranteed.
	ErrConnectionSuspended = errors.New("recipe: connection suspended past the safe window")
	// ErrNodeDeleted: the node was deleted by someone else while held.
	ErrNodeDeleted = errors.New("recipe: node deleted by another client")
	// ErrNotOwner: a node carrying our id was found owned by another
	// session (a stale node from an earlier session).
	ErrNotOwner = errors.New("recipe: node owned by another session")
	// ErrMismatch: the lock directory was set up with different parameters
	// (for a semaphore, another number of leases) than this client's.
	ErrMismatch = errors.New("recipe: lock directory set up differently")
	// ErrPermission: ZooKeeper refused the operation for lack of rights
	// (the node's ACL does not grant them to this client's credentials).
	ErrPermission = errors.New("recipe: permission denied")
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
