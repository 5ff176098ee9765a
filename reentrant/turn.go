package reentrant

import (
	"context"
	"sync"
)

// Turn lets the calls on a recipe handle (acquire, release) run one at a
// time, each waiting for its turn until its context ends: a second Lock on
// a handle waits for the first to finish rather than racing it. The zero
// Turn is ready for use; a Turn must not be copied after first use.
type Turn struct {
	once sync.Once
	ch   chan struct{}
}

// Take waits for the turn, or returns ctx.Err() when ctx ends first. A
// free turn is taken even when ctx has ended: a release called with an
// expired context must still release (its deletion then goes on in the
// background), not fail at random. Every successful Take must be followed
// by one Give.
func (t *Turn) Take(ctx context.Context) error {
	t.once.Do(func() { t.ch = make(chan struct{}, 1) })
	select {
	case t.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case t.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Give ends the turn taken by Take.
func (t *Turn) Give() { <-t.ch }
