package recipe

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
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
	xidSetAuth = -4 // go-zookeeper's credentials

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
type wireTap struct {
	out     *createZxids
	written *createWrites // told of create requests as they are written

	// proof, if set, is told of every reply to one of our requests (the
	// connect request, pings included; not watch notifications) with the
	// time, by now, at which that request was written: the server was
	// alive then. now is a monotonic clock.
	proof func(sentAt int64)
	now   func() int64

	mu          sync.Mutex
	pending     map[int32]struct{} // xids of create requests awaiting a reply
	sent        map[int32]int64    // write time of every request awaiting a reply, by xid
	connectSent int64              // write time of the connect request
	wrote       bool               // the first frame (connect request) went out

	// Direct requests (see direct.go), under mu.
	direct    map[int32]*directCall // by xid, the direct requests waiting for a reply
	directSeq uint32                // direct requests made
	lastXid   int32                 // the last xid of a request go-zookeeper wrote
	loopWrote bool                  // go-zookeeper wrote more than the connect request and credentials
	connected bool                  // the connect response was read
	dead      bool                  // the connection failed or closed

	// Incoming stream state. The first frame is the connect response.
	readFirst bool
	hdr       [20]byte // length + reply header (xid, zxid, err)
	hdrN      int
	body      []byte // path reply of a create being collected
	bodyWant  int    // bytes of body still wanted (collected into body)
	skip      int    // bytes of the current frame still to skip
	xid       int32
	zxid      int64
	directXid int32 // the direct request whose reply body is being collected
	forDirect bool  // body is a direct request's reply
}

// noteWrite notes a frame written by go-zookeeper, which writes each
// request as one whole frame.
func (w *wireTap) noteWrite(p []byte) { w.noteFrame(p, false) }

// noteDirectWrite notes the frame of a direct request.
func (w *wireTap) noteDirectWrite(p []byte) { w.noteFrame(p, true) }

func (w *wireTap) noteFrame(p []byte, direct bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t int64
	if w.now != nil {
		t = w.now()
	}
	if !w.wrote {
		w.wrote = true // the connect request has no request header
		w.connectSent = t
		return
	}
	if len(p) < 12 || int(binary.BigEndian.Uint32(p[0:4])) != len(p)-4 {
		return
	}
	xid := int32(binary.BigEndian.Uint32(p[4:8]))
	if !direct {
		if xid >= 0 {
			w.lastXid = xid
		}
		if xid != xidSetAuth {
			w.loopWrote = true
		}
	}
	if w.sent == nil {
		w.sent = make(map[int32]int64)
	}
	if _, ok := w.sent[xid]; !ok || xid >= 0 {
		// Pings all carry one xid: the earliest unanswered counts.
		w.sent[xid] = t
	}
	switch int32(binary.BigEndian.Uint32(p[8:12])) {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL:
		if direct {
			break
		}
		if w.pending == nil {
			w.pending = make(map[int32]struct{})
		}
		w.pending[int32(binary.BigEndian.Uint32(p[4:8]))] = struct{}{}
		if w.written != nil {
			w.written.wrote(p[12:])
		}
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
		case w.bodyWant > 0:
			n := min(w.bodyWant, len(p))
			w.body = append(w.body, p[:n]...)
			w.bodyWant -= n
			p = p[n:]
			if w.bodyWant == 0 && w.forDirect {
				w.forDirect = false
				w.mu.Lock()
				w.answer(w.directXid, w.zxid, w.body, nil)
				w.mu.Unlock()
				w.body = nil // handed over
			} else if w.bodyWant == 0 {
				w.finishBody()
			}
		default:
			need := 20
			if !w.readFirst {
				need = 4 // the connect response: length, then skip it
			}
			n := copy(w.hdr[w.hdrN:need], p)
			w.hdrN += n
			p = p[n:]
			if w.hdrN == need {
				w.hdrN = 0
				w.frame()
			}
		}
	}
}

// frame handles a complete frame header in w.hdr.
func (w *wireTap) frame() {
	length := int(binary.BigEndian.Uint32(w.hdr[0:4]))
	if !w.readFirst {
		w.readFirst = true
		w.skip = length
		w.mu.Lock()
		sentAt := w.connectSent
		w.connected = true
		w.mu.Unlock()
		if w.proof != nil {
			w.proof(sentAt)
		}
		return
	}
	rest := length - 16
	if rest < 0 {
		rest = 0
	}
	w.xid = int32(binary.BigEndian.Uint32(w.hdr[4:8]))
	w.zxid = int64(binary.BigEndian.Uint64(w.hdr[8:16]))
	errCode := int32(binary.BigEndian.Uint32(w.hdr[16:20]))
	w.mu.Lock()
	_, isCreate := w.pending[w.xid]
	delete(w.pending, w.xid)
	sentAt, answered := w.sent[w.xid]
	delete(w.sent, w.xid)
	_, direct := w.direct[w.xid]
	if direct && (errCode != 0 || rest == 0) {
		w.answer(w.xid, w.zxid, nil, replyError(errCode))
		direct = false // answered: the frame is skipped
	}
	w.mu.Unlock()
	if answered && w.proof != nil {
		w.proof(sentAt)
	}
	if direct {
		w.directXid, w.forDirect = w.xid, true
		w.body = make([]byte, 0, min(rest, maxPrealloc))
		w.bodyWant = rest
		return
	}
	if !isCreate || errCode != 0 || rest < 4 || rest > 4+maxWirePath {
		w.skip = rest
		return
	}
	w.body = w.body[:0]
	w.bodyWant = rest
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
