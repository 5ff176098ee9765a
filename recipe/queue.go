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
func (a *attempt) verify(ctx context.Context) (turn, error) {
	stay := turn{next: verifying}
	c := a.l.c
	ep := c.currentEpoch()
	if ep == nil {
		return stay, c.noTrustedSession()
	}
	readOwn := !a.listingVouches(ep)
	r := a.readQueue(ctx, readOwn)
	own := join(a.l.dir, a.node)
	switch {
	case gone(r.errW), gone(r.errL):
		a.newID() // gone (session expired or deleted by someone): enqueue anew
		return turn{next: enqueuing}, nil
	case r.errW != nil:
		return stay, opError("read", own, r.errW)
	case r.errL != nil:
		return stay, opError("list", a.l.dir, r.errL)
	case r.errD != nil && !errors.Is(r.errD, zk.ErrNoNode):
		return stay, opError("read", a.l.dir, r.errD)
	case c.currentEpoch() != ep:
		return stay, c.noTrustedSession()
	}
	if readOwn {
		if r.st.EphemeralOwner != ep.session {
			return a.dropStale(ctx, own, r.st.EphemeralOwner)
		}
		a.ownW, a.token = r.ownW, r.st.Czxid
	}
	if err := a.acceptListing(ep, r.lst, r.dirData); err != nil {
		return turn{next: verifying, progress: true}, err
	}
	if a.l.spec.DirData != nil && r.errD == nil && len(r.dirData) == 0 {
		return a.claimDir(ctx, r.dirVersion)
	}
	return turn{next: deciding, progress: true}, nil
}

// claimDir records the lock's DirData in a directory found without data
// (one made by hand, or by another program), with a set conditional on
// the data version read, so that of two clients with other parameters
// (semaphores with other numbers of leases) only the first writes, and
// the other, reading again, fails with ErrMismatch instead of both
// holding. The attempt then reads the queue again.
func (a *attempt) claimDir(ctx context.Context, version int32) (turn, error) {
	c, dir := a.l.c, a.l.dir
	c.stats.writes.Add(1)
	err := c.call(ctx, func() error {
		_, err := c.zk.Set(dir, a.l.spec.DirData, version)
		return err
	})
	switch {
	case err == nil:
		c.log.Debug("recorded the lock's parameters in its directory", "path", dir, "data", dataAttr(a.l.spec.DirData))
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		// Someone else wrote first, or the directory went: read again.
	default:
		return turn{next: verifying}, opError("record parameters in", dir, err)
	}
	return turn{next: verifying, progress: true}, nil
}

// gone reports whether err says that a node (or the session that owned
// it) no longer exists.
func gone(err error) bool {
	return errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired)
}

// noTrustedSession is the error of a phase that needs the session trusted now and
// finds none: retried (it means "wait for the connection"), or ErrClosed.
func (c *Client) noTrustedSession() error {
	if c.isClosed() {
		return ErrClosed
	}
	return errNoTrustedSession
}

// verifyRead is the one round trip of verify: the listing (shared with
// the client's other waiters in the directory, see list), and, as asked,
// our node with a watch and the directory's data.
type verifyRead struct {
	lst        *listing
	st         *zk.Stat
	ownW       <-chan zk.Event
	dirData    []byte
	dirVersion int32 // of dirData

	errL, errW, errD error
}

// readQueue sends verify's reads at once and waits for all of them.
func (a *attempt) readQueue(ctx context.Context, readOwn bool) (r verifyRead) {
	c, dir := a.l.c, a.l.dir
	var concurrently sync.WaitGroup
	if readOwn {
		concurrently.Go(func() { r.st, r.ownW, r.errW = c.getW(ctx, join(dir, a.node)) })
	}
	if a.l.spec.DirData != nil {
		concurrently.Go(func() {
			var st *zk.Stat
			if r.dirData, st, r.errD = c.get(ctx, dir); st != nil {
				r.dirVersion = st.Version
			}
		})
	}
	r.lst, r.errL = c.list(ctx, dir)
	concurrently.Wait()
	return r
}

// dropStale deletes a node with our UUID from a session that is no longer
// ours (owner), and starts over with a fresh UUID.
func (a *attempt) dropStale(ctx context.Context, own string, owner int64) (turn, error) {
	c := a.l.c
	c.log.Warn("deleting stale node of an earlier session", "node", own, "owner", fmt.Sprintf("0x%x", owner))
	if err := c.delete(ctx, own); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return turn{next: verifying}, opError("delete stale", own, err)
	}
	a.newID()
	return turn{next: enqueuing, progress: true}, nil
}

// takeRead accepts the reads sent in the round trip of our create (see
// createThenRead) as verify would have made them, when they can vouch for
// our node: the create's reply named it and carried its token, and the
// create, the reads and their replies all happened in the epoch trusted
// now; the attempt then decides. Otherwise, or if a read failed, it stays
// in verifying and reads again.
func (a *attempt) takeRead(ep *epoch, r *queueRead) (phase, error) {
	if ep == nil || !a.listingVouches(ep) || r.errL != nil || (r.errD != nil && !errors.Is(r.errD, zk.ErrNoNode)) ||
		a.l.c.currentEpoch() != ep {
		return verifying, nil
	}
	if a.l.spec.DirData != nil && r.errD == nil && len(r.dirData) == 0 {
		return verifying, nil // a directory without data: verify records ours
	}
	if err := a.accept(ep, r.names, r.dirData); err != nil {
		return verifying, err
	}
	return deciding, nil
}

// listingVouches reports whether a listing made in epoch ep is enough to
// know our node: we created it in ep's session and its create reply named
// it and carried its token, and no listing has lacked it since. Any other
// node must be read as well.
func (a *attempt) listingVouches(ep *epoch) bool {
	return a.created == createdHere && a.token != 0 && a.session == ep.session && !a.missed
}

// accept records a listing made in epoch ep, whose names belong to the
// attempt alone, and the directory's data read with it, as the known queue.
func (a *attempt) accept(ep *epoch, names []string, dirData []byte) error {
	return a.acceptListing(ep, ownListing(names), dirData)
}

// acceptListing is accept for a listing that may be shared.
func (a *attempt) acceptListing(ep *epoch, lst *listing, dirData []byte) error {
	if len(dirData) > 0 && string(dirData) != string(a.l.spec.DirData) {
		return fmt.Errorf("%w: %w: %s carries %s, this client expects %s", ErrMismatch, a.l.spec.DirMismatch, a.l.dir, Quote(string(dirData)), Quote(string(a.l.spec.DirData)))
	}
	a.ep = ep
	a.dropWatches()
	return a.setQueueFrom(lst)
}

// relist reads the queue again (our node and its watch are unchanged).
func (a *attempt) relist(ctx context.Context) (turn, error) {
	lst, err := a.l.c.list(ctx, a.l.dir)
	switch {
	case gone(err):
		a.newID()
		return turn{next: enqueuing}, nil
	case err != nil:
		return turn{next: relisting}, opError("list", a.l.dir, err)
	}
	if err := a.setQueueFrom(lst); err != nil {
		return turn{next: relisting, progress: true}, err
	}
	return turn{next: deciding, progress: true}, nil
}

// setQueueFrom records a fresh listing as the known queue, as setQueue
// does. A shared listing is not edited: the attempt's queue is the part of
// the listing's sorted view up to our node (found by binary search), which
// decide copies before the attempt edits it, and the nodes of no kind of
// ours are checked as setQueue checks them. Our node is looked up by its
// sequence number; one that does not parse, or an attempt that may have
// left a duplicate of its node behind (dupRisk: a create of unknown
// outcome under its UUID), takes setQueue's way on a copy.
func (a *attempt) setQueueFrom(lst *listing) error {
	q := a.l.queue
	ours, ordered := driver.Sequence(a.node, q...)
	if lst.owned || !ordered || a.dupRisk {
		names := lst.names
		if !lst.owned {
			names = slices.Clone(names)
		}
		return a.setQueue(names)
	}
	v := lst.viewFor(q)
	for _, n := range v.others {
		if err := a.kindConflict(n, ours, true); err != nil {
			return err
		}
	}
	i, found := v.find(a.node, ours)
	a.stale, a.trimmed, a.at = false, false, 0
	if !found {
		a.queue = v.nodes[:i:i] // decide finds our node missing
		return nil
	}
	a.queue, a.at = v.nodes[:i+1:i+1], i+1
	return nil
}

// setQueue records a fresh listing as the known queue, after checking that
// no other kind of lock queued in the directory before us (see
// kindConflict). The known queue holds the nodes of our queue ordered
// before ours, and ours: a driver decides from nothing after it (rule 2 of
// driver.Driver), so a waiter behind a long queue sorts only what is ahead
// of it. Each name is parsed once.
//
// It also removes, and deletes in the background, any other node carrying
// this attempt's UUID: the late effect of a create whose reply was lost,
// which would otherwise sit in the queue until the session ends.
func (a *attempt) setQueue(names []string) error {
	q := a.l.queue
	ours, ordered := driver.Sequence(a.node, q...)
	out := names[:0] // in place: the listing is ours
	for _, n := range names {
		seq, ok := driver.Sequence(n, q...)
		switch {
		case !ok:
			if err := a.kindConflict(n, ours, ordered); err != nil {
				return err
			}
			if ordered || !slices.ContainsFunc(q, func(ln string) bool { return ln != "" && strings.Contains(n, ln) }) {
				continue // after ours in queue order (driver.Sort), or not in our queue
			}
		case n != a.node && strings.HasPrefix(n, a.prefix):
			a.l.c.log.Warn("deleting duplicate node of a lost create", "path", a.l.dir, "node", n)
			a.l.c.cleanup(cleanupJob{dir: a.l.dir, path: join(a.l.dir, n)})
			continue
		case ordered && (seq > ours || seq == ours && n > a.node):
			continue // behind ours
		}
		out = append(out, n)
	}
	a.queue = driver.Sort(out, q...)
	a.stale, a.trimmed, a.at = false, false, 0
	return nil
}

// kindConflict fails with ErrMismatch when n, a child of the directory that
// does not take part in our queue, is a node our driver therefore cannot
// order against our own node (ours, when ordered; see driver.Classify):
//
//   - a node of one of the library's kinds (a mutex node where we want a
//     read/write lock, say) created before ours: the two kinds would
//     ignore each other and both hold. One created after ours is the
//     intruder's problem: our recipes check kinds too, see ours and back
//     off;
//   - a node of a foreign kind (kazoo's __lock__), a lock-like node of no
//     known kind (kazoo's __rlock__), or a child of Curator's semaphore
//     layout, whatever its order: its owner does not look at our nodes, so
//     it would hold next to us whether it came first or not.
//
// Children that are not lock nodes are left alone.
func (a *attempt) kindConflict(n string, ours int64, ordered bool) error {
	var why string
	switch c := driver.Classify(n); c {
	case driver.Native:
		ln, kind, _ := driver.KindOf(n)
		if seq, ok := driver.Sequence(n, ln); !ordered || !ok || seq >= ours {
			return nil
		}
		why = fmt.Sprintf("in use as a %s lock (node %s)", kind, Quote(n))
	case driver.Foreign:
		ln, _, _ := driver.KindOf(n)
		k, _ := driver.KindNamed(ln)
		why = fmt.Sprintf("in use by kazoo's %s (node %s), which does not see %s nodes", k.Kazoo, Quote(n), a.l.spec.LockName)
	case driver.Unknown:
		why = fmt.Sprintf("node %s is %s, which nothing here can order against %s nodes", Quote(n), c, a.l.spec.LockName)
	case driver.Layout:
		why = fmt.Sprintf("node %s is %s, which does not see %s nodes", Quote(n), c, a.l.spec.LockName)
	default:
		return nil
	}
	return fmt.Errorf("%w (%w): %s; this is a %s lock (%s nodes)",
		ErrMismatch, errOtherKind, why, a.l.spec.Recipe, a.l.spec.LockName)
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
	// The window's names are copied: each name of a listing is an
	// allocation of its own among the listing's others, and one kept would
	// keep the heap's span of them all in use long after the rest is
	// garbage.
	window := make([]string, dec.Position+1-first)
	for i, n := range a.queue[first:dec.Position] {
		window[i] = strings.Clone(n)
	}
	window[len(window)-1] = a.node
	a.queue = window
	a.trimmed = true
}

// named returns, for each of names, the equal name of the known queue, so
// that what the attempt keeps shares the queue's copies (see trim).
func (a *attempt) named(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if j := slices.Index(a.queue, n); j >= 0 {
			out[i] = a.queue[j]
		}
	}
	return out
}
