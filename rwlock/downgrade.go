package rwlock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// downgrade takes the read lock while the handle holds the write lock w:
// a read node that ignores w holds at once unless a writer is queued
// between w and it; then the read hold rides on w instead.
func (rw *RWLock) downgrade(ctx context.Context, w *recipe.Hold) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	k, _ := driver.KindNamed(rw.readName)
	rd, err := k.Driver(0)
	if err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	lk, err := recipe.NewLock(rw.c, rw.Path(), recipe.LockSpec{
		Recipe:      "rwlock.read",
		LockName:    rw.readName,
		NotAcquired: ErrNotAcquired,
		Queue:       k.Queue(),
		Driver:      readBeside(rd, w.Node()),
	}, rw.data)
	if err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	h, err := lk.TryAcquire(ctx)
	switch {
	case errors.Is(err, recipe.ErrWouldBlock):
		h = nil // a writer is queued behind w: ride on w
	case err != nil:
		return err
	}
	rw.mu.Lock()
	rw.r, rw.rn, rw.rgen = h, 1, new(byte)
	rw.mu.Unlock()
	return nil
}

// readBeside returns the read driver rd ([driver.Read], from the read
// kind of [driver.Kind]'s table) as seen by the holder of the write node
// own: rd on the queue with own left out, so that a read
// node queued while own holds the write lock is not blocked by it.
//
// It is used for a downgrade only, with a non-blocking acquire: the write
// lock is held by own, so own is the head of the queue, and the read node
// holds at once unless another writer queued between own and it. Such a
// writer cannot be kept out by a read node queued behind it (a writer waits
// only for the nodes ahead of it), so the caller must not rely on the read
// node then; and it must not wait for that writer either, which itself
// waits for own: that would deadlock.
//
// It honours the [driver.Driver] contract: it is a pure function of its
// arguments (own is fixed when the driver is made), it does not modify
// sorted, and since dropping a name other than self from the queue keeps
// the order of the rest, every rule of driver.Read (verdict from the nodes
// ahead of self only; deletions never take a hold away; Watch names the
// nearest earlier write, whose deletion alone can change the verdict)
// carries over. Position is self's index in the full queue.
func readBeside(rd driver.Driver, own string) driver.Driver {
	return driver.DriverFunc(func(sorted []string, self string) (driver.Decision, error) {
		i := slices.Index(sorted, own)
		if i < 0 || self == own {
			return rd.Decide(sorted, self)
		}
		d, err := rd.Decide(slices.Delete(slices.Clone(sorted), i, i+1), self)
		if err != nil {
			return d, err
		}
		d.Position = slices.Index(sorted, self)
		return d, nil
	})
}
