package simzk

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// The server's side of the protocol: one goroutine per connection reads
// its requests in order, applies each under World.mu and writes the reply
// there too, so a connection's replies and watch events go out in the
// order the server made them.

const (
	opPing       = jute.OpPing
	opSetAuth    = jute.OpSetAuth
	opSetWatches = jute.OpSetWatches
	opClose      = jute.OpClose
)

// A link is the server's side of one connection with a session: the
// watches it keeps for the connection, and the connection.
type link struct {
	w      *World
	id     int
	s      *session
	h      *Host
	conn   *end
	closed bool // the server is done with it: nothing more is sent
	dataW  map[string]struct{}
	childW map[string]struct{}
	out    []byte // frame being built, reused
	// maxZxid is the highest zxid of the replies sent on the connection:
	// a client that reads a later frame of it has read that one too.
	maxZxid int64
}

// send writes one frame: the reply header and body. Under World.mu.
func (l *link) send(hdr jute.ReplyHeader, body func([]byte) []byte) {
	if l.closed {
		return
	}
	if k, ok := l.h.takeHostile(Hostile.before); ok {
		l.conn.Write(beforeFrame(k, hdr.Xid))
		l.w.awaitHangUp(l.h, l.conn, k)
	}
	b, at := jute.BeginFrame(l.out[:0])
	b = hdr.Append(b)
	if body != nil {
		b = body(b)
	}
	b = jute.EndFrame(b, at)
	l.out = b
	if _, ok := l.h.takeHostile(func(k Hostile) bool { return k == Truncated }); ok {
		// Half the frame, then the server closes the connection.
		l.conn.Write(b[:len(b)/2])
		l.w.awaitHangUp(l.h, l.conn, Truncated)
		l.w.closeLink(l, closeEOF)
		return
	}
	l.conn.Write(b) // never blocks; a failure is the reader's to find
	if hdr.Xid != jute.XidNotification {
		l.maxZxid = max(l.maxZxid, hdr.Zxid)
	}
}

// push sends a watch event. Under World.mu.
func (l *link) push(typ zk.EventType, path string) {
	ev := jute.WatcherEvent{Type: int32(typ), State: int32(zk.StateSyncConnected), Path: path}
	l.send(jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1}, ev.Append)
}

// accept takes a new connection from host h and serves it; false when
// the server is down or closed.
func (w *World) accept(e *end, h *Host, server string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.down {
		return false
	}
	w.ends[e] = struct{}{}
	w.wg.Add(1)
	go w.serve(e, h, server)
	return true
}

// serve serves one connection: its connect request, then its requests,
// until either end closes it.
func (w *World) serve(e *end, h *Host, server string) {
	defer w.wg.Done()
	defer func() {
		e.Close()
		w.mu.Lock()
		delete(w.ends, e)
		w.mu.Unlock()
	}()
	body, err := jute.ReadFrame(e, nil, jute.MaxBuffer)
	if err != nil {
		return
	}
	var req jute.ConnectRequest
	r := jute.NewReader(body)
	if req.Read(r); r.Err() != nil {
		return
	}
	w.mu.Lock()
	l := w.connect(e, h, server, &req)
	w.mu.Unlock()
	if l == nil {
		return
	}
	buf := make([]byte, 0, 512)
	for {
		body, err := jute.ReadFrame(e, buf, jute.MaxBuffer)
		if errors.Is(err, jute.ErrLength) {
			w.mu.Lock()
			w.violation(l, "%v", err)
			w.mu.Unlock()
		}
		if err != nil {
			break
		}
		buf = body[:0]
		if w.handle(l, body) {
			break
		}
	}
	w.mu.Lock()
	w.closeLink(l, closeBroken)
	w.mu.Unlock()
}

// handle serves one request and reports whether the server is done with
// the connection. (World.mu is unlocked by a deferred call, so that a bug
// of the model panics loudly rather than leaving the bubble blocked on
// the mutex.)
func (w *World) handle(l *link, body []byte) (done bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.request(l, body)
	return l.closed
}

// passwdLen is the length of a session's password.
const passwdLen = 16

// connect answers a connect request: a new session, the session asked
// for, or, for one that has ended or a wrong password, a response with
// session id 0, after which the server closes the connection (as
// ZooKeeper does, and as go-zookeeper, which abandons the connection,
// needs). A client that has seen a later zxid than the server has applied
// (a lagging follower's, see Lag) is refused without a response, and goes
// on to another server. It returns the link of a session. Under
// World.mu.
func (w *World) connect(e *end, h *Host, server string, req *jute.ConnectRequest) *link {
	if req.LastZxidSeen > w.appliedBy(server) {
		w.lagRefusals++
		return nil
	}
	var s *session
	if req.SessionID == 0 {
		s = w.newSession(time.Duration(req.Timeout) * time.Millisecond)
	} else if s = w.sessions[req.SessionID]; s == nil || subtle.ConstantTimeCompare(s.passwd, req.Passwd) != 1 {
		resp := jute.ConnectResponse{Passwd: make([]byte, passwdLen)}
		b, at := jute.BeginFrame(nil)
		e.Write(jute.EndFrame(resp.Append(b), at))
		return nil
	}
	if s.link != nil {
		// The session moves to the new connection; the server closes
		// the old one.
		w.closeLink(s.link, closeEOF)
	}
	w.nextLink++
	l := &link{w: w, id: w.nextLink, s: s, h: h, conn: e, dataW: make(map[string]struct{}), childW: make(map[string]struct{})}
	s.link = l
	s.lastHeard = time.Now()
	h.mu.Lock()
	h.session = s.id
	h.mu.Unlock()
	resp := jute.ConnectResponse{Timeout: int32(s.timeout / time.Millisecond), SessionID: s.id, Passwd: s.passwd}
	if k, ok := h.takeHostile(Hostile.connect); ok {
		e.Write(hostileConnect(k, resp))
		w.awaitHangUp(h, e, k)
		return l
	}
	b, at := jute.BeginFrame(nil)
	e.Write(jute.EndFrame(resp.Append(b), at))
	return l
}

// request applies one request and sends its reply. Under World.mu.
func (w *World) request(l *link, body []byte) {
	if l.closed || w.closed {
		// The server is done with the connection (its session moved to
		// another, or ended): it reads nothing more from it.
		return
	}
	r := jute.NewReader(body)
	var hdr jute.RequestHeader
	if hdr.Read(r); r.Err() != nil {
		w.violation(l, "a request shorter than its header: %x", body)
		w.closeLink(l, closeEOF)
		return
	}
	l.s.lastHeard = time.Now()
	if l.h.takeDie(hdr.Op, false) {
		w.closeLink(l, closeCut)
		return
	}
	rep := w.apply(l, hdr, r)
	if rep.bad {
		// ZooKeeper closes a connection whose request does not parse.
		w.violation(l, "request (xid %d, op %d) does not parse: %x", hdr.Xid, hdr.Op, body)
		w.closeLink(l, closeEOF)
		return
	}
	if l.h.takeDie(hdr.Op, true) {
		w.closeLink(l, closeCut)
		return
	}
	xid, zxid, out := hdr.Xid, rep.zxid, rep.body
	if xid > 0 {
		if (hdr.Op == jute.OpGetChildren || hdr.Op == jute.OpGetChildren2) && rep.err == 0 && out != nil {
			if k, ok := l.h.takeHostile(func(k Hostile) bool { return k == BadListing }); ok {
				out = badListing(out)
				defer w.awaitHangUp(l.h, l.conn, k)
			}
		}
		if k, ok := l.h.takeHostile(func(k Hostile) bool { return k == ZxidBack && l.maxZxid > 1 }); ok {
			zxid = 1
			defer w.awaitHangUp(l.h, l.conn, k)
		}
	}
	l.send(jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: rep.err}, out)
	if rep.closeAfter {
		w.closeLink(l, closeEOF)
	}
}

// reply is the server's answer to a request.
type reply struct {
	zxid       int64
	err        int32
	body       func([]byte) []byte // nil: none (and none is sent with an error)
	closeAfter bool                // the server closes the connection after this reply
	bad        bool                // the request did not parse
}

// apply applies one request. Under World.mu.
func (w *World) apply(l *link, hdr jute.RequestHeader, r *jute.Reader) reply {
	switch hdr.Op {
	case jute.OpPing, jute.OpClose, jute.OpSetAuth, jute.OpSetWatches:
		return w.sessionOp(l, hdr.Op, r)
	case jute.OpExists, jute.OpGetData, jute.OpGetChildren, jute.OpGetChildren2:
		var req jute.PathWatch
		if !parse(r, req.Read) {
			return reply{bad: true}
		}
		return w.read(l, hdr.Op, req)
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL,
		jute.OpDelete, jute.OpSetData, jute.OpCheck, jute.OpMulti:
		return w.write(l, hdr.Op, r)
	}
	w.violation(l, "request (xid %d) with unknown op %d", hdr.Xid, hdr.Op)
	return reply{zxid: w.zxid, err: errUnimplemented}
}

// parse reads a request's body with read and reports whether it was one
// whole record.
func parse(r *jute.Reader, read func(*jute.Reader)) bool {
	read(r)
	return r.End() == nil
}

// sessionOp applies a ping, a close, credentials or the watches of a
// reconnected client.
func (w *World) sessionOp(l *link, op int32, r *jute.Reader) reply {
	switch op {
	case jute.OpPing:
		return reply{zxid: w.zxid}
	case jute.OpClose:
		w.endSession(l.s, false)
		return reply{zxid: w.zxid, closeAfter: true}
	case jute.OpSetAuth:
		var req jute.SetAuthRequest
		if !parse(r, req.Read) {
			return reply{bad: true}
		}
		// ZooKeeper answers credentials with zxid 0; a scheme it does
		// not know fails, and the connection is closed.
		switch req.Scheme {
		case "digest", "ip":
			return reply{}
		}
		return reply{err: code(zk.ErrAuthFailed), closeAfter: true}
	}
	var req jute.SetWatchesRequest
	if !parse(r, req.Read) {
		return reply{bad: true}
	}
	w.setWatches(l, &req)
	return reply{zxid: w.zxid}
}

// write applies a create, delete, setData, check or multi.
func (w *World) write(l *link, op int32, r *jute.Reader) reply {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		var req jute.CreateRequest
		req.Read(r)
		if op == jute.OpCreateTTL {
			r.Int64() // the TTL: TTL nodes are refused
		}
		if r.End() != nil {
			return reply{bad: true}
		}
		return w.create(l, op, &req)
	case jute.OpSetData:
		var req jute.SetDataRequest
		if !parse(r, req.Read) {
			return reply{bad: true}
		}
		t := w.begin()
		st, err := t.set(req.Path, req.Data, req.Version)
		return t.end(stat(st).Append, err)
	case jute.OpMulti:
		ops := r.ReadMulti()
		if r.End() != nil {
			return reply{bad: true}
		}
		return w.multi(l, ops)
	}
	var req jute.PathVersion
	if !parse(r, req.Read) {
		return reply{bad: true}
	}
	t := w.begin()
	if op == jute.OpCheck {
		return t.end(nil, t.check(req.Path, req.Version))
	}
	return t.end(nil, t.del(req.Path, req.Version))
}

// violation notes a request no correct client sends. Under World.mu.
func (w *World) violation(l *link, format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf("%s: ", l.h.name)+fmt.Sprintf(format, args...))
}

// Violations returns what the server read that breaks the protocol:
// frames that do not parse as the request their opcode names, unknown
// opcodes, oversized frames. A correct client sends none, whatever the
// network does.
func (w *World) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.violations)
}

// Error codes the model answers with that go-zookeeper has no error for.
const (
	errRuntimeInconsistency int32 = -2
	errMarshalling          int32 = -5
	errUnimplemented        int32 = -6
)

// codes are the error codes of go-zookeeper's errors.
var codes = map[error]int32{
	zk.ErrAPIError:                -100,
	zk.ErrNoNode:                  -101,
	zk.ErrNoAuth:                  -102,
	zk.ErrBadVersion:              -103,
	zk.ErrNoChildrenForEphemerals: -108,
	zk.ErrNodeExists:              -110,
	zk.ErrNotEmpty:                -111,
	zk.ErrSessionExpired:          -112,
	zk.ErrInvalidACL:              -114,
	zk.ErrAuthFailed:              -115,
	zk.ErrBadArguments:            -8,
}

// codeErr is an error code as an error, for the codes go-zookeeper has
// no error for.
type codeErr int32

func (c codeErr) Error() string { return fmt.Sprintf("error code %d", int32(c)) }

// code is the wire code of err.
func code(err error) int32 {
	if err == nil {
		return 0
	}
	if c, ok := err.(codeErr); ok {
		return int32(c)
	}
	if c, ok := codes[err]; ok {
		return c
	}
	return int32(errRuntimeInconsistency)
}

// stat converts a node's stat for the wire.
func stat(s zk.Stat) *jute.Stat {
	return &jute.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner,
		DataLength: s.DataLength, NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

// end finishes a write: the reply carries the transaction's zxid; a
// failed write is undone (its zxid stays taken), a good one committed.
func (t *txn) end(body func([]byte) []byte, err error) reply {
	if err != nil {
		t.rollback()
		return reply{zxid: t.zxid, err: code(err)}
	}
	t.commit()
	return reply{zxid: t.zxid, body: body}
}

// create applies a create, create2 or createContainer request.
func (w *World) create(l *link, op int32, req *jute.CreateRequest) reply {
	mode, err := parseFlags(req.Flags)
	t := w.begin()
	switch {
	case err != nil:
		return t.end(nil, zk.ErrBadArguments)
	case op == jute.OpCreateContainer && !mode.container:
		return t.end(nil, zk.ErrBadArguments)
	case op != jute.OpCreateContainer:
		// ZooKeeper makes an ordinary node of a create with the
		// container flag.
		mode.container = false
	}
	p, err := t.create(req.Path, req.Data, acl(req.ACL), mode, l.s.id, true)
	if err != nil {
		return t.end(nil, err)
	}
	if op == jute.OpCreate {
		return t.end(func(b []byte) []byte { return jute.AppendString(b, p) }, nil)
	}
	st := stat(w.nodes[p].stat())
	return t.end(func(b []byte) []byte { return st.Append(jute.AppendString(b, p)) }, nil)
}

func acl(in []jute.ACL) []zk.ACL {
	out := make([]zk.ACL, len(in))
	for i, a := range in {
		out[i] = zk.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

// read applies an exists, getData, getChildren or getChildren2 request.
func (w *World) read(l *link, op int32, req jute.PathWatch) reply {
	n := w.nodes[req.Path]
	if op == jute.OpExists && req.Watch {
		// ZooKeeper sets the watch whether the node exists or not.
		w.watch(l, req.Path, false)
	}
	if n == nil {
		return reply{zxid: w.zxid, err: code(zk.ErrNoNode)}
	}
	st := stat(n.stat())
	switch op {
	case jute.OpExists:
		return reply{zxid: w.zxid, body: st.Append}
	case jute.OpGetData:
		if req.Watch {
			w.watch(l, req.Path, false)
		}
		data := slices.Clone(n.data)
		return reply{zxid: w.zxid, body: func(b []byte) []byte { return st.Append(jute.AppendBuffer(b, data)) }}
	}
	if req.Watch {
		w.watch(l, req.Path, true)
	}
	names := w.children(n)
	if op == jute.OpGetChildren {
		return reply{zxid: w.zxid, body: func(b []byte) []byte { return jute.AppendStrings(b, names) }}
	}
	return reply{zxid: w.zxid, body: func(b []byte) []byte { return st.Append(jute.AppendStrings(b, names)) }}
}

// setWatches sets a reconnected client's watches as ZooKeeper does: a
// watch whose node changed after the client's last zxid fires at once
// (a data watch on a deleted or changed node, an exists watch on a node
// now there, a child watch on a deleted node or one whose children
// changed); the others are set.
func (w *World) setWatches(l *link, req *jute.SetWatchesRequest) {
	rel := req.RelativeZxid
	for _, p := range req.Data {
		switch n := w.nodes[p]; {
		case n == nil:
			l.push(zk.EventNodeDeleted, p)
		case n.mzxid > rel:
			l.push(zk.EventNodeDataChanged, p)
		default:
			w.watch(l, p, false)
		}
	}
	for _, p := range req.Exist {
		if w.nodes[p] != nil {
			l.push(zk.EventNodeCreated, p)
		} else {
			w.watch(l, p, false)
		}
	}
	for _, p := range req.Child {
		switch n := w.nodes[p]; {
		case n == nil:
			l.push(zk.EventNodeDeleted, p)
		case n.pzxid > rel:
			l.push(zk.EventNodeChildrenChanged, p)
		default:
			w.watch(l, p, true)
		}
	}
}

// failedResults makes the results of a multi whose operation failed
// (with code) answer as ZooKeeper's do: an error result for each, 0
// before it, its code, then runtime inconsistency.
func failedResults(res []jute.MultiResult, failed int, code int32) {
	for i := range res {
		res[i] = jute.MultiResult{Op: jute.OpError}
		switch {
		case i == failed:
			res[i].Err = code
		case i > failed:
			res[i].Err = errRuntimeInconsistency
		}
	}
}

// multi applies the operations of a multi in one transaction: all or
// none. A failed multi is answered with an error result for every
// operation (0 before the one that failed, its code, then runtime
// inconsistency), and a good one with a result per operation.
func (w *World) multi(l *link, ops []jute.MultiOp) reply {
	for _, op := range ops {
		if op.Op == jute.OpCreate || op.Op == jute.OpCreate2 {
			if f := op.Create.Flags; f == zk.FlagTTL || f == zk.FlagPersistentSequentialWithTTL {
				// ZooKeeper refuses the whole request, after taking a
				// zxid, with a marshalling error in the reply header.
				t := w.begin()
				return t.end(nil, codeErr(errMarshalling))
			}
		}
	}
	t := w.begin()
	res := make([]jute.MultiResult, len(ops))
	failed, ferr := -1, int32(0)
	for i, op := range ops {
		var err error
		res[i].Op = op.Op
		switch op.Op {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
			mode, perr := parseFlags(op.Create.Flags)
			if perr != nil {
				err = zk.ErrBadArguments
				break
			}
			if mode.container {
				res[i].Op = jute.OpCreateContainer
			}
			if res[i].Path, err = t.create(op.Create.Path, op.Create.Data, acl(op.Create.ACL), mode, l.s.id, true); err == nil && res[i].Op != jute.OpCreate {
				res[i].Stat = *stat(w.nodes[res[i].Path].stat())
			}
		case jute.OpSetData:
			var st zk.Stat
			if st, err = t.set(op.SetData.Path, op.SetData.Data, op.SetData.Version); err == nil {
				res[i].Stat = *stat(st)
			}
		case jute.OpDelete:
			err = t.del(op.PathVersion.Path, op.PathVersion.Version)
		case jute.OpCheck:
			err = t.check(op.PathVersion.Path, op.PathVersion.Version)
		default:
			err = zk.ErrBadArguments
		}
		if err != nil {
			failed, ferr = i, code(err)
			break
		}
	}
	if failed >= 0 {
		t.rollback()
		failedResults(res, failed, ferr)
		return reply{zxid: t.zxid, body: func(b []byte) []byte { return jute.AppendMultiResults(b, res) }}
	}
	t.commit()
	return reply{zxid: t.zxid, body: func(b []byte) []byte { return jute.AppendMultiResults(b, res) }}
}
