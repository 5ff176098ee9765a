package recipe

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// arm sets a data watch on every node the driver named that is not watched
// yet, all in one round trip. A node that is already gone is removed from
// the known queue, and the attempt decides again without waiting.
func (a *attempt) arm(ctx context.Context) (progress bool, err error) {
	var todo []string
	if a.ownW == nil && !a.trimmed {
		// Our own node's watch goes in the same round trip. It matters
		// only where a deletion event alone can make us hold; a trimmed
		// queue is listed again first, which shows whether our node is
		// still there.
		todo = append(todo, a.node)
	}
	for _, n := range a.watch {
		if _, ok := a.watches[n]; !ok {
			todo = append(todo, n)
		}
	}
	datas, chans, errs := a.getWs(ctx, todo)
	next := waiting
	var failed error // the first read that failed; the others are kept
	for i, n := range todo {
		err := errs[i]
		switch {
		case err == nil && n == a.node:
			a.ownW = chans[i]
		case err == nil:
			progress = true
			a.watches[n] = chans[i]
			if n == a.watch[0] && a.span.IsRecording() {
				// Who we wait on: the read that set the watch brought the
				// node's data, its holder's identity.
				a.span.SetAttributes(telemetry.AttrWaitingOnNode.String(n),
					telemetry.AttrWaitingOn.String(string(datas[i])))
			}
		case errors.Is(err, zk.ErrSessionExpired), n == a.node && errors.Is(err, zk.ErrNoNode):
			a.newID()
			return progress, nil
		case errors.Is(err, zk.ErrNoNode):
			a.queue = slices.DeleteFunc(a.queue, func(m string) bool { return m == n })
			a.stale, next = true, deciding
		case failed == nil:
			failed = opError("watch", join(a.l.dir, n), err)
		}
	}
	if failed != nil {
		// Stay in arming: the retry sets the watches still missing. (A
		// waiter that went to wait without them would never be woken.)
		return progress, failed
	}
	a.phase = next
	return progress, nil
}

// getWs sends a getData watch for every node of names at once.
func (a *attempt) getWs(ctx context.Context, names []string) ([][]byte, []<-chan zk.Event, []error) {
	datas := make([][]byte, len(names))
	chans := make([]<-chan zk.Event, len(names))
	errs := make([]error, len(names))
	get := func(i int) { datas[i], _, chans[i], errs[i] = a.l.c.getDataW(ctx, join(a.l.dir, names[i])) }
	if len(names) == 1 {
		get(0)
		return datas, chans, errs
	}
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() { get(i) })
	}
	wg.Wait()
	return datas, chans, errs
}

// await blocks until a watched node changes, our node changes, the epoch
// ends or ctx ends, and sets the phase that follows.
//
// Deleting a watched node removes it from the known queue without listing
// the children again: drivers only look at nodes ordered before ours, and
// sequence numbers only grow, so the known queue minus the deleted node
// decides correctly (nodes deleted meanwhile are found when watched).
func (a *attempt) await(ctx context.Context) (progress bool, err error) {
	if a.l.c.debugging() {
		a.l.c.log.Debug("waiting", "recipe", a.l.spec.Recipe, "path", a.l.dir, "node", a.node, "watch", a.watch)
	}
	var woken []watchEvent
	if len(a.watch) == 1 {
		n := a.watch[0]
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-a.ep.done:
			a.phase = verifying
			return false, nil
		case ev := <-a.ownW:
			return false, a.ownEvent(ev)
		case ev := <-a.watches[n]:
			woken = []watchEvent{{n, ev}}
		}
	} else {
		var stop bool
		woken, stop = a.awaitMany(ctx)
		if stop {
			return false, nil
		}
	}
	for _, w := range woken {
		a.watchFired(w)
	}
	return true, nil
}

// watchEvent is an event on the watch of one node of the queue.
type watchEvent struct {
	node string
	ev   zk.Event
}

// awaitMany is await for several watched nodes (an N-lease semaphore):
// one forwarder per watch, all joined before it returns, so an event a
// forwarder took is never dropped. stop is true when ctx, the epoch or our
// own node ended the wait (the phase is then set).
func (a *attempt) awaitMany(ctx context.Context) (woken []watchEvent, stop bool) {
	fired := make(chan watchEvent, len(a.watch))
	quit := make(chan struct{})
	var forwarders sync.WaitGroup
	for _, n := range a.watch {
		ch := a.watches[n]
		forwarders.Go(func() {
			select {
			case ev := <-ch:
				fired <- watchEvent{n, ev}
			case <-quit:
			}
		})
	}
	select {
	case <-ctx.Done():
	case <-a.ep.done:
		a.phase = verifying
	case ev := <-a.ownW:
		_ = a.ownEvent(ev)
	case w := <-fired:
		woken = append(woken, w)
	}
	close(quit)
	forwarders.Wait()
	for len(fired) > 0 {
		woken = append(woken, <-fired)
	}
	// ctx may have ended meanwhile; run checks it before the next phase.
	return woken, len(woken) == 0
}

// ownEvent handles an event on our own node's watch while waiting.
func (a *attempt) ownEvent(ev zk.Event) error {
	a.ownW = nil
	a.phase = verifying
	if ev.Type == zk.EventNodeDeleted {
		a.span.AddEvent("own node deleted while waiting")
		a.newID()
	}
	return nil
}

// watchFired applies the event of a watched node.
func (a *attempt) watchFired(w watchEvent) {
	delete(a.watches, w.node)
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
		if a.phase == waiting {
			a.phase = deciding
		}
	case zk.EventNotWatching:
		a.phase = verifying // session trouble: verify again
	default:
		if a.phase == waiting {
			a.phase = deciding
		}
	}
}
