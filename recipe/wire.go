package recipe

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// go-zookeeper's Create returns the new node's path but drops the zxid of
// the reply, which is the node's czxid: the fencing token. Reading the token
// back would cost a round trip on every acquire, so the connection wrapper
// watches the wire instead: it notes the xids of create requests as they are
// written and, as replies are read, the zxid of each successful create with
// the path it returned. The engine takes the zxid by path right after Create
// returns (go-zookeeper reads the reply before it hands the result over).
// Nothing is altered on the wire; where anything does not parse, nothing is
// noted and the engine reads the node instead. (A create sent as a direct
// request, see direct.go, takes its zxid from its own reply.)

const (
	// Negative xids: watch notifications, pings, and, in some clients,
	// credentials and watches sent again after a reconnect.
	xidWatchEvent = -1
	xidPing       = -2
	xidSetAuth    = -4
	xidSetWatches = -8

	opCreate          = 1
	opCreate2         = 15
	opCreateContainer = 19
	opCreateTTL       = 21

	maxNotedCreates = 4096    // bound on zxids not (yet) taken by the engine
	maxWirePath     = 4096    // longer paths are not noted
	maxPrealloc     = 1 << 20 // a direct reply's body grows past this as it arrives
)

// createZxids maps the path returned by a create to its zxid.
type createZxids struct {
	mu sync.Mutex
	m  map[string]int64
}

func (z *createZxids) put(path string, zxid int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.m == nil || len(z.m) >= maxNotedCreates {
		z.m = make(map[string]int64)
	}
	z.m[path] = zxid
}

// take returns and forgets the zxid of the create that returned path.
func (z *createZxids) take(path string) (int64, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	zxid, ok := z.m[path]
	delete(z.m, path)
	return zxid, ok
}

// createWrites tells a caller when the create request for a path has been
// written to the connection, so that it can send a read behind it in the
// same round trip: the server answers one session's requests in order, so
// a read written after a create sees the created node.
type createWrites struct {
	waiting atomic.Int32 // len(m): the tap looks at paths only when > 0
	mu      sync.Mutex
	m       map[string]chan struct{}
}

// expect returns a channel closed once a create request for path has been
// written, and a function to call when no longer interested.
func (cw *createWrites) expect(path string) (written <-chan struct{}, forget func()) {
	ch := make(chan struct{})
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.m == nil {
		cw.m = make(map[string]chan struct{})
	}
	cw.m[path] = ch
	cw.waiting.Store(int32(len(cw.m)))
	return ch, func() {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		if cw.m[path] == ch {
			delete(cw.m, path)
			cw.waiting.Store(int32(len(cw.m)))
		}
	}
}

// wrote notes a create request whose body (a jute path string first)
// starts at b.
func (cw *createWrites) wrote(b []byte) {
	if cw.waiting.Load() == 0 {
		return
	}
	n, ok := juteLen(b)
	if !ok || n < 0 {
		return
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if ch, ok := cw.m[string(b[4:4+n])]; ok {
		close(ch)
		delete(cw.m, string(b[4:4+n]))
		cw.waiting.Store(int32(len(cw.m)))
	}
}

// wireTap follows one connection's frames in both directions.
//
// It also checks, on the live wire, what direct requests (direct.go) rely
// on in go-zookeeper and in the server (see the contract tests,
// contract_test.go): every frame go-zookeeper writes goes out in one
// write, the connect request first; go-zookeeper's xids rise; and every
// reply answers the oldest request still waiting, but for setAuth, which
// the server answers as soon as it reads it. At the first break it tells
// broke, takes no more direct requests, and stops checking.
type wireTap struct {
	out     *createZxids
	written *createWrites // told of create requests as they are written

	// proof, if set, is told of every reply to one of our requests (the
	// connect request, pings included; not watch notifications) with the
	// time, by now, at which that request was written: the server was
	// alive then. now is a monotonic clock.
	proof func(sentAt int64)
	now   func() int64

	// connect, if set, is told of the connect response as soon as its
	// header is read: the frame's length, the session timeout the server
	// granted, and the session id (0: the session expired).
	connect func(length int, timeoutMs int32, session int64)
	// broke, if set, is told once of the first assumption the wire broke.
	broke func(reason string)
	// creds, if set, counts the credentials go-zookeeper sends again on
	// every new connection before anything else (the setAuth requests
	// answered without error on one connection, the most of any).
	creds *atomic.Int32

	mu          sync.Mutex
	inflight    []wireReq // requests written and not yet answered, in write order
	connectSent int64     // write time of the connect request
	wrote       bool      // the first frame (connect request) went out

	// Direct requests (see direct.go), under mu.
	direct    map[int32]*directCall // by xid, the direct requests waiting for a reply
	directSeq uint32                // direct requests made
	lastXid   int32                 // the highest xid go-zookeeper wrote (or, before, the last connection's)
	authOK    int32                 // setAuth requests answered without error on this connection
	connected bool                  // the connect response was read and named a live session
	dead      bool                  // the connection failed or closed, or its session expired
	broken    bool                  // an assumption broke: no more checks, no direct requests

	// hold, when set, holds back the answer to a direct request until the
	// reader (go-zookeeper) has read the whole reply (release), so that it
	// comes after everything the server sent before it (watch events
	// above all), as go-zookeeper's own replies do; the tap reads bytes as
	// they arrive from the connection, ahead of go-zookeeper. Under mu.
	hold    bool
	held    []heldAnswer
	holding atomic.Int32 // len(held), read without mu

	// Incoming stream state. The first frame is the connect response.
	pos       int64 // bytes read from the connection
	readFirst bool
	hdr       [20]byte // length + reply header (xid, zxid, err); of the connect response, length + protocol version, timeout, session
	hdrN      int
	body      []byte // path reply of a create being collected
	bodyWant  int    // bytes of body still wanted (collected into body)
	skip      int    // bytes of the current frame still to skip
	xid       int32
	zxid      int64
	directXid int32 // the direct request whose reply body is being collected
	forDirect bool  // body is a direct request's reply
}

// heldAnswer is the reply to a direct request, held until the reader has
// read up to end (see wireTap.hold).
type heldAnswer struct {
	end  int64
	xid  int32
	zxid int64
	body []byte
	err  error
}

// deliver answers the direct request xid with its reply, which ends at
// byte end of the stream: at once, or, with hold, once the reader has read
// that far. It must be called with w.mu held.
func (w *wireTap) deliver(end int64, xid int32, zxid int64, body []byte, err error) {
	if !w.hold {
		w.answer(xid, zxid, body, err)
		return
	}
	w.held = append(w.held, heldAnswer{end: end, xid: xid, zxid: zxid, body: body, err: err})
	w.holding.Store(int32(len(w.held)))
}

// release answers the held replies that end within the first read bytes
// of the stream, the bytes the reader has taken.
func (w *wireTap) release(read int64) {
	if w.holding.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseLocked(read)
}

// releaseLocked is release with w.mu held.
func (w *wireTap) releaseLocked(read int64) {
	n := 0
	for _, a := range w.held {
		if a.end > read {
			break
		}
		w.answer(a.xid, a.zxid, a.body, a.err)
		n++
	}
	if n > 0 {
		clear(w.held[:n])
		w.held = w.held[n:]
		w.holding.Store(int32(len(w.held)))
	}
}

// wireReq is a request written on the connection and not yet answered.
type wireReq struct {
	xid, op int32
	at      int64 // when it was written, by now
	direct  bool
}

const (
	opSetAuth = 100

	// go-zookeeper's xids rise by one per request, across connections; its
	// callers take them before they queue their requests, so a frame may go
	// out behind one with a higher xid (by as many requests as are queued
	// at once). A go-zookeeper xid further ahead than xidAhead, or further
	// behind than xidBehind, breaks the assumption (direct requests use
	// xids directXidGap ahead).
	xidAhead  = 1 << 28
	xidBehind = 1 << 20

	// maxInflight bounds the requests followed once checks have stopped.
	maxInflight = 1 << 16
)

// oneFrame reports whether p is exactly one frame: a length, then that
// many bytes.
func oneFrame(p []byte) bool { return jute.IsFrame(p) }

// noteWrite notes a frame written by go-zookeeper, which writes each
// request as one whole frame.
func (w *wireTap) noteWrite(p []byte) { w.noteFrame(p, false) }

// noteDirectWrite notes the frame of a direct request.
func (w *wireTap) noteDirectWrite(p []byte) { w.noteFrame(p, true) }

func (w *wireTap) noteFrame(p []byte, direct bool) {
	var broke string
	defer func() { w.report(broke) }()
	w.mu.Lock()
	defer w.mu.Unlock()
	var t int64
	if w.now != nil {
		t = w.now()
	}
	if !w.wrote {
		w.wrote = true // the connect request has no request header
		w.connectSent = t
		if !oneFrame(p) {
			broke = w.breakLocked(fmt.Sprintf("the connect request went out as a write of %d bytes that is not one frame", len(p)))
		}
		return
	}
	if len(p) < 12 || !oneFrame(p) {
		if !direct {
			broke = w.breakLocked(fmt.Sprintf("go-zookeeper wrote %d bytes that are not one whole request", len(p)))
		}
		return
	}
	h, _ := jute.ParseRequestHeader(p[4:])
	xid, op := h.Xid, h.Op
	if !direct && !w.broken {
		switch d := uint32(xid-w.lastXid) & xidMask; {
		case xid < 0:
			if xid != xidPing && xid != xidSetAuth && xid != xidSetWatches {
				broke = w.breakLocked(fmt.Sprintf("go-zookeeper wrote a request with xid %d", xid))
			}
		case d > 0 && d < xidAhead:
			w.lastXid = xid
		case d > xidMask-xidBehind:
			// Written behind a request that took its xid later.
		default:
			broke = w.breakLocked(fmt.Sprintf("go-zookeeper wrote xid %d after xid %d", xid, w.lastXid))
		}
	}
	if len(w.inflight) >= maxInflight {
		w.inflight = w.inflight[1:]
	}
	w.inflight = append(w.inflight, wireReq{xid: xid, op: op, at: t, direct: direct})
	if isCreate(op) && !direct && w.written != nil {
		w.written.wrote(p[12:])
	}
}

// isCreate reports whether op is one of the creates whose reply carries
// the new node's path.
func isCreate(op int32) bool {
	switch op {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL:
		return true
	}
	return false
}

// breakLocked notes that the wire broke an assumption, the first time:
// the connection takes no more direct requests and checks stop. It
// returns the reason to report once w.mu is released ("" if one was
// already noted). It must be called with w.mu held.
func (w *wireTap) breakLocked(reason string) string {
	if w.broken {
		return ""
	}
	w.broken = true
	return reason
}

// report tells broke of a reason returned by breakLocked.
func (w *wireTap) report(reason string) {
	if reason != "" && w.broke != nil {
		w.broke(reason)
	}
}

// noteRead follows bytes read from the server.
func (w *wireTap) noteRead(p []byte) {
	for len(p) > 0 {
		switch {
		case w.skip > 0:
			n := min(w.skip, len(p))
			w.skip -= n
			p = p[n:]
			w.pos += int64(n)
		case w.bodyWant > 0:
			n := min(w.bodyWant, len(p))
			w.body = append(w.body, p[:n]...)
			w.bodyWant -= n
			p = p[n:]
			w.pos += int64(n)
			if w.bodyWant == 0 && w.forDirect {
				w.forDirect = false
				w.mu.Lock()
				w.deliver(w.pos, w.directXid, w.zxid, w.body, nil)
				w.mu.Unlock()
				w.body = nil // handed over
			} else if w.bodyWant == 0 {
				w.finishBody()
			}
		default:
			n := copy(w.hdr[w.hdrN:], p)
			w.hdrN += n
			p = p[n:]
			w.pos += int64(n)
			if w.hdrN == len(w.hdr) {
				w.hdrN = 0
				if !w.readFirst {
					w.connectResponse()
				} else {
					w.frame()
				}
			}
		}
	}
}

// connectResponse handles the header of the connect response, the first
// frame: a live session opens the connection to direct requests (once
// go-zookeeper has sent the credentials again, see expectReply); an
// expired one ends it.
func (w *wireTap) connectResponse() {
	w.readFirst = true
	length, _ := jute.FrameLen(w.hdr[:])
	head, _ := jute.ParseConnectHead(w.hdr[4:])
	timeoutMs, session := head.Timeout, head.SessionID
	w.skip = max(length-jute.ConnectHeadLen, 0)
	var broke string
	w.mu.Lock()
	sentAt := w.connectSent
	switch {
	case length < jute.ConnectHeadLen:
		broke = w.breakLocked(fmt.Sprintf("a connect response of %d bytes", length))
	case session == 0:
		w.dead = true // go-zookeeper leaves the connection: see trackedConn.Read
	default:
		w.connected = true
	}
	w.mu.Unlock()
	w.report(broke)
	if w.connect != nil && length >= jute.ConnectHeadLen {
		w.connect(length, timeoutMs, session)
	}
	if w.proof != nil {
		w.proof(sentAt)
	}
}

// frame handles a complete reply header in w.hdr.
func (w *wireTap) frame() {
	length, _ := jute.FrameLen(w.hdr[:])
	rest := max(length-jute.ReplyHeaderLen, 0)
	h, _ := jute.ParseReplyHeader(w.hdr[4:])
	w.xid, w.zxid = h.Xid, h.Zxid
	errCode := h.Err
	if w.xid == xidWatchEvent {
		w.skip = rest
		return
	}
	var broke string
	w.mu.Lock()
	req, answered := w.answered(w.xid, &broke)
	if length < 16 {
		broke = w.breakLocked(fmt.Sprintf("a reply of %d bytes", length))
	}
	if answered && req.op == opSetAuth && errCode == 0 {
		w.authOK++
		if w.creds != nil && w.authOK > w.creds.Load() {
			w.creds.Store(w.authOK)
		}
	}
	_, direct := w.direct[w.xid]
	if direct && (errCode != 0 || rest == 0) {
		w.deliver(w.pos+int64(rest), w.xid, w.zxid, nil, replyError(errCode))
		direct = false // answered: the frame is skipped
	}
	w.mu.Unlock()
	w.report(broke)
	if answered && w.proof != nil {
		w.proof(req.at)
	}
	if direct {
		w.directXid, w.forDirect = w.xid, true
		w.body = make([]byte, 0, min(rest, maxPrealloc))
		w.bodyWant = rest
		return
	}
	create := answered && !req.direct && isCreate(req.op)
	if !create || errCode != 0 || rest < 4 || rest > 4+maxWirePath {
		w.skip = rest
		return
	}
	w.body = w.body[:0]
	w.bodyWant = rest
}

// answered takes the request that a reply with xid answers out of the
// requests in flight. The server answers a session's requests in the order
// it read them, setAuth aside: a reply to any other request than the
// oldest breaks an assumption (noted in *broke), as does a reply to no
// request. It must be called with w.mu held.
func (w *wireTap) answered(xid int32, broke *string) (wireReq, bool) {
	for i, r := range w.inflight {
		if r.xid != xid {
			continue
		}
		if i > 0 && r.op != opSetAuth && !w.broken {
			*broke = w.breakLocked(fmt.Sprintf("a reply to xid %d came before the reply to xid %d, written earlier", xid, w.inflight[0].xid))
		}
		if i == 0 {
			w.inflight = w.inflight[1:] // the usual case: no copy
		} else {
			w.inflight = append(w.inflight[:i], w.inflight[i+1:]...)
		}
		return r, true
	}
	if !w.broken {
		*broke = w.breakLocked(fmt.Sprintf("a reply to xid %d, which no request on the connection had", xid))
	}
	return wireReq{}, false
}

// finishBody parses a create reply's body: the path as a jute string.
func (w *wireTap) finishBody() {
	b := w.body
	n, ok := juteLen(b)
	if !ok || n < 0 {
		return
	}
	w.out.put(string(b[4:4+n]), w.zxid)
}
