package recipe

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// The shared watch of a path: handed over by a waiter that leaves, joined
// by the next, ended by any event of its path; the event routed just
// before the hand-over (not yet in go-zookeeper's channel) ends it at the
// joiner's confirm, and a watch that already fired is never shared.
func TestSharedWatchTable(t *testing.T) {
	const path = "/d/_c_x-lock-0000000001"
	deleted := zk.Event{Type: zk.EventNodeDeleted, Path: path}
	for _, tc := range []struct {
		name string
		// run drives the client; it returns the subscription, if any,
		// and whether it must have been woken with deleted.
		run func(c *Client, ch chan zk.Event) (sub <-chan zk.Event, woken bool)
		// paths is how many shared watches are left.
		paths int
	}{
		{"joined, then the event", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			sub, ok := c.shareWatch(path)
			if !ok {
				t.Fatal("no shared watch to join")
			}
			c.confirmShared(path)
			c.watches.route(deleted)
			ch <- deleted // go-zookeeper delivers after the callback
			return sub, true
		}, 0},
		{"event of another path", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			sub, _ := c.shareWatch(path)
			c.watches.route(zk.Event{Type: zk.EventNodeDeleted, Path: path + "0"})
			return sub, false
		}, 1},
		{"routed before the hand-over", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.watches.route(deleted) // nobody shares the path yet
			c.orphanWatch(path, ch)  // the channel has not had it yet
			sub, ok := c.shareWatch(path)
			if !ok {
				t.Fatal("no shared watch to join")
			}
			ch <- deleted // delivered before the joiner's read returns
			c.confirmShared(path)
			return sub, true
		}, 0},
		{"fired before the hand-over", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			ch <- deleted
			c.orphanWatch(path, ch)
			if _, ok := c.shareWatch(path); ok {
				t.Error("joined a watch that had fired")
			}
			return nil, false
		}, 0},
		{"fired unseen, found when joining", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			ch <- deleted // in the gap: route ran before the hand-over
			if _, ok := c.shareWatch(path); ok {
				t.Error("joined a watch that had fired")
			}
			return nil, false
		}, 0},
		{"joiner left", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			sub, _ := c.shareWatch(path)
			c.leaveShared(path, sub)
			if _, n := sharedWatches(c); n != 0 {
				t.Errorf("%d subscribers after the only one left", n)
			}
			return nil, false
		}, 1},
		{"session's watches ended", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			sub, _ := c.shareWatch(path)
			c.watches.route(zk.Event{Type: zk.EventNotWatching, Path: path})
			if ev := <-sub; ev.Type != zk.EventNotWatching {
				t.Errorf("subscriber got %v, want the end of the watches", ev.Type)
			}
			return nil, false
		}, 0},
		{"second hand-over of the path", func(c *Client, ch chan zk.Event) (<-chan zk.Event, bool) {
			c.orphanWatch(path, ch)
			c.orphanWatch(path, make(chan zk.Event, 1))
			return nil, false
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{}
			sub, woken := tc.run(c, make(chan zk.Event, 1))
			if sub != nil {
				select {
				case ev := <-sub:
					if !woken || ev != deleted {
						t.Errorf("subscriber woken with %v, want no event", ev)
					}
				default:
					if woken {
						t.Error("subscriber not woken")
					}
				}
			}
			if n, _ := sharedWatches(c); n != tc.paths {
				t.Errorf("%d shared watches left, want %d", n, tc.paths)
			}
		})
	}
}

// A table of watches that fired unseen is swept as it grows: what it
// keeps stays within twice what is live.
func TestSharedWatchSweep(t *testing.T) {
	c := &Client{}
	for i := range 1000 {
		ch := make(chan zk.Event, 1)
		c.orphanWatch(string(rune('a'+i%26))+string(rune(i)), ch)
		ch <- zk.Event{Type: zk.EventNodeDeleted} // fired in the gap, nobody joined
	}
	if n, _ := sharedWatches(c); n > 32 {
		t.Errorf("%d dead shared watches kept, want at most 32", n)
	}
}

func sharedWatches(c *Client) (int, int) { return SharedWatches(c) }
