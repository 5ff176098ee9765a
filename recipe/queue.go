package recipe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// errNoTrustedSession is retried: it means "wait for the connection".
var errNoTrustedSession = fmt.Errorf("recipe: no trusted session yet: %w", zk.ErrConnectionClosed)

// verify reads the queue, checks the directory's parameters and makes sure
// our node belongs to the session the client trusts now, all in one round
// trip.
//
// A node this attempt created in the trusted session, whose create reply
// carried its zxid (the token), needs no read of its own: the listing shows
// it. Its watch is armed with the first watch the attempt sets, or by the
// hold. Any other node (found again after a lost reply, or created while the
// session changed) is read, watched and checked for its owner in the same
// round trip as the listing.
func (a *attempt) verify(ctx context.Context) (progress bool, err error) {
	c, dir := a.l.c, a.l.dir
	own := join(dir, a.node)
	ep := c.currentEpoch()
	if ep == nil {
		if c.isClosed() {
			return false, ErrClosed
		}
		return false, errNoTrustedSession
	}
	readOwn := !a.listingVouches(ep)
	var (
		st           *zk.Stat
		ownW         <-chan zk.Event
		dirData      []byte
		errW, errD   error
		concurrently sync.WaitGroup
	)
	if readOwn {
		concurrently.Go(func() { st, ownW, errW = c.getW(ctx, own) })
	}
	if a.l.spec.DirData != nil {
		concurrently.Go(func() { dirData, _, errD = c.get(ctx, dir) })
	}
	names, errL := c.children(ctx, dir)
	concurrently.Wait()
	switch {
	case errors.Is(errW, zk.ErrNoNode), errors.Is(errW, zk.ErrSessionExpired),
		errors.Is(errL, zk.ErrNoNode), errors.Is(errL, zk.ErrSessionExpired):
		a.newID() // gone (session expired or deleted by someone): enqueue anew
		return false, nil
	case errW != nil:
		return false, opError("read", own, errW)
	case errL != nil:
		return false, opError("list", dir, errL)
	case errD != nil && !errors.Is(errD, zk.ErrNoNode):
		return false, opError("read", dir, errD)
	}
	if c.currentEpoch() != ep {
		if c.isClosed() {
			return false, ErrClosed
		}
		return false, errNoTrustedSession
	}
	if readOwn {
		if st.EphemeralOwner != ep.session {
			// A node with our UUID from a session that is no longer
			// ours: delete it and start over with a fresh UUID.
			c.log.Warn("deleting stale node of an earlier session", "node", own, "owner", fmt.Sprintf("0x%x", st.EphemeralOwner))
			if err := c.delete(ctx, own); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return false, opError("delete stale", own, err)
			}
			a.newID()
			return true, nil
		}
		a.ownW, a.token = ownW, st.Czxid
	}
	return true, a.accept(ep, names, dirData)
}

// takeRead accepts the reads sent in the round trip of our create (see
// createThenRead) as verify would have made them, when they can vouch for
// our node: the create's reply named it and carried its token, and the
// create, the reads and their replies all happened in the epoch trusted
// now. Otherwise, or if a read failed, the attempt stays in verifying and
// reads again.
func (a *attempt) takeRead(ep *epoch, r *queueRead) error {
	if ep == nil || !a.listingVouches(ep) || r.errL != nil || (r.errD != nil && !errors.Is(r.errD, zk.ErrNoNode)) ||
		a.l.c.currentEpoch() != ep {
		return nil
	}
	return a.accept(ep, r.names, r.dirData)
}

// listingVouches reports whether a listing made in epoch ep is enough to
// know our node: we created it in ep's session and its create reply named
// it and carried its token. Any other node must be read as well.
func (a *attempt) listingVouches(ep *epoch) bool {
	return a.created == createdHere && a.token != 0 && a.session == ep.session
}

// accept records a listing made in epoch ep, and the directory's data read
// with it, as the known queue.
func (a *attempt) accept(ep *epoch, names []string, dirData []byte) error {
	if len(dirData) > 0 && string(dirData) != string(a.l.spec.DirData) {
		return fmt.Errorf("%w: %w: %s carries %q, this client expects %q", ErrMismatch, a.l.spec.DirMismatch, a.l.dir, dirData, a.l.spec.DirData)
	}
	a.ep = ep
	a.watches = make(map[string]<-chan zk.Event)
	return a.setQueue(names)
}

// relist reads the queue again (our node and its watch are unchanged).
func (a *attempt) relist(ctx context.Context) (progress bool, err error) {
	names, err := a.l.c.children(ctx, a.l.dir)
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		a.newID()
		return false, nil
	case err != nil:
		return false, opError("list", a.l.dir, err)
	}
	return true, a.setQueue(names)
}

// setQueue records a fresh listing as the known queue, after checking that
// no other kind of lock queued in the directory before us.
func (a *attempt) setQueue(names []string) error {
	if err := a.checkKinds(names); err != nil {
		return err
	}
	names = a.dropDuplicates(names)
	a.queue = driver.Sort(driver.Filter(names, a.l.queue...), a.l.queue...)
	a.stale, a.trimmed = false, false
	a.phase = deciding
	return nil
}

// checkKinds fails with ErrMismatch when a node of a kind that does not
// take part in our queue (a mutex node where we want a read/write lock,
// say) was created before ours: the two kinds would ignore each other and
// both hold. A node of another kind created after ours is the intruder's
// problem: it sees ours and backs off.
func (a *attempt) checkKinds(names []string) error {
	ours, ok := driver.Sequence(a.node, a.l.queue...)
	if !ok {
		return nil
	}
	for _, n := range names {
		ln, kind, ok := driver.KindOf(n)
		if !ok || slices.Contains(a.l.queue, ln) {
			continue
		}
		if seq, ok := driver.Sequence(n, ln); ok && seq < ours {
			return fmt.Errorf("%w (%w): in use as a %s lock (node %s); this is a %s lock (%s nodes)",
				ErrMismatch, errOtherKind, kind, n, a.l.spec.Recipe, a.l.spec.LockName)
		}
	}
	return nil
}

// trim keeps, of the known queue, only the window from the first watched
// node to our own, so that a waiter's memory does not grow with the length
// of the queue ahead of it. A trimmed queue cannot vouch for what is ahead
// of the window: after any change in it the attempt lists again.
func (a *attempt) trim(dec driver.Decision) {
	first := dec.Position
	for _, w := range dec.Watch {
		for i := 0; i < first; i++ {
			if a.queue[i] == w {
				first = i
				break
			}
		}
	}
	if first == 0 {
		return
	}
	a.queue = append([]string(nil), a.queue[first:dec.Position+1]...)
	a.trimmed = true
}

// dropDuplicates removes from names, and deletes in the background, any
// other node carrying this attempt's UUID: the late effect of a create whose
// reply was lost. It would otherwise sit in the queue until the session ends.
func (a *attempt) dropDuplicates(names []string) []string {
	out := names[:0]
	for _, n := range names {
		if n != a.node && strings.HasPrefix(n, a.prefix) {
			a.l.c.log.Warn("deleting duplicate node of a lost create", "path", a.l.dir, "node", n)
			a.l.c.cleanup(cleanupJob{dir: a.l.dir, path: join(a.l.dir, n)})
			continue
		}
		out = append(out, n)
	}
	return out
}
