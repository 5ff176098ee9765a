package simzk

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Timing of the simulated client, go-zookeeper's where it has one.
const (
	// ReconnectDelay is how long a connection attempt takes (dial and
	// handshake) when the server can be reached.
	ReconnectDelay = 10 * time.Millisecond
	// ConnectTimeout is how long an attempt waits for an unreachable
	// server before the next attempt (go-zookeeper's dial timeout).
	ConnectTimeout = time.Second
	// CloseWait bounds how long Close waits for the server's reply to
	// its closeSession request (as go-zookeeper's Close does).
	CloseWait = time.Second
	// ServerName is the Server of the session events.
	ServerName = "simzk:2181"
)

type connState int

const (
	stConnecting connState = iota // no connection: attempting one
	stConnected                   // a connection with a session
	stClosing                     // Close called: waiting for the close reply
	stClosed                      // the loop is done
)

// Conn is a client of the World with go-zookeeper's *zk.Conn methods (the
// ones the lock engine uses, with the same signatures and meaning) and
// with hooks for the faults and the wire tap. Its calls may be made from
// any goroutine; one session's requests are written, and answered, in
// the order the calls were made.
//
// Each Conn runs one goroutine, its loop, which plays go-zookeeper's send
// and receive loops: it writes the requests, pings the server, reads the
// server's replies and watch events in order, gives the connection up
// after the receive timeout (2/3 of the session timeout) without a
// message, and reconnects. Callbacks (onEvent, OnReply, OnWritten) run on
// the loop: they must not block, nor call the Conn or its World.
type Conn struct {
	w            *World
	timeout      time.Duration
	recvTimeout  time.Duration
	pingInterval time.Duration
	onEvent      func(zk.Event)

	slow      atomic.Int64 // SlowReplies, a time.Duration
	sessionID atomic.Int64
	wake      chan struct{}
	exited    chan struct{} // closed when the loop has ended

	mu        sync.Mutex
	outq      []*call // calls not yet written: the loop writes them in order
	closing   bool    // no more calls: Close was called or the World closed
	closeReq  bool
	dropConn  bool
	loseNext  bool
	dropNext  bool
	partEnd   time.Time
	onReply   func(op, path string, zxid int64, written time.Time, err error)
	onWritten func(op, path string)

	// The loop's own.
	state        connState
	link         *link
	lastZxid     int64
	watchers     map[watchKey][]chan zk.Event
	creds        []cred
	attemptStart time.Time
	attemptAt    time.Time
	closeBy      time.Time
}

type cred struct {
	scheme string
	auth   []byte
}

// A call is one request, from the call that makes it to its reply.
type call struct {
	op, path string
	user     bool // made by a caller (faults apply), not by the client itself
	noZxid   bool // the reply's zxid is not the client's last zxid (pings)
	isClose  bool
	exec     func(w *World, l *link) reply // the server's work, under World.mu
	recv     func(rep *reply)              // on the loop, before the caller has the reply
	done     chan reply
	written  time.Time
	lose     bool // its reply is to be lost (held during a partition)
	finished bool // the caller has its result
}

// reply is the server's answer to a request.
type reply struct {
	zxid       int64
	err        error
	data       []byte
	stat       zk.Stat
	children   []string
	path       string
	multi      []zk.MultiResponse
	closeAfter bool // the server closes the connection after this reply
}

type watchKind int

const (
	watchData  watchKind = iota // GetW, ExistsW of a node that exists
	watchExist                  // ExistsW of a node that does not
	watchChild                  // ChildrenW
)

type watchKey struct {
	path string
	kind watchKind
}

// Connect connects a new client to the World: it returns with a new
// session, connected, having sent onEvent StateConnecting,
// StateConnected and StateHasSession. onEvent (may be nil) gets what
// go-zookeeper's event callback gets: the session state changes
// (EventSession), the watch events and the EventNotWatching events; it is
// called from the model's goroutines and must not block.
func (w *World) Connect(sessionTimeout time.Duration, onEvent func(zk.Event)) *Conn {
	if sessionTimeout <= 0 {
		panic("simzk: session timeout must be positive")
	}
	c := &Conn{
		w:           w,
		timeout:     sessionTimeout,
		recvTimeout: sessionTimeout * 2 / 3,
		onEvent:     onEvent,
		wake:        make(chan struct{}, 1),
		exited:      make(chan struct{}),
		watchers:    make(map[watchKey][]chan zk.Event),
	}
	c.pingInterval = max(c.recvTimeout/2, time.Millisecond)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.closing = true
		c.state = stClosed
		close(c.exited)
		return c
	}
	w.wg.Add(1)
	w.mu.Unlock()
	now := time.Now()
	c.startAttempt(now)
	c.handshake(now)
	go c.run()
	return c
}

// poke wakes the loop.
func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// SessionID returns the id of the client's session, as go-zookeeper's
// does: 0 before the first session and from the moment an expiry is
// learnt until the next session; while disconnected, the session the
// client will try to resume.
func (c *Conn) SessionID() int64 { return c.sessionID.Load() }

// OnReply sets the function called, on the loop, for each reply the client
// reads, before the caller has it: op is go-zookeeper's name of the
// request ("create", "createContainer", "delete", "setData", "getData",
// "getChildren2", "exists", "multi", "setAuth", "setWatches", "close",
// "ping", and "connect" for a handshake), path the request's path (for a
// create that succeeded, the path created, sequence number included; ""
// for requests without one), zxid the zxid of the reply (for a write the
// transaction's, so a create's is the new node's czxid; 0 for
// "connect"), written when the request was written, err the request's
// error as go-zookeeper gives it (a failed multi's: its failed
// operation's).
func (c *Conn) OnReply(fn func(op string, path string, zxid int64, written time.Time, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onReply = fn
}

// OnWritten sets the function called, on the loop, when a request leaves
// the client, before the server can apply it (op as for OnReply, path the
// request's).
func (c *Conn) OnWritten(fn func(op, path string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onWritten = fn
}

// LoseNextReply makes the server apply the next request written by a
// caller but the connection break before its reply: the call fails with
// zk.ErrConnectionClosed and the client reconnects.
func (c *Conn) LoseNextReply() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseNext = true
}

// DropNextRequest makes the connection break as the next request written
// by a caller leaves the client: the server never sees it, the call fails
// with zk.ErrConnectionClosed and the client reconnects.
func (c *Conn) DropNextRequest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropNext = true
}

// DropConnection breaks the connection now: every call written and not
// answered fails with zk.ErrConnectionClosed, the client sends
// StateDisconnected and reconnects after ReconnectDelay, to its session
// (StateHasSession) if the server still has it, else it learns the
// session expired (StateExpired, EventNotWatching with
// zk.ErrSessionExpired to every watcher) and starts a new one. Nothing
// happens while the client is not connected.
func (c *Conn) DropConnection() {
	c.mu.Lock()
	c.dropConn = true
	c.mu.Unlock()
	c.poke()
}

// Partition cuts the client off from the server for d: nothing passes
// either way (requests written meanwhile wait in the network, calls
// block). The client gives the connection up once it has read nothing
// for its receive timeout, 2/3 of the session timeout (calls fail with
// zk.ErrConnectionClosed), and its attempts to reconnect fail while the
// partition lasts; the server expires the session once it has heard
// nothing for the session timeout. If the partition ends before the
// client gives up, what waited in the network goes through, in order. A
// partition already under way is extended if this one ends later.
func (c *Conn) Partition(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	if end := time.Now().Add(d); end.After(c.partEnd) {
		c.partEnd = end
	}
	c.mu.Unlock()
	c.poke()
}

// SlowReplies makes every message from the server sent from now on
// (replies, watch events, replies to pings) reach the client d late,
// still in order; 0 restores prompt delivery. A client that reads
// nothing for its receive timeout gives the connection up.
func (c *Conn) SlowReplies(d time.Duration) {
	c.slow.Store(int64(max(d, 0)))
}

// Close ends the session, as go-zookeeper's Close does: the calls not
// answered fail with zk.ErrConnectionClosed at once; if connected, the
// client sends closeSession (the server deletes the session's ephemeral
// nodes, firing watches) and waits for its reply, at most CloseWait, as
// it does when it is not connected; then it sends StateDisconnected and
// EventNotWatching with zk.ErrClosing to every watcher. Later calls fail
// with zk.ErrConnectionClosed. It must not be called from a callback.
func (c *Conn) Close() {
	c.mu.Lock()
	c.closeReq = true
	c.mu.Unlock()
	c.poke()
	<-c.exited
}

// do makes a call and waits for its result.
func (c *Conn) do(cl *call) reply {
	cl.user = true
	cl.done = make(chan reply, 1)
	c.mu.Lock()
	if c.closing || c.closeReq {
		c.mu.Unlock()
		return reply{err: zk.ErrConnectionClosed}
	}
	c.outq = append(c.outq, cl)
	c.mu.Unlock()
	c.poke()
	return <-cl.done
}

// finish gives a call's result to its caller, once.
func (c *Conn) finish(cl *call, rep reply) {
	if cl.finished {
		return
	}
	cl.finished = true
	if cl.done != nil {
		cl.done <- rep
	}
}

// emit sends a session state event.
func (c *Conn) emit(state zk.State) {
	c.event(zk.Event{Type: zk.EventSession, State: state, Server: ServerName})
}

func (c *Conn) event(ev zk.Event) {
	if c.onEvent != nil {
		c.onEvent(ev)
	}
}

// addWatcher registers a watcher on the client, as go-zookeeper does once
// the server has answered a request that sets a watch.
func (c *Conn) addWatcher(path string, kind watchKind) <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	k := watchKey{path, kind}
	c.watchers[k] = append(c.watchers[k], ch)
	return ch
}

// notifyWatches delivers a watch event to the client's watchers of its
// path, as go-zookeeper does: a created node to the exist watchers, a
// data change to the data and exist watchers, a children change to the
// child watchers, a deleted node to all.
func (c *Conn) notifyWatches(ev zk.Event) {
	var kinds []watchKind
	switch ev.Type {
	case zk.EventNodeCreated:
		kinds = []watchKind{watchExist}
	case zk.EventNodeDataChanged:
		kinds = []watchKind{watchExist, watchData}
	case zk.EventNodeChildrenChanged:
		kinds = []watchKind{watchChild}
	case zk.EventNodeDeleted:
		kinds = []watchKind{watchExist, watchData, watchChild}
	}
	for _, kind := range kinds {
		k := watchKey{ev.Path, kind}
		for _, ch := range c.watchers[k] {
			ch <- ev
			close(ch)
		}
		delete(c.watchers, k)
	}
}

// invalidateWatches ends every watcher with an EventNotWatching carrying
// err, also sent to onEvent, as go-zookeeper does (in path order here).
func (c *Conn) invalidateWatches(err error) {
	keys := make([]watchKey, 0, len(c.watchers))
	for k := range c.watchers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b watchKey) int {
		if a.path != b.path {
			if a.path < b.path {
				return -1
			}
			return 1
		}
		return int(a.kind) - int(b.kind)
	})
	for _, k := range keys {
		ev := zk.Event{Type: zk.EventNotWatching, State: zk.StateDisconnected, Path: k.path, Err: err}
		c.event(ev)
		for _, ch := range c.watchers[k] {
			ch <- ev
			close(ch)
		}
	}
	clear(c.watchers)
}

// run is the loop.
func (c *Conn) run() {
	defer c.w.wg.Done()
	defer close(c.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next, done := c.step()
		if done {
			return
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			d := time.Until(next)
			if d <= 0 {
				continue // more is due now
			}
			timer.Reset(d)
			tc = timer.C
		}
		select {
		case <-c.wake:
		case <-tc:
		case <-c.w.done:
		}
		timer.Stop()
	}
}

// step does what is due now; it returns when next to look again (zero:
// when woken), and whether the loop is over.
func (c *Conn) step() (next time.Time, done bool) {
	now := time.Now()
	select {
	case <-c.w.done:
		c.shutdown()
		return time.Time{}, true
	default:
	}
	c.mu.Lock()
	closeReq := c.closeReq && c.state != stClosing
	drop := c.dropConn
	c.dropConn = false
	partEnd := c.partEnd
	c.mu.Unlock()
	partitioned := now.Before(partEnd)

	if closeReq {
		c.beginClose(now, partitioned)
	}
	if drop && c.link != nil {
		c.linkDown(now)
	}
	if c.state == stClosed {
		return time.Time{}, true
	}
	l := c.link
	if l == nil {
		if c.state == stClosing {
			if !now.Before(c.closeBy) {
				c.finishClose()
				return time.Time{}, true
			}
			return c.closeBy, false
		}
		return c.connecting(now, partEnd), false
	}

	// The partition is over: what waited in the network reaches the
	// server.
	if !partitioned && len(l.held) > 0 {
		held := l.held
		l.held = nil
		c.w.mu.Lock()
		for _, cl := range held {
			c.w.serve(l, cl, cl.lose)
		}
		c.w.mu.Unlock()
	}
	if c.state == stConnected {
		c.writeQueued(now, partitioned)
	}
	// Read what has arrived.
	for c.link == l && !partitioned {
		c.w.mu.Lock()
		if len(l.inbox) == 0 || l.inbox[0].due.After(now) {
			c.w.mu.Unlock()
			break
		}
		m := l.inbox[0]
		l.inbox[0] = message{}
		l.inbox = l.inbox[1:]
		c.w.mu.Unlock()
		c.deliver(l, m, now)
	}
	if c.link != l || c.state == stClosed {
		return now, c.state == stClosed
	}
	if c.state == stClosing && !now.Before(c.closeBy) {
		c.finishClose()
		return time.Time{}, true
	}
	if c.state == stConnected && !now.Before(l.nextPing) {
		l.nextPing = now.Add(c.pingInterval)
		c.write(c.pingCall(), now, partitioned)
		if c.link != l {
			return now, false
		}
	}
	if !now.Before(l.lastRecv.Add(c.recvTimeout)) {
		c.linkDown(now)
		return now, c.state == stClosed
	}

	next = l.lastRecv.Add(c.recvTimeout)
	if c.state == stConnected {
		next = earliest(next, l.nextPing)
	} else {
		next = earliest(next, c.closeBy)
	}
	c.w.mu.Lock()
	if len(l.inbox) > 0 {
		due := l.inbox[0].due
		if partitioned {
			due = partEnd
		}
		next = earliest(next, due)
	}
	c.w.mu.Unlock()
	if partitioned && len(l.held) > 0 {
		next = earliest(next, partEnd)
	}
	return next, false
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// writeQueued writes the calls made so far, in order.
func (c *Conn) writeQueued(now time.Time, partitioned bool) {
	for c.link != nil {
		c.mu.Lock()
		if len(c.outq) == 0 {
			c.mu.Unlock()
			return
		}
		cl := c.outq[0]
		c.outq[0] = nil
		c.outq = c.outq[1:]
		c.mu.Unlock()
		c.write(cl, now, partitioned)
	}
}

// write sends a request on the connection.
func (c *Conn) write(cl *call, now time.Time, partitioned bool) {
	l := c.link
	cl.written = now
	l.pending = append(l.pending, cl)
	c.mu.Lock()
	fn := c.onWritten
	var lose, drop bool
	if cl.user {
		switch {
		case c.dropNext:
			drop, c.dropNext = true, false
		case c.loseNext:
			lose, c.loseNext = true, false
		}
	}
	c.mu.Unlock()
	if fn != nil {
		fn(cl.op, cl.path)
	}
	switch {
	case drop:
		c.linkDown(now)
	case partitioned:
		cl.lose = lose
		l.held = append(l.held, cl)
	default:
		c.w.mu.Lock()
		c.w.serve(l, cl, lose)
		c.w.mu.Unlock()
	}
}

// deliver reads one message from the server.
func (c *Conn) deliver(l *link, m message, now time.Time) {
	l.lastRecv = now
	switch m.kind {
	case msgEOF, msgCut:
		c.linkDown(now)
	case msgEvent:
		c.event(m.ev)
		c.notifyWatches(m.ev)
	case msgReply:
		cl := m.call
		if i := slices.Index(l.pending, cl); i >= 0 {
			l.pending = slices.Delete(l.pending, i, i+1)
		}
		if m.rep.zxid > 0 && !cl.noZxid {
			c.lastZxid = m.rep.zxid
		}
		c.mu.Lock()
		fn := c.onReply
		c.mu.Unlock()
		if fn != nil {
			path := cl.path
			if m.rep.path != "" {
				path = m.rep.path // a create's: the path created
			}
			fn(cl.op, path, m.rep.zxid, cl.written, m.rep.err)
		}
		if cl.recv != nil {
			cl.recv(&m.rep)
		}
		c.finish(cl, m.rep)
		if cl.isClose {
			c.finishClose()
		}
	}
}

// startAttempt starts an attempt to connect.
func (c *Conn) startAttempt(now time.Time) {
	c.state = stConnecting
	c.attemptStart = now
	c.attemptAt = now.Add(ReconnectDelay)
	c.emit(zk.StateConnecting)
}

// connecting goes on with an attempt to connect; it returns when to look
// again.
func (c *Conn) connecting(now, partEnd time.Time) time.Time {
	if now.Before(c.attemptAt) {
		return c.attemptAt
	}
	if now.Before(partEnd) {
		// The server cannot be reached: the attempt succeeds if the
		// partition ends before the dial times out, else the next one
		// starts.
		failAt := c.attemptStart.Add(ConnectTimeout)
		if !now.Before(failAt) {
			c.startAttempt(now)
			return c.attemptAt
		}
		return earliest(failAt, partEnd)
	}
	c.handshake(now)
	return now
}

// handshake connects: the server resumes the client's session, or gives
// it a new one if it has none, or tells it its session has expired.
func (c *Conn) handshake(now time.Time) {
	c.emit(zk.StateConnected)
	c.mu.Lock()
	written, replied := c.onWritten, c.onReply
	c.mu.Unlock()
	if written != nil {
		written("connect", "")
	}
	c.w.mu.Lock()
	l := c.w.attach(c, c.sessionID.Load(), c.timeout)
	c.w.mu.Unlock()
	if l == nil {
		if replied != nil {
			replied("connect", "", 0, now, zk.ErrSessionExpired)
		}
		// go-zookeeper: the session is gone; every watcher is told;
		// the next attempt asks for a new session. Calls not yet
		// written are written there.
		c.sessionID.Store(0)
		c.lastZxid = 0
		c.emit(zk.StateExpired)
		c.invalidateWatches(zk.ErrSessionExpired)
		c.emit(zk.StateDisconnected)
		c.startAttempt(now)
		return
	}
	if replied != nil {
		replied("connect", "", 0, now, nil)
	}
	c.link = l
	l.lastRecv = now
	l.nextPing = now.Add(c.pingInterval)
	c.sessionID.Store(l.s.id)
	c.state = stConnected
	c.emit(zk.StateHasSession)
	// As go-zookeeper: the credentials first, then the calls queued
	// meanwhile, then the watches to set again.
	for _, cr := range c.creds {
		c.write(c.authCall(cr, false), now, false)
	}
	c.writeQueued(now, false)
	if c.link == l && len(c.watchers) > 0 {
		c.write(c.setWatchesCall(), now, false)
	}
}

// linkDown gives the connection up: the calls written and not answered
// fail, and the client reconnects (or, closing, is done).
func (c *Conn) linkDown(now time.Time) {
	l := c.link
	c.w.mu.Lock()
	c.w.closeLink(l, closeBroken)
	c.w.mu.Unlock()
	c.link = nil
	if c.state == stClosing {
		c.failCalls(l, zk.ErrClosing)
		c.finishClose()
		return
	}
	c.emit(zk.StateDisconnected)
	c.failCalls(l, zk.ErrConnectionClosed)
	c.startAttempt(now)
}

func (c *Conn) failCalls(l *link, err error) {
	for _, cl := range l.pending {
		c.finish(cl, reply{err: err})
	}
	for _, cl := range l.held {
		c.finish(cl, reply{err: err})
	}
	l.pending, l.held = nil, nil
}

// beginClose starts closing the session.
func (c *Conn) beginClose(now time.Time, partitioned bool) {
	c.mu.Lock()
	c.closing = true
	q := c.outq
	c.outq = nil
	c.mu.Unlock()
	for _, cl := range q {
		c.finish(cl, reply{err: zk.ErrConnectionClosed})
	}
	c.state = stClosing
	c.closeBy = now.Add(CloseWait)
	if l := c.link; l != nil {
		for _, cl := range l.pending {
			c.finish(cl, reply{err: zk.ErrConnectionClosed})
		}
		for _, cl := range l.held {
			c.finish(cl, reply{err: zk.ErrConnectionClosed})
		}
		c.write(&call{op: "close", isClose: true, exec: func(w *World, l *link) reply {
			w.endSession(l.s, false)
			return reply{zxid: w.zxid, closeAfter: true}
		}}, now, partitioned)
	}
}

// finishClose ends the client.
func (c *Conn) finishClose() {
	if l := c.link; l != nil {
		c.w.mu.Lock()
		c.w.closeLink(l, closeBroken)
		c.w.mu.Unlock()
		c.failCalls(l, zk.ErrClosing)
		c.link = nil
	}
	c.emit(zk.StateDisconnected)
	c.invalidateWatches(zk.ErrClosing)
	c.state = stClosed
}

// shutdown ends the client as its World closes.
func (c *Conn) shutdown() {
	c.mu.Lock()
	c.closing = true
	q := c.outq
	c.outq = nil
	c.mu.Unlock()
	for _, cl := range q {
		c.finish(cl, reply{err: zk.ErrConnectionClosed})
	}
	if l := c.link; l != nil {
		c.failCalls(l, zk.ErrConnectionClosed)
		c.link = nil
	}
	if c.state != stClosed {
		c.emit(zk.StateDisconnected)
		c.invalidateWatches(zk.ErrClosing)
	}
	c.state = stClosed
}
