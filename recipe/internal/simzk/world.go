package simzk

import (
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// World is one simulated ZooKeeper ensemble as clients see it: the tree,
// the zxid counter, the sessions, and the clients connected to it.
type World struct {
	mu       sync.Mutex
	rng      *rand.Rand // children order; used under mu only
	zxid     int64
	nextSess int64
	nextLink int
	nodes    map[string]*node
	sessions map[int64]*session
	// The server's watch tables: data watches (GetW, ExistsW) and child
	// watches (ChildrenW) by path, each a set of connections, as
	// ZooKeeper's WatchManager keeps them.
	dataW  map[string]map[*link]struct{}
	childW map[string]map[*link]struct{}

	ends        map[*end]struct{} // the server ends of the open connections
	violations  []string          // requests that break the protocol (Violations)
	kept        []string          // connections a client kept after a bad frame (HostileKept)
	lags        map[string]lag    // followers that lag, by address (Lag)
	lagRefusals int               // connects refused for having seen too much
	history     []zxidAt          // when the zxids of the last maxLag were taken
	down        bool              // the server is down (Restart): dials are refused
	upSince     time.Time         // when it came up last: no session expires sooner than its timeout after

	closed bool
	done   chan struct{} // closed by Close
	kick   chan struct{} // wakes the session clock
	wg     sync.WaitGroup
}

// Node is a znode as Snapshot reports it.
type Node struct {
	Data                []byte
	Czxid, Mzxid, Pzxid int64
	Version             int32
	// Cversion is as ZooKeeper reports it: child creates plus child
	// deletes.
	Cversion int32
	// EphemeralOwner is the owning session of an ephemeral node, else 0
	// (containers included, as ZooKeeper reports them).
	EphemeralOwner int64
	Container      bool
	NumChildren    int32
}

// node is a znode of the tree.
type node struct {
	data         []byte
	czxid, mzxid int64
	pzxid        int64
	ctime, mtime int64
	version      int32
	// creates is what ZooKeeper stores as the cversion: the number of
	// children ever created. Sequence numbers come from it; the cversion
	// clients see is 2*creates - children (creates plus deletes).
	creates   int32
	owner     int64 // ephemeral owner, 0 if none
	container bool
	children  map[string]struct{}
}

func (n *node) stat() zk.Stat {
	nc := int32(len(n.children))
	return zk.Stat{
		Czxid:          n.czxid,
		Mzxid:          n.mzxid,
		Ctime:          n.ctime,
		Mtime:          n.mtime,
		Version:        n.version,
		Cversion:       2*n.creates - nc,
		EphemeralOwner: n.owner,
		DataLength:     int32(len(n.data)),
		NumChildren:    nc,
		Pzxid:          n.pzxid,
	}
}

// session is the server's side of a session.
type session struct {
	id         int64
	timeout    time.Duration
	lastHeard  time.Time
	link       *link // the connection it is attached to, nil if none
	passwd     []byte
	ephemerals map[string]struct{}
}

// New returns an empty ensemble: the root with ZooKeeper's own /zookeeper,
// /zookeeper/config and /zookeeper/quota, zxid 0, no session. The seed
// drives its internal choices (session ids, the order of children
// listings); faults come from outside. Create the World inside the
// synctest bubble that uses it, and Close it before the bubble ends.
func New(seed uint64) *World {
	w := &World{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes:    make(map[string]*node),
		sessions: make(map[int64]*session),
		dataW:    make(map[string]map[*link]struct{}),
		childW:   make(map[string]map[*link]struct{}),
		ends:     make(map[*end]struct{}),
		done:     make(chan struct{}),
		kick:     make(chan struct{}, 1),
	}
	// Session ids as a server with myid 1 makes them: the server id in
	// the top byte, a time-like base below.
	w.nextSess = 1<<56 | int64(w.rng.Uint64()>>24)<<8
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		w.nodes[p] = &node{children: map[string]struct{}{}}
		if p != "/" {
			dir, name := parent(p)
			w.nodes[dir].children[name] = struct{}{}
		}
	}
	w.wg.Add(1)
	go w.clock()
	return w
}

// Close stops the server: it closes every connection and refuses new
// ones, and every goroutine of the World has ended when it returns.
// Close the clients first: go-zookeeper reconnects until it is closed.
func (w *World) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.wg.Wait()
		return
	}
	w.closed = true
	close(w.done)
	for e := range w.ends {
		e.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// Restart stops the server for d, keeping its state, as a server
// restarted from its snapshot and log does: every connection is reset,
// dials are refused while it is down, and its sessions live on, each
// with its whole timeout again from the moment it is back.
func (w *World) Restart(d time.Duration) {
	w.mu.Lock()
	if w.closed || w.down {
		w.mu.Unlock()
		return
	}
	w.down = true
	for _, s := range w.sessions {
		if s.link != nil {
			w.closeLink(s.link, closeCut)
		}
	}
	for e := range w.ends {
		e.abort()
	}
	w.mu.Unlock()
	w.after(d, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.down = false
		w.upSince = time.Now()
		w.kickClock()
	})
}

// after runs f after d, in the bubble.
func (w *World) after(d time.Duration, f func()) { time.AfterFunc(d, f) }

func (w *World) kickClock() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Zxid returns the zxid of the last transaction.
func (w *World) Zxid() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.zxid
}

// Snapshot returns a copy of the tree, by path.
func (w *World) Snapshot() map[string]Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]Node, len(w.nodes))
	for p, n := range w.nodes {
		st := n.stat()
		out[p] = Node{
			Data:           slices.Clone(n.data),
			Czxid:          n.czxid,
			Mzxid:          n.mzxid,
			Pzxid:          n.pzxid,
			Version:        n.version,
			Cversion:       st.Cversion,
			EphemeralOwner: n.owner,
			Container:      n.container,
			NumChildren:    st.NumChildren,
		}
	}
	return out
}

// Sessions returns the ids of the live sessions, in order.
func (w *World) Sessions() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.sessions))
	for id := range w.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Expire makes the server expire the session now, as it does when it has
// not heard from the client for the session timeout: the session's
// connection, if any, is closed first (the client learns of the expiry
// when it reconnects), then its ephemeral nodes are deleted in one
// transaction, firing the other sessions' watches. An unknown or already
// ended session is ignored.
func (w *World) Expire(sessionID int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.sessions[sessionID]; s != nil && !w.closed {
		w.endSession(s, true)
	}
}

// clock expires the sessions the server has not heard from for their
// timeout. It sleeps until the earliest deadline; hearing from a client
// only moves deadlines later, and a new session kicks it.
func (w *World) clock() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		now := time.Now()
		var next time.Time
		var due []*session
		for _, s := range w.sessions {
			if w.down {
				break
			}
			d := later(s.lastHeard, w.upSince).Add(s.timeout)
			if !d.After(now) {
				due = append(due, s)
			} else if next.IsZero() || d.Before(next) {
				next = d
			}
		}
		sort.Slice(due, func(i, j int) bool { return due[i].id < due[j].id })
		for _, s := range due {
			w.endSession(s, true)
		}
		w.mu.Unlock()
		var tc <-chan time.Time
		if !next.IsZero() {
			timer.Reset(next.Sub(now))
			tc = timer.C
		}
		select {
		case <-w.done:
			return
		case <-w.kick:
		case <-tc:
		}
		timer.Stop()
	}
}

// newSession starts a session (a createSession transaction). Under mu.
func (w *World) newSession(timeout time.Duration) *session {
	w.zxid++
	w.noteZxid()
	w.nextSess++
	s := &session{
		id:         w.nextSess,
		timeout:    timeout,
		lastHeard:  time.Now(),
		ephemerals: make(map[string]struct{}),
		passwd:     make([]byte, passwdLen),
	}
	for i := range s.passwd {
		s.passwd[i] = byte(w.rng.Uint32())
	}
	w.sessions[s.id] = s
	w.kickClock()
	return s
}

// endSession ends a session in one closeSession transaction: its
// ephemeral nodes are deleted at that zxid, in path order. An expiring
// session's connection is closed first, as the server has given up on
// it; a session closed by its client keeps its connection for the reply.
// Under mu.
func (w *World) endSession(s *session, expired bool) {
	if expired && s.link != nil {
		w.closeLink(s.link, closeEOF)
	}
	delete(w.sessions, s.id)
	t := w.begin()
	paths := make([]string, 0, len(s.ephemerals))
	for p := range s.ephemerals {
		paths = append(paths, p)
	}
	// Children before their parents cannot happen (ephemerals have none),
	// so path order is as good as any; it is deterministic.
	slices.Sort(paths)
	for _, p := range paths {
		if n := w.nodes[p]; n != nil && n.owner == s.id {
			t.remove(p, n)
		}
	}
	s.ephemerals = nil
	t.commit()
}

// A txn is one transaction being applied: its zxid, an undo log for a
// multi that fails, and the watch triggers to fire on commit.
type txn struct {
	w       *World
	zxid    int64
	now     int64 // milliseconds since the epoch
	undo    []func()
	fire    []trigger
	emptied []string // containers that lost a child
}

type trigger struct {
	path  string
	typ   zk.EventType
	child bool // the child watch table, else the data table
}

// begin starts a transaction: every write request takes a zxid, whether
// it succeeds or not, as ZooKeeper logs failed writes too.
func (w *World) begin() *txn {
	w.zxid++
	w.noteZxid()
	return &txn{w: w, zxid: w.zxid, now: time.Now().UnixMilli()}
}

// noteZxid notes when the last zxid was taken, for Lag. Under mu.
func (w *World) noteZxid() {
	now := time.Now()
	if len(w.history) > 0 && now.Sub(w.history[0].at) > maxLag {
		// Keep what a lag of maxLag needs.
		i := 0
		for i < len(w.history)-1 && now.Sub(w.history[i+1].at) > maxLag {
			i++
		}
		w.history = append(w.history[:0], w.history[i:]...)
	}
	w.history = append(w.history, zxidAt{w.zxid, now})
}

// zxidAt is a zxid and when it was taken.
type zxidAt struct {
	zxid int64
	at   time.Time
}

// maxLag bounds how far behind a lagging follower is.
const maxLag = 10 * time.Second

func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo, t.fire, t.emptied = nil, nil, nil
}

// commit fires the watches of the transaction, in order, then deletes
// the containers it left empty, each in a transaction of its own.
func (t *txn) commit() {
	w := t.w
	var deleted map[*link]struct{}
	for _, f := range t.fire {
		switch {
		case !f.child:
			deleted = w.triggerWatch(false, f.path, f.typ, nil)
		case f.typ == zk.EventNodeDeleted:
			// The child watchers of a deleted node that were told by
			// its data watch are not told twice.
			w.triggerWatch(true, f.path, f.typ, deleted)
		default:
			w.triggerWatch(true, f.path, f.typ, nil)
		}
	}
	for len(t.emptied) > 0 {
		p := t.emptied[0]
		t.emptied = t.emptied[1:]
		if n := w.nodes[p]; n != nil && n.container && n.creates > 0 && len(n.children) == 0 {
			// ZooKeeper's container manager deletes it later, in a
			// deleteContainer transaction; here it goes at once.
			c := w.begin()
			c.remove(p, n)
			c.commit()
		}
	}
}

// triggerWatch fires and removes the watches of a table at path, except
// for the connections in skip; it returns the connections told.
func (w *World) triggerWatch(child bool, path string, typ zk.EventType, skip map[*link]struct{}) map[*link]struct{} {
	table := w.dataW
	if child {
		table = w.childW
	}
	set := table[path]
	if len(set) == 0 {
		return nil
	}
	delete(table, path)
	links := make([]*link, 0, len(set))
	for l := range set {
		links = append(links, l)
	}
	slices.SortFunc(links, func(a, b *link) int { return a.id - b.id })
	for _, l := range links {
		if child {
			delete(l.childW, path)
		} else {
			delete(l.dataW, path)
		}
		if _, ok := skip[l]; ok {
			continue
		}
		l.push(typ, path)
	}
	return set
}

// watch registers a data or child watch of connection l at path.
func (w *World) watch(l *link, path string, child bool) {
	if l.closed {
		// The connection ended while its request was applied (a frame
		// cut in the middle, see Truncated): its watches are gone.
		return
	}
	table, own := w.dataW, l.dataW
	if child {
		table, own = w.childW, l.childW
	}
	set := table[path]
	if set == nil {
		set = make(map[*link]struct{})
		table[path] = set
	}
	set[l] = struct{}{}
	own[path] = struct{}{}
}

// create applies a create; it returns the path created.
func (t *txn) create(path string, data []byte, acl []zk.ACL, mode createMode, owner int64, multi bool) (string, error) {
	w := t.w
	if len(acl) == 0 {
		return "", zk.ErrInvalidACL
	}
	if mode.ttl {
		// TTL nodes are off unless the server enables extended types.
		return "", codeErr(errUnimplemented)
	}
	if path == "/" && !mode.sequential {
		return "", zk.ErrNodeExists
	}
	dir, _ := parent(path)
	pn := w.nodes[dir]
	if pn == nil {
		return "", zk.ErrNoNode
	}
	if mode.sequential {
		path += seqSuffix(pn.creates)
	}
	if multi && path != "/" && !validPath(path) {
		return "", zk.ErrBadArguments
	}
	if w.nodes[path] != nil {
		return "", zk.ErrNodeExists
	}
	if pn.owner != 0 {
		return "", zk.ErrNoChildrenForEphemerals
	}
	_, name := parent(path)
	n := &node{
		data:      slices.Clone(data),
		czxid:     t.zxid,
		mzxid:     t.zxid,
		pzxid:     t.zxid,
		ctime:     t.now,
		mtime:     t.now,
		container: mode.container,
		children:  make(map[string]struct{}),
	}
	if mode.ephemeral {
		n.owner = owner
	}
	oldPzxid := pn.pzxid
	var s *session
	if n.owner != 0 {
		s = w.sessions[owner]
		if s == nil {
			return "", zk.ErrSessionExpired
		}
	}
	w.nodes[path] = n
	pn.children[name] = struct{}{}
	pn.creates++
	pn.pzxid = max(pn.pzxid, t.zxid)
	if s != nil {
		s.ephemerals[path] = struct{}{}
	}
	t.undo = append(t.undo, func() {
		delete(w.nodes, path)
		delete(pn.children, name)
		pn.creates--
		pn.pzxid = oldPzxid
		if s != nil {
			delete(s.ephemerals, path)
		}
	})
	t.fire = append(t.fire,
		trigger{path: path, typ: zk.EventNodeCreated},
		trigger{path: dir, typ: zk.EventNodeChildrenChanged, child: true})
	return path, nil
}

// seqSuffix formats a sequence number as ZooKeeper does (%010d).
func seqSuffix(n int32) string {
	const digits = "0123456789"
	if n < 0 {
		// ZooKeeper's %010d of a negative counter, after 2^31 creates.
		s := []byte("-000000000")
		v := -int64(n)
		for i := len(s) - 1; i > 0 && v > 0; i-- {
			s[i] = digits[v%10]
			v /= 10
		}
		return string(s)
	}
	s := []byte("0000000000")
	for i := len(s) - 1; i >= 0 && n > 0; i-- {
		s[i] = digits[n%10]
		n /= 10
	}
	return string(s)
}

// reserved tells whether path is one ZooKeeper does not let clients
// delete: the root and its own /zookeeper tree.
func reserved(path string) bool {
	return path == "/" || path == "/zookeeper" || len(path) > len("/zookeeper/") && path[:len("/zookeeper/")] == "/zookeeper/"
}

// del applies a delete.
func (t *txn) del(path string, version int32) error {
	w := t.w
	if reserved(path) {
		return zk.ErrBadArguments
	}
	n := w.nodes[path]
	if n == nil {
		return zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.ErrBadVersion
	}
	if len(n.children) > 0 {
		return zk.ErrNotEmpty
	}
	t.remove(path, n)
	return nil
}

// remove deletes node n at path, which has no children.
func (t *txn) remove(path string, n *node) {
	w := t.w
	dir, name := parent(path)
	pn := w.nodes[dir]
	oldPzxid := pn.pzxid
	delete(w.nodes, path)
	delete(pn.children, name)
	pn.pzxid = max(pn.pzxid, t.zxid)
	var s *session
	if n.owner != 0 {
		if s = w.sessions[n.owner]; s != nil {
			delete(s.ephemerals, path)
		}
	}
	t.undo = append(t.undo, func() {
		w.nodes[path] = n
		pn.children[name] = struct{}{}
		pn.pzxid = oldPzxid
		if s != nil {
			s.ephemerals[path] = struct{}{}
		}
	})
	t.fire = append(t.fire,
		trigger{path: path, typ: zk.EventNodeDeleted},
		trigger{path: path, typ: zk.EventNodeDeleted, child: true},
		trigger{path: dir, typ: zk.EventNodeChildrenChanged, child: true})
	if pn.container {
		t.emptied = append(t.emptied, dir)
	}
}

// set applies a setData; it returns the node's new stat.
func (t *txn) set(path string, data []byte, version int32) (zk.Stat, error) {
	n := t.w.nodes[path]
	if n == nil {
		return zk.Stat{}, zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.Stat{}, zk.ErrBadVersion
	}
	old := *n
	n.data = slices.Clone(data)
	n.version++
	n.mzxid = t.zxid
	n.mtime = t.now
	t.undo = append(t.undo, func() {
		n.data, n.version, n.mzxid, n.mtime = old.data, old.version, old.mzxid, old.mtime
	})
	t.fire = append(t.fire, trigger{path: path, typ: zk.EventNodeDataChanged})
	return n.stat(), nil
}

// check applies the version check of a multi.
func (t *txn) check(path string, version int32) error {
	n := t.w.nodes[path]
	if n == nil {
		return zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.ErrBadVersion
	}
	return nil
}

// children returns the names of the children of n in the order of this
// server's hash set: an order of its own, which the seed decides.
func (w *World) children(n *node) []string {
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names
}

// How a connection ends, for closeLink.
type closeHow int

const (
	closeBroken closeHow = iota // the client is gone
	closeEOF                    // the server closes: the client reads what was sent, then the end
	closeCut                    // the connection breaks: what was in flight is lost
)

// closeLink ends the server's side of a connection: its watches go, and
// nothing more is sent on it. Under World.mu.
func (w *World) closeLink(l *link, how closeHow) {
	if l.closed {
		return
	}
	for p := range l.dataW {
		if set := w.dataW[p]; set != nil {
			delete(set, l)
			if len(set) == 0 {
				delete(w.dataW, p)
			}
		}
	}
	for p := range l.childW {
		if set := w.childW[p]; set != nil {
			delete(set, l)
			if len(set) == 0 {
				delete(w.childW, p)
			}
		}
	}
	l.dataW, l.childW = nil, nil
	l.closed = true
	if how == closeCut {
		l.conn.abort()
	}
	l.conn.Close()
	if l.s.link == l {
		l.s.link = nil
	}
}

// CreateNode creates a persistent node, as a client's create would, for
// a test's setup.
func (w *World) CreateNode(path string, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.begin()
	_, err := t.create(path, data, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}}, createMode{}, 0, true)
	if err != nil {
		t.rollback()
		return err
	}
	t.commit()
	return nil
}

// lag is a follower that has stopped applying transactions for a while.
type lag struct {
	zxid  int64     // the last it applied
	until time.Time // when it has caught up
}

// Lag makes the server at address a follower that is behind by behind
// (at most maxLag): for d it has applied only the transactions taken
// before then, as a follower with a slow disk or a long pause has. A client
// that reconnects to it having seen a later zxid is refused (the server
// closes the connection without a response, as ZooKeeper does) and goes
// on to another server of its list. The model keeps one tree: a lagging
// follower serves no stale read, it only refuses such reconnects.
func (w *World) Lag(address string, behind, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lags == nil {
		w.lags = make(map[string]lag)
	}
	applied := int64(0)
	cut := time.Now().Add(-min(behind, maxLag))
	for _, h := range w.history {
		if h.at.After(cut) {
			break
		}
		applied = h.zxid
	}
	w.lags[address] = lag{zxid: applied, until: time.Now().Add(d)}
}

// LagRefusals returns how many connect requests the servers refused for
// having seen a zxid the server had not applied.
func (w *World) LagRefusals() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lagRefusals
}

// appliedBy returns the last zxid the server at address has applied.
// Under mu.
func (w *World) appliedBy(address string) int64 {
	if l, ok := w.lags[address]; ok && time.Now().Before(l.until) {
		return l.zxid
	}
	return w.zxid
}
