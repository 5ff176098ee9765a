package recipe

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/driver"
)

// Many waiters of one client on one lock directory share their listings of
// it. Without that, a burst of n acquires sends n listings of up to n
// names each: traffic, allocation and parsing grow as n², and the replies
// to everything else the session sends (its pings included) queue on the
// server behind megabytes of listings, until the client hears nothing for
// its loss timeout and stops trusting its own session.
//
// A waiter that needs the queue as it stands now asks for the directory's
// listing. At most one listing of a directory is in flight per client: a
// waiter that asks while one is in flight waits for the next one, which is
// sent the moment the one in flight is answered, and serves every waiter
// that asked meanwhile. So every waiter gets a listing sent after it asked,
// as a listing of its own would have been; that is what makes it valid for
// it (ZooKeeper answers one session's requests in order, so the listing
// shows every node whose create was answered before the waiter asked, and
// every deletion whose event the waiter had seen). A burst of n waiters
// costs a listing per round trip of a listing, not a listing per waiter.
//
// The queue is sorted once per listing (queueView), not once per waiter:
// each waiter finds its node in the sorted queue by binary search and keeps
// the part ahead of it, shared, until it decides (decide copies what it
// keeps, see trim).

// listings is a client's shared listings, by lock directory.
type listings struct {
	mu   sync.Mutex
	dirs map[string]*dirListings
}

// dirListings is the listings of one directory: the one in flight and the
// one that follows it.
type dirListings struct {
	sent *listing // in flight; nil when none
	next *listing // asked for while sent was in flight; sent once sent is answered
	// enqueuing counts the creates in flight in this directory (see
	// beginEnqueue).
	enqueuing int
}

// listing is one listing of a directory, shared by the waiters that asked
// for it. Its fields other than done are written once, before done is
// closed, and never after.
type listing struct {
	done  chan struct{}
	names []string
	err   error
	// owned: the names belong to one attempt alone (a listing it made
	// itself, or one only it asked for), which may edit them in place.
	owned bool
	asked int // the callers that asked for it; under listings.mu

	viewOnce sync.Once
	view     *queueView
	viewKey  string // the lock names view was made for
}

// ownListing wraps names that belong to one attempt alone.
func ownListing(names []string) *listing {
	return &listing{names: names, owned: true}
}

// list returns a listing of dir sent after this call began, shared with
// the other waiters of the client that ask for one meanwhile. It returns
// ctx's error if ctx ends first; the listing goes on for the others.
func (c *Client) list(ctx context.Context, dir string) (*listing, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lst, send := c.listings.ask(dir)
	if send {
		c.sendListing(dir, lst)
	}
	select {
	case <-lst.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if lst.err != nil {
		return nil, lst.err
	}
	return lst, nil
}

// ask returns the listing of dir a caller asking now waits for, and
// whether the caller must send it.
func (ls *listings) ask(dir string) (lst *listing, send bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	d := ls.dir(dir)
	switch {
	case d.sent == nil:
		d.sent = &listing{done: make(chan struct{}), asked: 1}
		return d.sent, true
	case d.next == nil:
		d.next = &listing{done: make(chan struct{})}
	}
	d.next.asked++
	return d.next, false
}

// dir returns the listings of dir, made on first use. ls.mu is held.
func (ls *listings) dir(dir string) *dirListings {
	d := ls.dirs[dir]
	if d == nil {
		if ls.dirs == nil {
			ls.dirs = make(map[string]*dirListings)
		}
		d = &dirListings{}
		ls.dirs[dir] = d
	}
	return d
}

// answered records that dir's listing in flight, lst, was answered, and
// returns the one to send next, if any waiter asked for one meanwhile.
// Nobody joins lst any more: a listing only one caller asked for is that
// caller's own (a waiter woken alone, as in a queue's hand-off, sorts only
// the part ahead of it, as with a listing of its own).
func (ls *listings) answered(dir string, lst *listing) (next *listing) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	lst.owned = lst.asked == 1
	d := ls.dirs[dir]
	d.sent, d.next = d.next, nil
	if d.sent == nil && d.enqueuing == 0 {
		delete(ls.dirs, dir)
	}
	return d.sent
}

// sendListing sends lst, a listing of dir, on one of the client's workers,
// and, once it is answered, the listing asked for meanwhile.
func (c *Client) sendListing(dir string, lst *listing) {
	var once sync.Once
	// finish records the answer; only its first call does, and then
	// returns the listing to send next.
	finish := func(names []string, err error) (next *listing) {
		once.Do(func() {
			lst.names, lst.err = names, c.mapClosed(err)
			next = c.listings.answered(dir, lst)
			close(lst.done)
		})
		return next
	}
	c.stats.lists.Add(1)
	r := c.start(func() error {
		names, _, err := c.zk.Children(dir)
		if err != nil {
			names = nil
		}
		if next := finish(names, err); next != nil {
			c.sendListing(dir, next) // handed to a worker: no recursion
		}
		return err
	})
	select {
	case <-r.done:
		// Refused at once (the client is closed), or already answered.
		if next := finish(nil, r.err); next != nil {
			c.sendListing(dir, next)
		}
	default:
	}
}

// beginEnqueue notes a create in flight in dir, and reports whether it is
// the only one: only then are the reads sent behind it (createThenRead)
// worth their cost. With others in flight, every one of them would carry
// a listing of its own; they share theirs instead (list).
func (ls *listings) beginEnqueue(dir string) (alone bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	d := ls.dir(dir)
	d.enqueuing++
	return d.enqueuing == 1 && d.sent == nil
}

// endEnqueue notes that a create counted by beginEnqueue is over.
func (ls *listings) endEnqueue(dir string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	d := ls.dirs[dir]
	d.enqueuing--
	if d.enqueuing == 0 && d.sent == nil {
		delete(ls.dirs, dir)
	}
}

// queueView is a listing sorted for the waiters of one queue: the nodes
// that take part in it, in queue order, and the other children.
type queueView struct {
	nodes  []string // in queue order (driver.Sort)
	seqs   []int64  // the sequence number of each of nodes
	others []string // the children that do not take part, in listing order
}

// viewFor returns the listing sorted for a queue of the lock names q, made
// once per listing (for the first q asked; a listing of a directory is
// almost always asked for by one queue).
func (lst *listing) viewFor(q []string) *queueView {
	key := strings.Join(q, "/") // "/" is in no node name
	lst.viewOnce.Do(func() {
		lst.view, lst.viewKey = newQueueView(lst.names, q), key
	})
	if lst.viewKey != key {
		return newQueueView(lst.names, q)
	}
	return lst.view
}

// newQueueView sorts names for a queue of the lock names q.
func newQueueView(names []string, q []string) *queueView {
	es := make([]queueEntry, 0, len(names))
	v := &queueView{}
	for _, n := range names {
		if seq, ok := driver.Sequence(n, q...); ok {
			es = append(es, queueEntry{seq, n})
		} else {
			v.others = append(v.others, n)
		}
	}
	sortEntries(es) // not slices.SortFunc: see sortEntries
	v.nodes = make([]string, len(es))
	v.seqs = make([]int64, len(es))
	for i, e := range es {
		v.nodes[i], v.seqs[i] = e.name, e.seq
	}
	return v
}

// find returns the index of node, whose sequence number is seq, in the
// view's queue, and whether it is there; when it is not, i is where it
// would be.
func (v *queueView) find(node string, seq int64) (i int, found bool) {
	i = sort.Search(len(v.nodes), func(j int) bool {
		return v.seqs[j] > seq || v.seqs[j] == seq && v.nodes[j] >= node
	})
	return i, i < len(v.nodes) && v.nodes[i] == node
}
