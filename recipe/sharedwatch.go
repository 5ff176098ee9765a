package recipe

import (
	"slices"

	"github.com/go-zookeeper/zk"
)

// Watches left behind by waiters that stopped waiting, shared by the
// waiters that come after them.
//
// go-zookeeper v1.0.4 cannot remove a watch: the channel of every getData
// watch stays in its table until the server fires the watch. A waiter that
// gives up (its context ended) while the node it watched is still there
// leaves that channel behind; a thousand waiters timing out behind one
// long holder would leave a thousand channels on the holder's node. The
// server keeps a single watch per path and session, however many requests
// set it: so a waiter that leaves hands its watch to the client
// (orphanWatch), and the next waiter that needs a watch on that path joins
// it (shareWatch) instead of setting another one. What is kept is then one
// channel per watched path, not one per attempt, and a waiter that joins
// costs a subscription, given back when it leaves.
//
// The dispatch's route sees every event before go-zookeeper hands it to
// the channels of the path (both on go-zookeeper's receive loop, in that
// order), and ends a shared watch on any event of its path, handing the
// event to every subscriber. The one gap: an event routed just before its
// watch was handed over, not yet in the watch's channel. A waiter that
// joins reads the node afterwards, and that read's reply is taken off the
// wire after the event was delivered to the channel, so looking at the
// channel after the read (confirmShared) closes the gap for it.

// sharedWatch is a watch a waiter left behind, on one path.
type sharedWatch struct {
	ch   <-chan zk.Event // go-zookeeper's channel of the watch
	subs []chan zk.Event // the waiters that joined it, each woken once
}

// end hands ev to every subscriber of s. It never blocks: a subscription
// is woken once, through a buffer of one.
func (s *sharedWatch) end(ev zk.Event) {
	for _, sub := range s.subs {
		select {
		case sub <- ev:
		default:
		}
	}
}

// fired reports the event waiting on s's channel, if the watch has fired.
func (s *sharedWatch) fired() (zk.Event, bool) {
	select {
	case ev, ok := <-s.ch:
		if !ok {
			ev = zk.Event{Type: zk.EventNotWatching}
		}
		return ev, true
	default:
		return zk.Event{}, false
	}
}

// routeShared ends the shared watch of ev's path, if there is one. w.mu
// is held.
func (w *nodeWatches) routeShared(ev zk.Event) {
	if s, ok := w.shared[ev.Path]; ok {
		delete(w.shared, ev.Path)
		s.end(ev)
	}
}

// orphanWatch takes the watch ch on path from a waiter that no longer
// waits on it. A watch that already fired, or a path that already has a
// shared watch, is dropped (the server keeps one watch per path anyway).
func (c *Client) orphanWatch(path string, ch <-chan zk.Event) {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.shared[path]; ok {
		return
	}
	s := &sharedWatch{ch: ch}
	if _, fired := s.fired(); fired {
		return
	}
	if w.shared == nil {
		w.shared = map[string]*sharedWatch{}
	}
	w.shared[path] = s
	w.sweepShared()
}

// sweepShared forgets the shared watches that fired unseen (in the gap
// described above, with nobody joining after), whenever the table has
// doubled since the last sweep: the work is linear in what was added.
// w.mu is held.
func (w *nodeWatches) sweepShared() {
	if len(w.shared) < 2*w.sweptAt {
		return
	}
	for path, s := range w.shared {
		if len(s.subs) == 0 {
			if _, fired := s.fired(); fired {
				delete(w.shared, path)
			}
		}
	}
	w.sweptAt = max(len(w.shared), 16)
}

// shareWatch joins the shared watch on path, if there is one that has not
// fired, and returns the subscription that its event will be handed to.
// The caller must then read the node and call confirmShared.
func (c *Client) shareWatch(path string) (chan zk.Event, bool) {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.shared[path]
	if !ok {
		return nil, false
	}
	if ev, fired := s.fired(); fired {
		delete(w.shared, path)
		s.end(ev)
		return nil, false
	}
	sub := make(chan zk.Event, 1)
	s.subs = append(s.subs, sub)
	return sub, true
}

// confirmShared looks at the shared watch on path again after a read of
// the node made once the waiter joined: an event routed before the watch
// was handed over is in its channel by then, and ends it.
func (c *Client) confirmShared(path string) {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.shared[path]; ok {
		if ev, fired := s.fired(); fired {
			delete(w.shared, path)
			s.end(ev)
		}
	}
}

// leaveShared takes sub out of the shared watch on path, if it is still
// there.
func (c *Client) leaveShared(path string, sub <-chan zk.Event) {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.shared[path]; ok {
		s.subs = slices.DeleteFunc(s.subs, func(x chan zk.Event) bool { return (<-chan zk.Event)(x) == sub })
		if len(s.subs) == 0 {
			s.subs = nil
		}
	}
}
