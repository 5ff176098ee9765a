package recipe

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// nodeWatches is the client's one dispatch of node events: the holds that
// watch their node register here, by the node's path, and a single
// goroutine of the client's hands each event on our paths to its hold.
// A watched hold costs a map entry, not a goroutine.
//
// go-zookeeper calls route, through its event callback, for every event it
// receives, on its receive loop and at times under its table of watches:
// route must never block or issue a request, so it only queues the event
// and wakes the dispatcher.
//
// ZooKeeper keeps one watch per path and session, however many requests
// set it, and each event consumes it: the hold whose path an event names
// is its only subscriber, and a change of data (which consumes the watch
// without ending the hold) has the hold read its node again.
type nodeWatches struct {
	mu      sync.Mutex
	byPath  map[string]*Hold
	queue   []zk.Event
	settle  []settling // holds that took over an acquire's watch, recently
	started bool
	wake    chan struct{} // buffered: a pending wake-up

	shared  map[string]*sharedWatch // watches waiters left behind, by path (sharedwatch.go)
	sweptAt int                     // len(shared) after its last sweep
}

// settling is a hold that took over the watch its acquire had set, whose
// channel is looked at again for a while: go-zookeeper calls the event
// callback before it delivers the event to the channel, so an event that
// came just before the hold registered may reach the channel just after
// the hold looked at it.
type settling struct {
	h     *Hold
	ch    <-chan zk.Event
	until time.Time
}

// settleFor is how long a taken-over channel is looked at again; the
// gap it covers is go-zookeeper's receive loop going from the callback to
// the channel, with no I/O in between.
const settleFor = time.Second

// settleTick is how often the dispatcher looks at those channels.
const settleTick = 20 * time.Millisecond

// route queues a node event for the dispatcher if a hold watches its path,
// and ends the shared watch on its path, if any. It never blocks.
func (w *nodeWatches) route(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted, zk.EventNodeDataChanged, zk.EventNodeCreated, zk.EventNotWatching:
	default:
		return
	}
	w.mu.Lock()
	w.routeShared(ev)
	if _, ok := w.byPath[ev.Path]; !ok {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.signal()
}

func (w *nodeWatches) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// add registers h as the watcher of its path, starting the dispatcher on
// first use; ch, if not nil, is the watch its acquire set. It reports false
// when the client is closed.
func (c *Client) watchNode(h *Hold, ch <-chan zk.Event) bool {
	w := &c.watches
	w.mu.Lock()
	if !w.started {
		w.wake = make(chan struct{}, 1)
		if !c.goroutine(func() { w.dispatch(c) }) {
			w.mu.Unlock()
			return false
		}
		w.started = true
	}
	if w.byPath == nil {
		w.byPath = map[string]*Hold{}
	}
	w.byPath[h.path] = h
	if ch != nil {
		w.settle = append(w.settle, settling{h: h, ch: ch, until: time.Now().Add(settleFor)})
	}
	w.mu.Unlock()
	if ch != nil {
		w.signal()
	}
	return true
}

// unwatchNode removes h's registration, if it is still h's.
func (c *Client) unwatchNode(h *Hold) {
	w := &c.watches
	w.mu.Lock()
	if w.byPath[h.path] == h {
		delete(w.byPath, h.path)
		if len(w.byPath) == 0 {
			w.byPath = nil // a map never gives back what it grew to
		}
	}
	w.mu.Unlock()
}

// dispatch hands queued events to their holds until the client closes.
func (w *nodeWatches) dispatch(c *Client) {
	t := time.NewTimer(settleTick)
	defer t.Stop()
	for {
		select {
		case <-c.lifetime.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
		w.mu.Lock()
		evs := w.queue
		w.queue = nil
		todo := make([]*Hold, len(evs))
		for i, ev := range evs {
			todo[i] = w.byPath[ev.Path]
		}
		settle := w.takeSettled()
		if len(w.settle) > 0 {
			t.Reset(settleTick)
		}
		w.mu.Unlock()
		for i, h := range todo {
			if h != nil {
				h.nodeEvent(evs[i])
			}
		}
		for _, s := range settle {
			s.h.nodeEvent(s.ev)
		}
	}
}

// settled is an event found on a taken-over channel.
type settled struct {
	h  *Hold
	ev zk.Event
}

// takeSettled looks at the taken-over channels once: it returns the events
// found on them and forgets those channels, and those looked at long
// enough. w.mu is held.
func (w *nodeWatches) takeSettled() []settled {
	if len(w.settle) == 0 {
		return nil
	}
	var out []settled
	now := time.Now()
	keep := w.settle[:0]
	for _, s := range w.settle {
		select {
		case ev, ok := <-s.ch:
			if ok {
				out = append(out, settled{s.h, ev})
			}
			continue
		default:
		}
		if now.Before(s.until) && w.byPath[s.h.path] == s.h {
			keep = append(keep, s)
		}
	}
	clear(w.settle[len(keep):])
	w.settle = keep
	if len(keep) == 0 {
		w.settle = nil
	}
	return out
}
