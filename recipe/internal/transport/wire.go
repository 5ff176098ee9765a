package transport

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// The wire tap follows one connection's frames in both directions, for
// three things the engine needs and go-zookeeper does not give:
//
//   - the zxid of each create's reply, which is the new node's czxid, the
//     fencing token (go-zookeeper's Create drops it, and reading it back
//     would cost a round trip on every acquire);
//   - the moment a create request is written, so that a listing can follow
//     it in the same round trip (createWrites);
//   - proof of life: the write time of each request a server answered.
//
// It is also the client's guard against the server. Whatever arrives is
// untrusted: the tap takes each frame whole and checks it (its length
// against the cap, its header, the request it answers, its body by that
// request's opcode, the order of zxids) before go-zookeeper reads a byte
// of it. A frame that fails ends the connection, and go-zookeeper dials
// again; go-zookeeper never parses it (see checkReply).

const (
	maxNotedCreates = 4096 // bound on zxids not (yet) taken by the engine
	maxWirePath     = 4096 // longer paths are not noted

	// maxInflight bounds the requests followed on one connection; more
	// than this many unanswered is no traffic of go-zookeeper's.
	maxInflight = 1 << 16
)

// Bounds of the connect response. The granted session timeout must lie in
// [minGrantedTimeout, maxGrantedTimeout]: go-zookeeper pings every third
// of it and panics on a grant of 0 or less, a grant of a few milliseconds
// makes it ping at that pace, and no ZooKeeper configuration we know of
// grants under 100 ms (the server's floor is two ticks) or above an hour.
// The password is 16 bytes from every ZooKeeper server; go-zookeeper sends
// it back in a connect request that has room for little more.
const (
	minGrantedTimeout = 100     // ms
	maxGrantedTimeout = 3600000 // ms
	maxPassword       = 16
	// maxConnectResponse: protocol version, timeout, session id, the
	// password, and the read-only flag.
	maxConnectResponse = 4 + 4 + 8 + 4 + maxPassword + 1
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
	n, ok := jute.Len(b)
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

// grant is what a valid connect response says.
type grant struct {
	timeoutMs int32
	session   int64 // 0: the session expired
	length    int   // of the frame, after its length
}

// sessionZxid is the highest zxid a session has seen in replies, across
// its connections: a reply may not go below it.
type sessionZxid struct {
	mu      sync.Mutex
	session int64
	zxid    int64
}

// advance notes zxid, seen in a reply on session, and reports whether it
// is not below what the session saw before. zxids of 0 or less (watch
// notifications carry -1, the replies to setAuth 0) are not ordered.
func (s *sessionZxid) advance(session, zxid int64) bool {
	if zxid <= 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != session {
		// A new session owes nothing to the old one's view.
		s.session, s.zxid = session, 0
	}
	if zxid < s.zxid {
		return false
	}
	s.zxid = zxid
	return true
}

// wireTap follows one connection's frames in both directions. Writes are
// go-zookeeper's, noted as they go out (noteWrite); reads come to the tap
// as whole frames (checkFrame) before go-zookeeper sees them.
type wireTap struct {
	out     *createZxids
	written *createWrites // told of create requests as they are written
	zxids   *sessionZxid  // the client's, shared by its connections

	// proof, if set, is told of every reply to one of our requests (the
	// connect request, pings included; not watch notifications) with the
	// time, by now, at which that request was written: the server was
	// alive then. now is a monotonic clock.
	proof func(sentAt int64)
	now   func() int64

	// connect, if set, is told of a valid connect response.
	connect func(grant)
	// rewatched, if set, is told when the server answered a setWatches
	// request (go-zookeeper's watches, set again on a new connection).
	rewatched func()

	// limit is the largest frame accepted, after its length.
	limit int

	mu          sync.Mutex
	inflight    []wireReq // requests written and not yet answered, in write order, from head
	head        int
	connectSent int64  // write time of the connect request
	wrote       bool   // the first frame (connect request) went out
	pending     []byte // a frame go-zookeeper wrote in pieces, so far

	// Of the reading side (one goroutine, go-zookeeper's).
	readFirst bool  // the connect response was read
	session   int64 // the session it named
}

// wireReq is a request written on the connection and not yet answered.
type wireReq struct {
	xid, op int32
	at      int64 // when it was written, by now
}

// noteWrite notes bytes go-zookeeper wrote: whole frames, one per write,
// as it writes them, or the pieces of one.
func (w *wireTap) noteWrite(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 && jute.IsFrame(p) {
		w.noteFrameLocked(p)
		return
	}
	w.pending = append(w.pending, p...)
	for {
		n, ok := jute.FrameLen(w.pending)
		if !ok || n < 0 || len(w.pending)-4 < n {
			return
		}
		w.noteFrameLocked(w.pending[:4+n])
		w.pending = w.pending[4+n:]
		if len(w.pending) == 0 {
			w.pending = nil
		}
	}
}

// noteFrameLocked notes one request frame. It must be called with w.mu
// held.
func (w *wireTap) noteFrameLocked(p []byte) {
	var t int64
	if w.now != nil {
		t = w.now()
	}
	if !w.wrote {
		w.wrote = true // the connect request has no request header
		w.connectSent = t
		return
	}
	h, ok := jute.ParseRequestHeader(p[4:])
	if !ok {
		return
	}
	if len(w.inflight)-w.head >= maxInflight {
		w.head++
	}
	if w.head > 0 && len(w.inflight) == cap(w.inflight) {
		// Full: move the requests in flight to the front, in place.
		n := copy(w.inflight, w.inflight[w.head:])
		clear(w.inflight[n:])
		w.inflight, w.head = w.inflight[:n], 0
	}
	w.inflight = append(w.inflight, wireReq{xid: h.Xid, op: h.Op, at: t})
	if isCreate(h.Op) && w.written != nil {
		w.written.wrote(p[12:])
	}
}

// isCreate reports whether op is one of the creates whose reply carries
// the new node's path.
func isCreate(op int32) bool {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		return true
	}
	return false
}

// errBadFrame is wrapped by the error that ends a connection whose server
// sent a frame the tap refused.
var errBadFrame = errors.New("recipe: refused a frame from the server")

// badFrame returns the error that ends the connection for a frame the tap
// refused, with why.
func badFrame(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadFrame, fmt.Sprintf(format, args...))
}

// checkLength checks the length that starts a frame, as soon as its four
// bytes have arrived: before the tap waits for, or buffers, the rest.
func (w *wireTap) checkLength(n int) error {
	switch {
	case !w.readFirst && (n < jute.ConnectHeadLen+4 || n > maxConnectResponse):
		return badFrame("a connect response of %d bytes", n)
	case w.readFirst && n < jute.ReplyHeaderLen:
		return badFrame("a frame of %d bytes, shorter than a reply header", n)
	case n > w.limit:
		return badFrame("a frame of %d bytes, over the limit of %d", n, w.limit)
	}
	return nil
}

// checkFrame checks one whole frame from the server (its length first)
// and takes what the tap follows from it. An error ends the connection
// before go-zookeeper reads the frame.
func (w *wireTap) checkFrame(f []byte) error {
	n, _ := replyLen(f)
	if err := w.checkLength(n); err != nil {
		return err
	}
	if !w.readFirst {
		return w.connectResponse(f[4:])
	}
	return w.reply(f[4:])
}

// connectResponse checks the connect response, the first frame.
func (w *wireTap) connectResponse(b []byte) error {
	r := jute.NewReader(b)
	var cr jute.ConnectResponse
	cr.Read(r)
	timeoutMs, session := cr.Timeout, cr.SessionID
	switch {
	case r.Err() != nil:
		return badFrame("a connect response that does not parse: %v", r.Err())
	case cr.ProtocolVersion != 0:
		return badFrame("a connect response of protocol version %d", cr.ProtocolVersion)
	case len(cr.Passwd) > maxPassword:
		return badFrame("a connect response with a password of %d bytes", len(cr.Passwd))
	case r.Len() > 0:
		return badFrame("a connect response with %d bytes past its fields", r.Len())
	case session != 0 && (timeoutMs < minGrantedTimeout || timeoutMs > maxGrantedTimeout):
		return badFrame("a connect response granting a session timeout of %d ms (accepted: %d ms to %d ms)",
			timeoutMs, minGrantedTimeout, maxGrantedTimeout)
	}
	w.readFirst, w.session = true, session
	w.mu.Lock()
	sentAt := w.connectSent
	w.mu.Unlock()
	if w.connect != nil {
		w.connect(grant{timeoutMs: timeoutMs, session: session, length: len(b)})
	}
	if w.proof != nil {
		w.proof(sentAt)
	}
	return nil
}

// reply checks a frame after the connect response: a watch notification,
// or the reply to the oldest request in flight (setAuth aside, which the
// server answers as soon as it reads it), whose body parses as what
// go-zookeeper decodes for that request, with a zxid not below the
// session's last.
func (w *wireTap) reply(b []byte) error {
	h, _ := jute.ParseReplyHeader(b)
	body := b[jute.ReplyHeaderLen:]
	if h.Xid == jute.XidNotification {
		if err := jute.CheckWatchEvent(body); err != nil {
			return badFrame("a watch notification that does not parse: %v", err)
		}
		return nil
	}
	if h.Xid < 0 && h.Xid != jute.XidPing {
		return badFrame("a reply with xid %d, which no request has", h.Xid)
	}
	w.mu.Lock()
	req, err := w.answeredLocked(h.Xid)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if w.zxids != nil && !w.zxids.advance(w.session, h.Zxid) {
		return badFrame("a reply with zxid %#x, below the session's last", h.Zxid)
	}
	if h.Err == 0 {
		if err := jute.CheckReply(req.op, body); err != nil {
			return badFrame("a reply to opcode %d that does not parse: %v", req.op, err)
		}
	}
	if w.proof != nil {
		w.proof(req.at)
	}
	if isCreate(req.op) && h.Err == 0 {
		w.noteCreate(body, h.Zxid)
	}
	if req.op == jute.OpSetWatches && w.rewatched != nil {
		w.rewatched()
	}
	return nil
}

// answeredLocked takes the request that a reply with xid answers out of
// the requests in flight. It must be called with w.mu held.
func (w *wireTap) answeredLocked(xid int32) (wireReq, error) {
	waiting := w.inflight[w.head:]
	for i, r := range waiting {
		if r.xid != xid {
			continue
		}
		if i > 0 && r.op != jute.OpSetAuth {
			return r, badFrame("a reply to xid %d before the reply to xid %d, written earlier", xid, waiting[0].xid)
		}
		copy(waiting[1:i+1], waiting[:i]) // i == 0 in the usual case: no copy
		w.head++
		if w.head == len(w.inflight) {
			w.inflight, w.head = w.inflight[:0], 0
		}
		return r, nil
	}
	return wireReq{}, badFrame("a reply to xid %d, which no request on the connection has", xid)
}

// noteCreate notes the zxid of a create's reply, by the path it returned.
func (w *wireTap) noteCreate(body []byte, zxid int64) {
	n, ok := jute.Len(body)
	if !ok || n < 0 || n > maxWirePath {
		return
	}
	w.out.put(string(body[4:4+n]), zxid)
}
