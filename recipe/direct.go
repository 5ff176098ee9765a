package recipe

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// Direct requests. go-zookeeper's requests block until their reply, so a
// caller whose context can end hands each one to a worker (workers.go) and
// waits for the worker or its context: two goroutine switches per request
// on top of go-zookeeper's own two. The requests of every acquire and
// hand-off (the create of a single node and the reads sent behind it, in
// one write; the listing a waiter makes when the node it waits on goes;
// the delete that releases) are instead written on the connection by the
// caller itself, and their replies are taken by the wire tap as
// go-zookeeper reads them and handed straight to the caller (a create's
// zxid, the fencing token, with its reply):
//
//   - a direct request gets an xid 2^30 away from the last one go-zookeeper
//     wrote, which go-zookeeper reaches only after a billion requests more,
//     and is written as one whole frame between go-zookeeper's frames (the
//     connection takes writes in turn: the caller waits for its turn, or
//     for its context);
//   - go-zookeeper reads the reply like any other: it notes its zxid as the
//     last it has seen (so a reconnect never goes back in time past it),
//     finds no request of its own with that xid and goes on; the tap has
//     already handed the reply's error code and body to the caller;
//   - a caller whose context ends stops waiting at once, and the reply is
//     dropped when it comes;
//   - when the connection fails or closes, it takes no more direct
//     requests, and every one waiting on it fails with
//     zk.ErrConnectionClosed once go-zookeeper has stopped sending on it
//     and closed it, with go-zookeeper's own; the caller's retry policy
//     takes over, and a retry made at once waits in go-zookeeper for the
//     next connection;
//   - until the connection is set up (its connect response read, naming a
//     live session, and every credential go-zookeeper sends again first
//     accepted), once it has failed, on a connection whose session was
//     answered as expired (which go-zookeeper leaves without closing it:
//     trackedConn.closeAbandoned closes it), and for good once the wire
//     broke an assumption (see wireTap) or by option (WithDirectRequests),
//     requests go through go-zookeeper as before.
//
// The frames are plain create (ephemeral sequential, with the client's
// ACL), getData, getChildren and delete requests; go-zookeeper's own frames
// are not altered. Watches are still set through go-zookeeper, which keeps
// them across reconnects.

const (
	opDelete      = 2
	opGetData     = 4
	opGetChildren = 8

	directXidGap = 1 << 30
	xidMask      = 0x7fffffff
)

// directCall is a direct request waiting for its reply: done is closed
// once body and err are set (the reply's body, or the error its header
// carried or the connection's failure).
type directCall struct {
	done chan struct{}
	zxid int64 // the reply's
	body []byte
	err  error

	t   *trackedConn
	xid int32
}

// wait waits for the reply or for ctx; a caller that stops waiting drops
// the request, whose reply is then ignored.
func (d *directCall) wait(ctx context.Context) ([]byte, error) {
	select {
	case <-d.done:
		return d.body, d.err
	case <-ctx.Done():
		d.t.tap.forget(d)
		return nil, ctx.Err()
	}
}

// children is the listing an answered getChildren request brought, or its
// error.
func (d *directCall) children() ([]string, error) {
	if d.err != nil {
		return nil, d.err
	}
	return parseChildren(d.body)
}

// path is the path an answered create request returned, or its error.
func (d *directCall) path() (string, error) {
	if d.err != nil {
		return "", d.err
	}
	n, ok := juteLen(d.body)
	if !ok || n < 0 {
		return "", errMalformedReply
	}
	return string(d.body[4 : 4+n]), nil
}

// data is the data an answered getData request returned, or its error.
func (d *directCall) data() ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	n, ok := juteLen(d.body)
	switch {
	case !ok:
		return nil, errMalformedReply
	case n < 0:
		return nil, nil
	}
	return d.body[4 : 4+n], nil
}

// errDirectRefused is writeDirect's error when the connection stopped
// taking direct requests before the caller's turn came: nothing was
// written, and the caller asks go-zookeeper instead.
var errDirectRefused = errors.New("recipe: the connection takes no direct request")

// errMalformedReply is the error of a direct reply whose body does not
// parse.
var errMalformedReply = errors.New("recipe: malformed reply from the server")

// directChildren lists dir with a direct request. ok is false when no
// connection can take one now: the caller asks go-zookeeper instead.
func (c *Client) directChildren(ctx context.Context, dir string) (names []string, ok bool, err error) {
	calls, ok, err := c.sendDirect(ctx, directReq{opGetChildren, dir, noWatch})
	if !ok || err != nil {
		return nil, ok, err
	}
	if _, err := calls[0].wait(ctx); err != nil {
		return nil, true, c.mapClosed(err)
	}
	names, err = calls[0].children()
	return names, true, err
}

// directDelete deletes path, whatever its version, with a direct request;
// ok as for directChildren.
func (c *Client) directDelete(ctx context.Context, path string) (ok bool, err error) {
	calls, ok, err := c.sendDirect(ctx, directReq{opDelete, path, anyVersion})
	if !ok || err != nil {
		return ok, err
	}
	_, err = calls[0].wait(ctx)
	return true, c.mapClosed(err)
}

// What follows the path in a getChildren or getData request (the watch
// flag) and in a delete (the version).
var (
	noWatch    = []byte{0}
	anyVersion = []byte{0xff, 0xff, 0xff, 0xff} // -1
)

// directCreate is createThenRead with direct requests: the create and,
// with req.behind, the reads of the queue go out in one write, so the
// server, which answers a session's requests in order, reads after it
// created the node. The create's zxid comes with its reply. ok is false
// when the connection takes no direct request now.
func (c *Client) directCreate(ctx context.Context, req createRequest) (res createResult, ok bool, err error) {
	reqs := make([]directReq, 1, 3)
	reqs[0] = directReq{opCreate, req.paths[0], c.createTail(req.data)}
	if req.behind {
		reqs = append(reqs, directReq{opGetChildren, req.dir, noWatch})
		if req.readDir {
			reqs = append(reqs, directReq{opGetData, req.dir, noWatch})
		}
	}
	calls, ok, err := c.sendDirect(ctx, reqs...)
	if !ok || err != nil {
		return createResult{}, ok, err
	}
	if req.behind {
		c.stats.lists.Add(1)
		if req.readDir {
			c.stats.reads.Add(1)
		}
	}
	create, reads := calls[0], calls[1:]
	select {
	case <-create.done:
	case <-ctx.Done():
		// The create stays expected: its reply, or the end of the
		// connection, closes done, and cleanup may then look for the node.
		create.t.tap.forget(reads...)
		return createResult{inflight: create.done}, true, ctx.Err()
	}
	path, err := create.path()
	if errors.Is(err, errMalformedReply) {
		// The node's name is unknown: the outcome is, as after a lost reply.
		create.t.fail()
		err = fmt.Errorf("%w: %w", zk.ErrConnectionClosed, err)
	}
	if err != nil {
		create.t.tap.forget(reads...)
		return createResult{}, true, c.mapClosed(err)
	}
	res = createResult{nodes: []string{path}, zxids: []int64{create.zxid}}
	for _, r := range reads {
		select {
		case <-r.done:
		case <-ctx.Done():
			create.t.tap.forget(reads...)
			return res, true, nil // the caller reads again, or gives up
		}
	}
	if len(reads) > 0 {
		q := &queueRead{}
		q.names, q.errL = reads[0].children()
		q.errL = c.mapClosed(q.errL)
		if len(reads) > 1 {
			q.dirData, q.errD = reads[1].data()
			q.errD = c.mapClosed(q.errD)
		}
		res.read = q
	}
	return res, true, nil
}

// createTail is what follows the path in the request that creates an
// ephemeral sequential node holding data, with the client's ACL.
func (c *Client) createTail(data []byte) []byte {
	n := 4 + len(data) + 4 + 4
	for _, a := range c.cfg.acl {
		n += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
	}
	b := make([]byte, 0, n)
	if data == nil {
		data = []byte{} // an empty buffer, not a null one
	}
	b = jute.AppendBuffer(b, data)
	b = jute.AppendInt32(b, int32(len(c.cfg.acl)))
	for _, a := range c.cfg.acl {
		b = jute.AppendInt32(b, a.Perms)
		b = jute.AppendString(b, a.Scheme)
		b = jute.AppendString(b, a.ID)
	}
	return jute.AppendInt32(b, ephemeralSequential)
}

// directReq is one request of a direct write: its opcode, its path and
// what follows the path.
type directReq struct {
	op   int32
	path string
	tail []byte
}

// size is the length of the request's frame after its length field: xid,
// opcode, path (a jute string) and tail.
func (r directReq) size() int { return 4 + 4 + 4 + len(r.path) + len(r.tail) }

// sendDirect writes reqs on the client's connection, in order and in one
// write, and returns their calls in the same order. ok is false when no
// connection can take direct requests now; err is ctx's, if it has ended.
// When the write fails, the calls fail with the connection.
func (c *Client) sendDirect(ctx context.Context, reqs ...directReq) (calls []*directCall, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	t := c.liveConn.Load()
	if t == nil || c.directOff.Load() {
		return nil, false, nil
	}
	calls = make([]*directCall, len(reqs))
	size := 0
	for i, r := range reqs {
		call, ok := t.tap.expectReply()
		if !ok {
			t.tap.forget(calls[:i]...)
			return nil, false, nil
		}
		call.t = t
		calls[i] = call
		size += 4 + r.size()
	}
	frames := make([]byte, 0, size)
	for i, r := range reqs {
		frames = jute.AppendRequest(frames, jute.RequestHeader{Xid: calls[i].xid, Op: r.op}, r.path, r.tail)
	}
	if err := t.writeDirect(ctx, frames); err != nil {
		t.tap.forget(calls...)
		if err == errDirectRefused {
			return nil, false, nil
		}
		return nil, true, err
	}
	c.stats.direct.Add(int64(len(reqs)))
	return calls, true, nil
}

// writeDirect writes the whole frames of direct requests, in turn with
// go-zookeeper's frames and other callers' direct ones; it returns ctx's
// error if ctx ends before its turn comes. A turn lasts one write, which
// can only block while the server reads nothing, and then go-zookeeper's
// read deadline fails the connection, which Read closes, ending the write.
// (A request that went through go-zookeeper whenever another writer had
// the connection ended up, with hundreds of callers on one connection, in
// the workers' backlog behind maxWorkers requests in flight: a tail of
// cycles twice as long as the rest.) A failed write may have left half a
// frame: the connection fails (see fail), and the requests with it.
func (t *trackedConn) writeDirect(ctx context.Context, frames []byte) error {
	select {
	case t.wturn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.wturn }()
	for f := frames; len(f) >= 4; {
		n, _ := jute.FrameLen(f)
		n += 4
		t.tap.noteDirectWrite(f[:n])
		f = f[n:]
	}
	if _, err := t.Conn.Write(frames); err != nil {
		t.fail()
	}
	return nil
}

// fail ends a connection whose read or write failed, as go-zookeeper does
// once it sees the error: it takes no more direct requests, and a direct
// write blocked on it ends. The direct requests waiting on it fail when
// go-zookeeper closes it (Close), once its send loop has stopped: a caller
// that retries at once then goes through go-zookeeper, whose request waits
// for the next connection, rather than into the send loop of the one that
// failed.
func (t *trackedConn) fail() {
	t.tap.refuseDirect()
	t.Conn.Close()
}

// Write writes one of go-zookeeper's frames, in turn with direct requests.
func (t *trackedConn) Write(p []byte) (int, error) {
	if t.c != nil && t.c.splitWrites.Load() && len(p) > 8 {
		// A test's go-zookeeper that writes a frame in two.
		n, err := t.write(p[:len(p)/2])
		if err != nil {
			return n, err
		}
		m, err := t.write(p[len(p)/2:])
		return n + m, err
	}
	return t.write(p)
}

// write writes p, in turn with direct requests. A write that fails ends
// the connection (see fail) and is reported to
// go-zookeeper as done: the read that then fails makes go-zookeeper fail
// every request on the connection, once. Told of the error, go-zookeeper
// v1.0.4 would answer the request with it and, once the connection is
// down, answer it again with the others; its one-slot answer channel then
// blocks its connection loop for good if the caller has not taken the
// first answer yet, and the client never reconnects.
func (t *trackedConn) write(p []byte) (int, error) {
	t.wturn <- struct{}{}
	defer func() { <-t.wturn }()
	t.tap.noteWrite(p)
	if _, err := t.Conn.Write(p); err != nil {
		t.fail()
	}
	return len(p), nil
}

// Close fails the direct requests waiting on the connection and closes it.
// go-zookeeper closes its connection once its send loop has stopped.
func (t *trackedConn) Close() error {
	t.tap.failDirect()
	return t.Conn.Close()
}

// expectReply registers a direct request and returns it with its xid set;
// ok is false when the connection cannot take one: before its connect
// response was read, when that response said the session expired, after
// the connection failed or broke an assumption (see wireTap), and while
// go-zookeeper has not yet had every credential it sends again on a new
// connection answered (setAuth requests, before anything else).
func (w *wireTap) expectReply() (call *directCall, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.takesDirectLocked() {
		return nil, false
	}
	if w.direct == nil {
		w.direct = make(map[int32]*directCall)
	}
	call = &directCall{done: make(chan struct{})}
	for {
		w.directSeq++
		call.xid = int32((uint32(w.lastXid) + directXidGap + w.directSeq%(1<<28)) & xidMask)
		if _, taken := w.direct[call.xid]; !taken {
			break
		}
	}
	w.direct[call.xid] = call
	return call, true
}

// takesDirectLocked reports whether the connection takes direct requests
// now (see expectReply). It must be called with w.mu held.
func (w *wireTap) takesDirectLocked() bool {
	return w.connected && !w.dead && !w.broken && (w.creds == nil || w.authOK >= w.creds.Load())
}

// takesDirect reports whether the connection takes direct requests now.
func (w *wireTap) takesDirect() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.takesDirectLocked()
}

// lastWritten returns the last xid go-zookeeper wrote on the connection.
func (w *wireTap) lastWritten() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastXid
}

// forget drops direct requests whose caller stopped waiting.
func (w *wireTap) forget(calls ...*directCall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, call := range calls {
		delete(w.direct, call.xid)
	}
}

// answer hands the reply to the direct request xid, with the reply's zxid,
// to its caller, if it still waits. It must be called with w.mu held.
func (w *wireTap) answer(xid int32, zxid int64, body []byte, err error) {
	if call, ok := w.direct[xid]; ok {
		delete(w.direct, xid)
		call.zxid, call.body, call.err = zxid, body, err
		close(call.done)
	}
}

// refuseDirect makes the connection take no more direct requests.
func (w *wireTap) refuseDirect() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
}

// failDirect fails every direct request waiting on the connection, which
// takes no more.
func (w *wireTap) failDirect() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	w.releaseLocked(math.MaxInt64) // the replies that came stand
	for xid := range w.direct {
		w.answer(xid, 0, nil, zk.ErrConnectionClosed)
	}
}

// isDirect reports whether xid is of the range direct requests use now:
// go-zookeeper reports their replies as replies to unknown requests.
func (w *wireTap) isDirect(xid int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := uint32(xid-w.lastXid) & xidMask
	return d >= directXidGap/2 && d < directXidGap*3/2
}

// replyError is the error of a reply header's code, as go-zookeeper maps
// it.
func replyError(code int32) error {
	switch code {
	case 0:
		return nil
	case -100:
		return zk.ErrAPIError
	case -101:
		return zk.ErrNoNode
	case -102:
		return zk.ErrNoAuth
	case -103:
		return zk.ErrBadVersion
	case -108:
		return zk.ErrNoChildrenForEphemerals
	case -110:
		return zk.ErrNodeExists
	case -111:
		return zk.ErrNotEmpty
	case -112:
		return zk.ErrSessionExpired
	case -114:
		return zk.ErrInvalidACL
	case -115:
		return zk.ErrAuthFailed
	case -116:
		return zk.ErrClosing
	case -117:
		return zk.ErrNothing
	case -118:
		return zk.ErrSessionMoved
	case -123:
		return zk.ErrReconfigDisabled
	case -8:
		return zk.ErrBadArguments
	}
	return fmt.Errorf("%w: error code %d", zk.ErrUnknown, code)
}

// juteLen reads the length that starts the jute string or buffer at the
// start of b (see jute.Len).
func juteLen(b []byte) (n int, ok bool) { return jute.Len(b) }

// parseChildren parses the body of a getChildren reply: a vector of jute
// strings. One string holds the whole body and the names are slices of it
// (a waiter keeps copies of the few names it needs, see attempt.trim).
func parseChildren(b []byte) ([]string, error) {
	if len(b) < 4 {
		return nil, errMalformedReply
	}
	n, _ := jute.VectorLen(b)
	if n < 0 { // a null vector
		return nil, nil
	}
	if n > (len(b)-4)/4 {
		return nil, errMalformedReply
	}
	all := string(b)
	names := make([]string, n)
	at := 4
	for i := range names {
		l, ok := juteLen(b[at:])
		if !ok || l < 0 {
			return nil, errMalformedReply
		}
		at += 4
		names[i] = all[at : at+l]
		at += l
	}
	return names, nil
}
