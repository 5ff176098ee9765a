package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

var (
	// ErrNotInQueue is wrapped by the error a Driver returns when its own
	// node is not among the children it is given (for instance because
	// the node was deleted with an expired session).
	ErrNotInQueue = errors.New("driver: own node not among the children")

	// ErrInvalidLeases is wrapped by the error Leases returns for a lease
	// count below one.
	ErrInvalidLeases = errors.New("driver: number of leases must be at least 1")
)

// Decision is a driver's verdict for one node.
type Decision struct {
	// Held reports whether the node holds the lock, lease or leadership.
	Held bool

	// Watch lists, when Held is false, the nodes whose deletion can
	// change the verdict: children of the same directory, ordered before
	// the node itself, in queue order. It is never empty when Held is
	// false, never contains the node itself, and is nil when Held is true.
	// It is a new slice, not part of the one given to Decide.
	Watch []string

	// Position is the index of the node in the sorted children (0 is the
	// head of the queue), for observability.
	Position int
}

// Driver decides, from the children of a lock directory sorted by [Sort]
// and the name of our own node, whether we hold the lock and, if not,
// which nodes to watch.
//
// Every Driver in this package, and every Driver a recipe engine is given,
// must satisfy this contract:
//
//   - Decide is pure and deterministic: its result depends only on its
//     arguments, which it does not modify; it is safe for concurrent use.
//   - sorted is in the order [Sort] produces (Decide does not sort it
//     again) and self is compared with its elements as a whole name.
//   - If self is not in sorted, Decide returns a zero Decision and an error
//     wrapping [ErrNotInQueue].
//   - The Decision depends only on self's index and on the nodes ordered
//     before self. Nodes ordered after self are ignored, so nodes created
//     later, which ZooKeeper gives larger sequence numbers, never change
//     the verdict.
//   - Deleting nodes other than self never turns Held into not Held.
//   - When not Held, the verdict cannot become Held unless at least one
//     node of Watch is deleted: deleting any set of nodes that avoids
//     Watch leaves self waiting. So a waiter that watches exactly the
//     nodes of Watch is always woken when it may proceed.
//
// A recipe engine relies on the last three rules to hand the lock over on
// a deletion event without listing the children again: it removes the
// deleted name from its sorted slice and calls Decide again.
type Driver interface {
	// Decide returns the verdict for the node self among sorted.
	Decide(sorted []string, self string) (Decision, error)
}

// Positioner is a [Driver] that can also decide from the index of our
// node in sorted, so that an engine deciding for many nodes of one listing
// (an acquire of several leases at once) does not look for each of them:
// DecideAt(sorted, i) must return exactly what Decide(sorted, sorted[i])
// returns, for every i in range, and an error wrapping [ErrNotInQueue] for
// an i out of range. Implementing it is optional: [DecideAt] falls back to
// Decide. The drivers of this package implement it.
type Positioner interface {
	Driver
	DecideAt(sorted []string, i int) (Decision, error)
}

// DecideAt returns d's verdict for sorted[i] among sorted: with d's own
// DecideAt if d is a [Positioner], with Decide otherwise. For i out of
// range it returns an error wrapping [ErrNotInQueue].
func DecideAt(d Driver, sorted []string, i int) (Decision, error) {
	if i < 0 || i >= len(sorted) {
		return Decision{}, fmt.Errorf("%w: index %d of %d", ErrNotInQueue, i, len(sorted))
	}
	if p, ok := d.(Positioner); ok {
		return p.DecideAt(sorted, i)
	}
	return d.Decide(sorted, sorted[i])
}

// DriverFunc adapts an ordinary function to the [Driver] interface, like
// [net/http.HandlerFunc]. The function must honor the Driver contract.
type DriverFunc func(sorted []string, self string) (Decision, error)

// Decide returns f(sorted, self).
func (f DriverFunc) Decide(sorted []string, self string) (Decision, error) {
	return f(sorted, self)
}

// position returns the index of self in sorted.
func position(sorted []string, self string) (int, error) {
	i := slices.Index(sorted, self)
	if i < 0 {
		return -1, fmt.Errorf("%w: %q", ErrNotInQueue, self)
	}
	return i, nil
}

// Mutex returns the driver of an exclusive lock, as used by a mutex or a
// leader latch: a node holds the lock if and only if it is the first of
// the queue. Otherwise it watches its immediate predecessor only, so a
// release wakes exactly one waiter (no herd effect).
func Mutex() Driver { return leases{n: 1} }

// Write returns the driver of the write side of a read/write lock. It
// behaves exactly like [Mutex]: a write waits for every earlier node,
// read or write, and watches its immediate predecessor. It exists so that
// a read/write lock reads naturally as Read(...) and Write().
func Write() Driver { return leases{n: 1} }

// Leases returns the driver of a semaphore with n leases: a node holds a
// lease if and only if fewer than n nodes precede it. A waiter at index i
// (i >= n) watches its n immediate predecessors, sorted[i-n:i].
//
// This watch set is both live and herd-free. The waiter may proceed once
// i-n+1 of the i nodes ahead of it are gone; only i-n of those are
// unwatched, so by the pigeonhole principle at least one deletion it needs
// is a watched one: it is always woken when it can proceed. And since a
// node is watched only by the n nodes behind it, one deletion wakes at
// most n waiters. (Watching only the node n places ahead would not be
// live: the deletion of any other holder would free a lease that nobody
// notices.)
//
// Leases(1) behaves exactly like [Mutex]. For n < 1, Leases returns an
// error wrapping [ErrInvalidLeases].
func Leases(n int) (Driver, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: got %d", ErrInvalidLeases, n)
	}
	return leases{n: n}, nil
}

type leases struct{ n int }

func (l leases) Decide(sorted []string, self string) (Decision, error) {
	i, err := position(sorted, self)
	if err != nil {
		return Decision{}, err
	}
	return l.DecideAt(sorted, i)
}

// DecideAt is Decide for sorted[i] (see [Positioner]).
func (l leases) DecideAt(sorted []string, i int) (Decision, error) {
	if i < 0 || i >= len(sorted) {
		return Decision{}, fmt.Errorf("%w: index %d of %d", ErrNotInQueue, i, len(sorted))
	}
	if i < l.n {
		return Decision{Held: true, Position: i}, nil
	}
	return Decision{Watch: slices.Clone(sorted[i-l.n : i]), Position: i}, nil
}

// Read returns the driver of the read side of a read/write lock: a reader
// holds the lock if and only if no write node precedes it, so readers
// queued behind readers share the lock. Otherwise it watches the nearest
// write node ahead of it, and only that one: readers between the two do
// not block it.
//
// A node is a write node when its name contains writeLockName (the lock
// name the write side uses, such as "write-" or Curator's "__WRIT__").
// Misclassifying a reader as a writer can only delay readers, never admit
// a reader next to a writer; with an empty writeLockName every node counts
// as a write node and Read behaves like [Write].
func Read(writeLockName string) Driver { return read{write: writeLockName} }

type read struct{ write string }

func (r read) Decide(sorted []string, self string) (Decision, error) {
	i, err := position(sorted, self)
	if err != nil {
		return Decision{}, err
	}
	return r.DecideAt(sorted, i)
}

// DecideAt is Decide for sorted[i] (see [Positioner]).
func (r read) DecideAt(sorted []string, i int) (Decision, error) {
	if i < 0 || i >= len(sorted) {
		return Decision{}, fmt.Errorf("%w: index %d of %d", ErrNotInQueue, i, len(sorted))
	}
	for j := i - 1; j >= 0; j-- {
		if strings.Contains(sorted[j], r.write) {
			return Decision{Watch: []string{sorted[j]}, Position: i}, nil
		}
	}
	return Decision{Held: true, Position: i}, nil
}
