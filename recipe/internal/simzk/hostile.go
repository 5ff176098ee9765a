package simzk

import (
	"fmt"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// A hostile wire: frames no correct server sends, as a broken server, a
// broken middlebox or an attacker on a plaintext link may send them. The
// model sends them on the host's connections when armed by
// Host.Hostile; each is sent once, on the first frame it fits.

// Hostile is a kind of bad frame the server can send.
type Hostile int

// The bad frames. Those named Before... go out just before the next frame
// the server sends on a connection of the host (a reply or a watch event,
// not a connect response); the others change a frame the server sends.
const (
	// BeforeShortEvent: 00000004 ffffffff, a frame shorter than a reply
	// header, with the xid of a watch event.
	BeforeShortEvent Hostile = iota + 1
	// BeforeShortHeader: 0000000c and 12 bytes with xid -1: a reply header
	// without its error code.
	BeforeShortHeader
	// BeforeShortUnknown: 00000004 00003039, a short frame with an xid
	// the client never sent.
	BeforeShortUnknown
	// BeforeUnknownXid: a well-formed reply header (16 bytes) for an xid
	// the client has not sent.
	BeforeUnknownXid
	// BeforeOversized: a frame announcing 0xfffffff0 bytes; what follows
	// is read as its body.
	BeforeOversized
	// BeforeBadString: a watch event whose path's length runs past the
	// frame.
	BeforeBadString
	// Truncated: the next frame is cut in the middle, and the server
	// closes the connection.
	Truncated
	// BadListing: the next getChildren or getChildren2 reply announces
	// 2^31-1 children.
	BadListing
	// ZxidBack: the next reply to a request (xid > 0) on a connection
	// that has carried a reply with a later zxid carries zxid 1: below a
	// zxid the client has read in the same session. (The first replies
	// of a session owe nothing to an earlier session's: a new session may
	// be served by a follower behind what the last one saw.)
	ZxidBack
	// ConnectTimeout0, ConnectTimeoutNeg and ConnectTimeout1ms: the next
	// connect response on the host resumes its session granting a
	// session timeout of 0, -1 or 1 ms.
	ConnectTimeout0
	ConnectTimeoutNeg
	ConnectTimeout1ms
	// ConnectPasswd: the next connect response carries a password of
	// 4 KiB (ZooKeeper's are 16 bytes).
	ConnectPasswd
)

var hostileNames = map[Hostile]string{
	BeforeShortEvent: "short-event", BeforeShortHeader: "short-header", BeforeShortUnknown: "short-unknown",
	BeforeUnknownXid: "unknown-xid", BeforeOversized: "oversized", BeforeBadString: "bad-string",
	Truncated: "truncated", BadListing: "bad-listing", ZxidBack: "zxid-back",
	ConnectTimeout0: "connect-timeout-0", ConnectTimeoutNeg: "connect-timeout-neg",
	ConnectTimeout1ms: "connect-timeout-1ms", ConnectPasswd: "connect-passwd",
}

// String returns the name of the kind, as the simulation's schedules
// name it ("short-event").
func (k Hostile) String() string {
	if s, ok := hostileNames[k]; ok {
		return s
	}
	return "hostile?"
}

// Hostiles returns every kind, in order.
func Hostiles() []Hostile {
	out := make([]Hostile, 0, len(hostileNames))
	for k := BeforeShortEvent; k <= ConnectPasswd; k++ {
		out = append(out, k)
	}
	return out
}

// connect reports whether the kind changes a connect response.
func (k Hostile) connect() bool { return k >= ConnectTimeout0 && k <= ConnectPasswd }

// before reports whether the kind is a frame sent before the next one.
func (k Hostile) before() bool { return k >= BeforeShortEvent && k <= BeforeBadString }

// Hostile arms a bad frame of kind k on the host's connections, for the
// next span: it is sent once, on the first frame it fits, and forgotten
// if none came within span. A connect kind waits for the host's next
// connect; the caller may Drop the host's connections to bring one on.
func (h *Host) Hostile(k Hostile, span time.Duration) {
	h.mu.Lock()
	h.hostile = append(h.hostile, k)
	h.mu.Unlock()
	h.w.after(span, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, o := range h.hostile {
			if o == k {
				h.hostile = append(h.hostile[:i], h.hostile[i+1:]...)
				return
			}
		}
	})
}

// takeHostile reports, and forgets, the first armed kind that fits.
func (h *Host) takeHostile(fits func(Hostile) bool) (Hostile, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range h.hostile {
		if fits(k) {
			h.hostile = append(h.hostile[:i], h.hostile[i+1:]...)
			h.hostileSent++
			return k, true
		}
	}
	return 0, false
}

// HostileSent returns how many bad frames the server sent the host.
func (h *Host) HostileSent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hostileSent
}

// beforeFrame returns the bytes of a Before... kind.
func beforeFrame(k Hostile, xid int32) []byte {
	var b []byte
	switch k {
	case BeforeShortEvent:
		b = jute.AppendInt32(jute.AppendInt32(b, 4), -1)
	case BeforeShortHeader:
		b = jute.AppendInt32(jute.AppendInt32(b, 12), -1)
		b = jute.AppendInt64(b, 5)
	case BeforeShortUnknown:
		b = jute.AppendInt32(jute.AppendInt32(b, 4), 0x3039)
	case BeforeUnknownXid:
		// An xid far past any the client sent (go-zookeeper counts up
		// from 1; the simulation sends a few thousand requests at most).
		b, at := jute.BeginFrame(b)
		b = jute.ReplyHeader{Xid: xid + 1<<30, Zxid: 1}.Append(b)
		return jute.EndFrame(b, at)
	case BeforeOversized:
		b = jute.AppendInt32(b, int32(-16)) // 0xfffffff0
		b = jute.ReplyHeader{Xid: 1, Zxid: 1}.Append(b)
	case BeforeBadString:
		b, at := jute.BeginFrame(b)
		b = jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1}.Append(b)
		b = jute.AppendInt32(jute.AppendInt32(b, 4), 3) // type, state
		b = jute.AppendInt32(b, 1<<20)                  // the path's length
		b = append(b, '/')
		return jute.EndFrame(b, at)
	}
	return b
}

// hostileConnect returns the connect response of a connect kind, for
// the session the server resumed or started.
func hostileConnect(k Hostile, resp jute.ConnectResponse) []byte {
	switch k {
	case ConnectTimeout0:
		resp.Timeout = 0
	case ConnectTimeoutNeg:
		resp.Timeout = -1
	case ConnectTimeout1ms:
		resp.Timeout = 1
	case ConnectPasswd:
		resp.Passwd = make([]byte, 4<<10)
	}
	b, at := jute.BeginFrame(nil)
	return jute.EndFrame(resp.Append(b), at)
}

// badListing makes a listing's body announce 2^31-1 names.
func badListing(body func([]byte) []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		start := len(b)
		b = body(b)
		copy(b[start:], jute.AppendInt32(nil, 1<<31-1))
		return b
	}
}

// hostileGrace is how long a client may keep a connection once a bad
// frame has reached it: the client must end the connection when it reads
// the frame, and in virtual time that takes no time at all.
const hostileGrace = 100 * time.Millisecond

// awaitHangUp checks, once the bad frame of kind k just written on the
// server end e has reached the client (later if a partition holds it up),
// that the client has closed its end within hostileGrace. Under World.mu.
func (w *World) awaitHangUp(h *Host, e *end, k Hostile) {
	e.out.mu.Lock()
	due := e.out.lastDue
	e.out.mu.Unlock()
	var check func(tries int)
	check = func(tries int) {
		select {
		case <-e.peer.closed:
			return
		default:
		}
		now := time.Now()
		e.out.mu.Lock()
		reset := e.out.reset
		var head time.Time
		if len(e.out.segs) > 0 {
			head = e.out.segs[0].due
		}
		e.out.mu.Unlock()
		if reset {
			return // the connection broke first
		}
		if !head.IsZero() && head.After(now.Add(-hostileGrace)) && tries < 100 {
			// Bytes in flight (a partition holds them up): wait until
			// they have reached the client.
			w.after(head.Sub(now)+hostileGrace, func() { check(tries + 1) })
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.closed {
			w.kept = append(w.kept, fmt.Sprintf("%s: the connection still open %v after a bad frame (%v) was due",
				h.name, now.Sub(due), k))
		}
	}
	w.after(max(0, time.Until(due))+hostileGrace, func() { check(0) })
}

// HostileKept returns the connections a client kept open after a bad
// frame reached it (Host.Hostile): a client must end the connection at
// the first bad frame.
func (w *World) HostileKept() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.kept)
}
