// Package boundedmutex is a recipe built outside the library, from its
// public plug-in surface only: a mutex that sheds load. A Lock that would
// queue behind more than a set number of others gives up at once with
// ErrQueueFull, and its node is removed, instead of joining a queue too long
// to be served in time.
//
// Its nodes are the mutex's ("lock-"), so it excludes, and queues fairly
// with, the library's mutex and Curator's InterProcessMutex on the same
// path.
package boundedmutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// ErrQueueFull is wrapped (with recipe.ErrNotAcquired) by the error of a
// Lock that found more than maxAhead contenders ahead of it.
var ErrQueueFull = errors.New("boundedmutex: queue full")

// Mutex is a handle on a bounded-queue mutex at one path.
type Mutex struct{ lk *recipe.Lock }

// New returns a handle on the mutex at path whose Lock refuses to wait
// behind more than maxAhead contenders (the holder counts); maxAhead 0
// makes every Lock a try.
func New(c *recipe.Client, path string, maxAhead int, data []byte) (*Mutex, error) {
	if maxAhead < 0 {
		return nil, fmt.Errorf("boundedmutex: %w: maxAhead %d", recipe.ErrInvalidArgument, maxAhead)
	}
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:   "boundedmutex",
		LockName: "lock-",
		Driver:   bounded(maxAhead),
	}, data)
	if err != nil {
		return nil, fmt.Errorf("boundedmutex: %w", err)
	}
	return &Mutex{lk: lk}, nil
}

// bounded decides like the mutex, and refuses when too many are ahead.
// It keeps the driver rules: it looks only at the nodes before ours, and
// since that number only shrinks while we wait, a node it let in is never
// refused later.
func bounded(maxAhead int) driver.Driver {
	mutex := driver.Mutex()
	return driver.DriverFunc(func(sorted []string, self string) (driver.Decision, error) {
		dec, err := mutex.Decide(sorted, self)
		if err == nil && !dec.Held && dec.Position > maxAhead {
			return driver.Decision{}, fmt.Errorf("%w: %d ahead, at most %d allowed", ErrQueueFull, dec.Position, maxAhead)
		}
		return dec, err
	})
}

// Lock takes the mutex, waiting in line until it is free or ctx ends, unless
// more than maxAhead contenders are ahead: then it fails at once with an
// error wrapping ErrQueueFull. On failure nothing is held and the node it
// queued with is deleted. Release the returned hold to unlock; watch its
// Done channel for loss, and pass its Token to what you write.
func (m *Mutex) Lock(ctx context.Context) (*recipe.Hold, error) {
	return m.lk.Acquire(ctx)
}

// Participants lists the queue: the holder first, then the waiters.
func (m *Mutex) Participants(ctx context.Context) ([]recipe.Participant, error) {
	return m.lk.Participants(ctx)
}

// ParticipantNodes lists the queue as Participants does, from one listing
// of the directory and without each node's data.
func (m *Mutex) ParticipantNodes(ctx context.Context) ([]recipe.ParticipantNode, error) {
	return m.lk.ParticipantNodes(ctx)
}
