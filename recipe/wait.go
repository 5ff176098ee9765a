package recipe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// arm sets a data watch on every node the driver named that is not watched
// yet, all in one round trip. A node that is already gone is removed from
// the known queue, and the attempt decides again without waiting. If a read
// fails, the attempt stays in arming, keeping the watches that were set: the
// retry sets the ones still missing (a waiter that went to wait without
// them would never be woken).
func (a *attempt) arm(ctx context.Context) (turn, error) {
	todo := a.unwatched()
	reads := a.readWatched(ctx, todo)
	t := turn{next: waiting}
	var failed error // the first read that failed; the others are kept
	for i, n := range todo {
		r := reads[i]
		switch err := r.err; {
		case err == nil && n != a.node && r.st.EphemeralOwner == 0:
			a.dropReads(todo[i:], reads[i:])
			return turn{next: arming, progress: true}, a.persistent(n)
		case err == nil:
			t.progress = t.progress || n != a.node
			a.watching(n, r)
		case errors.Is(err, zk.ErrSessionExpired), n == a.node && errors.Is(err, zk.ErrNoNode):
			a.dropReads(todo[i+1:], reads[i+1:])
			a.newID()
			return turn{next: enqueuing, progress: t.progress}, nil
		case errors.Is(err, zk.ErrNoNode):
			a.queue = slices.DeleteFunc(a.queue, func(m string) bool { return m == n })
			a.stale, t.next = true, deciding
		case failed == nil:
			failed = opError("watch", join(a.l.dir, n), err)
		}
	}
	if failed != nil {
		return turn{next: arming, progress: t.progress}, failed
	}
	return t, nil
}

// dropReads hands the watches of reads that arm does not record (it
// returns early) to the client, as dropWatches does.
func (a *attempt) dropReads(names []string, reads []watchRead) {
	for i, r := range reads {
		if r.err == nil && names[i] != a.node {
			a.l.c.dropWatch(join(a.l.dir, names[i]), watchedNode{names[i], r.ch, r.shared})
		}
	}
}

// unwatched lists the nodes arm must watch: the ones the driver named that
// are not watched yet, and our own node if it is not.
func (a *attempt) unwatched() []string {
	var todo []string
	if a.ownW == nil && !a.trimmed {
		// Our own node's watch goes in the same round trip. It matters
		// only where a deletion event alone can make us hold; a trimmed
		// queue is listed again first, which shows whether our node is
		// still there.
		todo = append(todo, a.node)
	}
	for _, n := range a.watch {
		if a.watches.get(n) == nil {
			todo = append(todo, n)
		}
	}
	return todo
}

// watching records the watch r set on node n, or joined.
func (a *attempt) watching(n string, r watchRead) {
	if n == a.node {
		a.ownW = r.ch
		return
	}
	a.watches.set(n, r.ch, r.shared)
	if n == a.watch[0] && a.span.IsRecording() {
		// Who we wait on: the read that set the watch brought the
		// node's data, its holder's identity.
		a.span.SetAttributes(telemetry.AttrWaitingOnNode.String(n),
			telemetry.AttrWaitingOn.String(dataAttr(r.data)))
	}
}

// persistent is the error of a waiter that finds the node it waits on
// owned by no session: a node made by hand or by a program that is not a
// lock, which nothing would ever delete, so the wait would never end.
func (a *attempt) persistent(n string) error {
	return fmt.Errorf("%w: %s is a persistent node (no session owns it), queued ahead of this %s lock: it is not a holder and nothing "+
		"will release it; delete it if nothing uses it (zklock rm --force)",
		ErrMismatch, join(a.l.dir, n), a.l.spec.Recipe)
}

// watchRead is what arm learnt of one node: its data and stat, and the
// watch on it: set by the read, or, when shared, a subscription to the
// watch another waiter left on the node (see sharedwatch.go).
type watchRead struct {
	data   []byte
	st     *zk.Stat
	ch     <-chan zk.Event
	shared bool
	err    error
}

// readWatched reads every node of names at once, each with a watch.
func (a *attempt) readWatched(ctx context.Context, names []string) []watchRead {
	reads := make([]watchRead, len(names))
	if len(names) == 1 {
		reads[0] = a.readWatch(ctx, names[0])
		return reads
	}
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() { reads[i] = a.readWatch(ctx, names[i]) })
	}
	wg.Wait()
	return reads
}

// readWatch reads node n with a watch: a getData watch of its own, or,
// on another waiter's node, the watch a waiter left there if there is one
// (a plain read then).
func (a *attempt) readWatch(ctx context.Context, n string) (r watchRead) {
	c := a.l.c
	path := join(a.l.dir, n)
	if n != a.node {
		if sub, ok := c.shareWatch(path); ok {
			if r.data, r.st, r.err = c.get(ctx, path); r.err != nil {
				c.leaveShared(path, sub)
				return r
			}
			c.confirmShared(path)
			r.ch, r.shared = sub, true
			return r
		}
	}
	r.data, r.st, r.ch, r.err = c.getDataW(ctx, path)
	return r
}

// await blocks until a watched node changes, our node changes, the epoch
// ends or ctx ends, and returns the phase that follows.
//
// Deleting a watched node removes it from the known queue without listing
// the children again: drivers only look at nodes ordered before ours, and
// sequence numbers only grow, so the known queue minus the deleted node
// decides correctly (nodes deleted meanwhile are found when watched).
//
// Every waiter of a mutex blocks in await and awaitOne, so what they keep
// on the stack counts once per waiter: the work before and after the wait
// is in functions of their own, whose frames are gone while it blocks.
func (a *attempt) await(ctx context.Context) (turn, error) {
	if a.l.c.debugging() {
		a.logWaiting()
	}
	if len(a.watch) != 1 {
		return a.awaitSeveral(ctx)
	}
	w, ev := a.awaitOne(ctx)
	return a.woke(ctx, w, ev)
}

// logWaiting logs what the attempt waits for.
//
//go:noinline
func (a *attempt) logWaiting() {
	a.l.c.log.Debug("waiting", "recipe", a.l.spec.Recipe, "path", a.l.dir, "node", a.node, "watch", a.watch)
}

// watchEvent is an event on the watch of one node of the queue.
type watchEvent struct {
	node string
	ev   zk.Event
}

// wake is what ended a wait on one node.
type wake uint8

const (
	wokeByCtx   wake = iota // ctx ended
	wokeToLook              // the epoch ended or the watches were set again: verify
	wokeByOwn               // an event on our own node
	wokeByWatch             // the event of the watched node
)

// awaitOne blocks until one of the things a waiter on one node watches
// happens, and returns which, with its event.
//
//go:noinline
func (a *attempt) awaitOne(ctx context.Context) (w wake, ev zk.Event) {
	look := a.lookAgain()
	if look == nil {
		return wokeToLook, ev
	}
	own, watched := a.ownW, a.watches.get(a.watch[0])
	select {
	case <-ctx.Done():
		w = wokeByCtx
	case <-look:
		w = wokeToLook
	case ev = <-own:
		w = wokeByOwn
	case ev = <-watched:
		w = wokeByWatch
	}
	return w, ev
}

// woke is the turn that follows what ended awaitOne.
//
//go:noinline
func (a *attempt) woke(ctx context.Context, w wake, ev zk.Event) (turn, error) {
	switch w {
	case wokeByCtx:
		return turn{next: waiting}, ctx.Err()
	case wokeToLook:
		return turn{next: verifying}, nil
	case wokeByOwn:
		return turn{next: a.ownEventWaiting(ev)}, nil
	}
	return turn{next: a.watchFired(watchEvent{a.watch[0], ev}, waiting), progress: true}, nil
}

// awaitSeveral is await for several watched nodes.
//
//go:noinline
func (a *attempt) awaitSeveral(ctx context.Context) (turn, error) {
	woken, next, err := a.awaitMany(ctx)
	if len(woken) == 0 {
		return turn{next: next}, err
	}
	for _, w := range woken {
		next = a.watchFired(w, next)
	}
	return turn{next: next, progress: true}, nil
}

// awaitMany is await for several watched nodes (an N-lease semaphore):
// one forwarder per watch, all joined before it returns, so an event a
// forwarder took is never dropped. next is the phase that ctx, the epoch or
// our own node set when they ended the wait (waiting otherwise: run checks
// ctx before the next phase); the events taken meanwhile apply after it.
func (a *attempt) awaitMany(ctx context.Context) (woken []watchEvent, next phase, err error) {
	fired := make(chan watchEvent, len(a.watch))
	quit := make(chan struct{})
	var forwarders sync.WaitGroup
	for _, n := range a.watch {
		ch := a.watches.get(n)
		forwarders.Go(func() {
			select {
			case ev := <-ch:
				fired <- watchEvent{n, ev}
			case <-quit:
			}
		})
	}
	next = waiting
	look := a.lookAgain()
	if look == nil {
		look = closedChan
	}
	select {
	case <-ctx.Done():
	case <-look:
		next = verifying
	case ev := <-a.ownW:
		next = a.ownEventWaiting(ev)
	case w := <-fired:
		woken = append(woken, w)
	}
	close(quit)
	forwarders.Wait()
	for len(fired) > 0 {
		woken = append(woken, <-fired)
	}
	return woken, next, nil
}

// lookAgain returns the channel closed when the waiter must verify again:
// go-zookeeper set its watches again, or the epoch in which the waiter
// verified its node ended (the client closes the same channel for both,
// see Client.rewatchLocked, so a waiter blocks on one channel for them,
// not two). It is nil when the epoch has already ended.
//
// rewatch is taken when a phase that lists begins, before that phase
// takes the epoch it verifies in, and decide looks at the epoch after:
// any end of the epoch decide did not see came after rewatch was taken,
// and closed it.
func (a *attempt) lookAgain() <-chan struct{} {
	if a.ep.ended() {
		return nil
	}
	if a.rewatch == nil {
		return a.ep.done
	}
	return a.rewatch
}

// ownEventWaiting is ownChanged for an event that came while waiting.
func (a *attempt) ownEventWaiting(ev zk.Event) phase {
	if ev.Type == zk.EventNodeDeleted {
		a.span.AddEvent("own node deleted while waiting")
	}
	return a.ownChanged(ev)
}

// watchFired applies the event of a watched node to an attempt that would
// otherwise go on to next, and returns the phase that follows.
func (a *attempt) watchFired(w watchEvent, next phase) phase {
	a.watches.del(w.node)
	a.l.c.stats.wakeups.Add(1)
	if a.l.c.debugging() {
		a.l.c.log.Debug("woken", "recipe", a.l.spec.Recipe, "path", a.l.dir, "node", a.node,
			"watched", w.node, "event", w.ev.Type.String())
	}
	if a.span.IsRecording() {
		a.span.AddEvent("wake-up", trace.WithAttributes(
			attribute.String("zkrecipes.lock.watched", w.node),
			attribute.String("zkrecipes.zk.event", w.ev.Type.String())))
	}
	switch w.ev.Type {
	case zk.EventNodeDeleted:
		a.queue = slices.DeleteFunc(a.queue, func(m string) bool { return m == w.node })
		a.stale = true
	case zk.EventNotWatching:
		return verifying // session trouble: verify again
	}
	if next == waiting {
		return deciding
	}
	return next
}

// watchSet is the watches an attempt set on nodes of the queue, by node: a
// slice, as a waiter watches one node or a few (a map would cost a waiter
// more than the rest of its state).
type watchSet []watchedNode

type watchedNode struct {
	node   string
	ch     <-chan zk.Event
	shared bool // ch is a subscription to a shared watch
}

// get returns the watch on node n, nil if none.
func (w watchSet) get(n string) <-chan zk.Event {
	for _, x := range w {
		if x.node == n {
			return x.ch
		}
	}
	return nil
}

// set records the watch ch on node n.
func (w *watchSet) set(n string, ch <-chan zk.Event, shared bool) {
	w.del(n)
	*w = append(*w, watchedNode{n, ch, shared})
}

// del forgets the watch on node n, whose event came.
func (w *watchSet) del(n string) {
	*w = slices.DeleteFunc(*w, func(x watchedNode) bool { return x.node == n })
}

// dropWatches hands the watches the attempt still has on other nodes to
// the client, for the waiters that come after it (see sharedwatch.go),
// and forgets them.
func (a *attempt) dropWatches() {
	for _, w := range a.watches {
		a.l.c.dropWatch(join(a.l.dir, w.node), w)
	}
	clear(a.watches)
	a.watches = a.watches[:0]
}

// dropWatch is dropWatches for one watch, on path.
func (c *Client) dropWatch(path string, w watchedNode) {
	if w.shared {
		c.leaveShared(path, w.ch)
		return
	}
	c.orphanWatch(path, w.ch)
}
