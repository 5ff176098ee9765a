package recipe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestParseChildren(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		want []string
		ok   bool
	}{
		{"two", append(i32(2), append(jstr("a"), jstr("lock-0000000001")...)...), []string{"a", "lock-0000000001"}, true},
		{"none", i32(0), []string{}, true},
		{"null vector", i32(-1), nil, true},
		{"empty name", append(i32(1), jstr("")...), []string{""}, true},
		{"no count", []byte{0, 0}, nil, false},
		{"count past the body", append(i32(3), jstr("a")...), nil, false},
		{"name past the body", append(i32(1), append(i32(9), 'x')...), nil, false},
		{"negative length", append(i32(1), i32(-2)...), nil, false},
		{"huge count", i32(1 << 30), nil, false},
	} {
		got, err := parseChildren(tc.body)
		if tc.ok != (err == nil) || (tc.ok && !slices.Equal(got, tc.want)) {
			t.Errorf("%s: parseChildren = %q, %v; want %q, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
		if !tc.ok && !errors.Is(err, errMalformedReply) {
			t.Errorf("%s: error %v is not errMalformedReply", tc.name, err)
		}
	}
}

// A create's reply is the node's path; a getData's, the data then a stat.
func TestParsePathAndData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   []byte
		want   string
		ok     bool
		dataOK bool // a negative length is null data, not a path
	}{
		{"path", jstr("/a/lock-0000000001"), "/a/lock-0000000001", true, true},
		{"path and more", append(jstr("/x"), 1, 2), "/x", true, true},
		{"empty", jstr(""), "", true, true},
		{"no length", []byte{0, 0, 0}, "", false, false},
		{"past the body", append(i32(9), 'x'), "", false, false},
		{"negative length", i32(-3), "", false, true},
	} {
		call := &directCall{body: tc.body}
		got, err := call.path()
		if tc.ok != (err == nil) || got != tc.want || (!tc.ok && !errors.Is(err, errMalformedReply)) {
			t.Errorf("%s: path = %q, %v; want %q, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
		data, err := call.data()
		if tc.dataOK != (err == nil) || string(data) != tc.want {
			t.Errorf("%s: data = %q, %v; want %q, ok %v", tc.name, data, err, tc.want, tc.dataOK)
		}
	}
	if data, err := (&directCall{body: i32(-1)}).data(); data != nil || err != nil {
		t.Errorf("null data = %q, %v; want nil, nil", data, err)
	}
	failed := &directCall{err: zk.ErrNoNode, body: jstr("/x")}
	if _, err := failed.path(); err != zk.ErrNoNode {
		t.Errorf("failed create: %v", err)
	}
	if _, err := failed.data(); err != zk.ErrNoNode {
		t.Errorf("failed read: %v", err)
	}
}

func TestReplyError(t *testing.T) {
	for code, want := range map[int32]error{0: nil, -101: zk.ErrNoNode, -103: zk.ErrBadVersion,
		-110: zk.ErrNodeExists, -111: zk.ErrNotEmpty, -112: zk.ErrSessionExpired, -102: zk.ErrNoAuth} {
		if got := replyError(code); got != want {
			t.Errorf("replyError(%d) = %v, want %v", code, got, want)
		}
	}
	if err := replyError(-999); !errors.Is(err, zk.ErrUnknown) {
		t.Errorf("replyError(-999) = %v, want ErrUnknown", err)
	}
}

// The tap answers direct requests from the replies however the server's
// bytes are split into reads, with go-zookeeper's replies (creates among
// them) interleaved, and fails the ones still waiting when the connection
// fails. A client with a credential takes no direct request on a new
// connection until go-zookeeper has had it accepted again: go-zookeeper
// v1.0.4 sends it, first, as a setAuth request with an ordinary xid.
func TestDirectReplies(t *testing.T) {
	connectReq := frame(i32(0), i64(1<<32), i32(4000), i64(0), jstr("pw"))
	connectResp := frame(i32(0), i32(4000), i64(0x1234), jstr("password"))
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		var z createZxids
		var creds atomic.Int32
		creds.Store(1) // a credential was accepted on an earlier connection
		var broke []string
		w := wireTap{out: &z, creds: &creds, broke: func(r string) { broke = append(broke, r) }, lastXid: 40}
		if _, ok := w.expectReply(); ok {
			t.Fatal("a direct request was taken before the connect request was even written")
		}
		w.noteWrite(connectReq)
		w.noteRead(connectResp)
		if _, ok := w.expectReply(); ok {
			t.Fatal("a client with credentials took a direct request before go-zookeeper sent them again")
		}
		w.noteWrite(request(41, opSetAuth, i32(0), jstr("digest"), jstr("u:p")))
		if _, ok := w.expectReply(); ok {
			t.Fatal("a direct request was taken while the credentials were not yet accepted")
		}
		w.noteRead(reply(41, 0, 0))
		listCall, ok := w.expectReply()
		if !ok {
			t.Fatal("no direct request once the credentials were accepted")
		}
		w.noteWrite(request(42, opCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3)))
		list := listCall.xid
		if d := uint32(list-41) & xidMask; d < directXidGap/2 || d > directXidGap*3/2 || !w.isDirect(list) || w.isDirect(42) {
			t.Fatalf("direct xid %d is not far from go-zookeeper's 41", list)
		}
		delCall, _ := w.expectReply()
		goneCall, _ := w.expectReply()
		lateCall, _ := w.expectReply()
		leftCall, _ := w.expectReply()
		createCall, _ := w.expectReply()
		dataCall, _ := w.expectReply()
		del, gone, late, left := delCall.xid, goneCall.xid, lateCall.xid, leftCall.xid
		w.forget(lateCall) // its caller stopped waiting
		for _, x := range []int32{list, del, gone, late} {
			w.noteDirectWrite(request(x, opGetChildren, jstr("/a"), []byte{0}))
		}
		w.noteDirectWrite(request(createCall.xid, opCreate, jstr("/a/_c_y-lock-"), jstr(""), i32(0), i32(3)))
		w.noteDirectWrite(request(dataCall.xid, opGetData, jstr("/a"), []byte{0}))
		w.noteDirectWrite(request(left, opGetChildren, jstr("/a"), []byte{0}))
		var stream []byte
		for _, r := range [][]byte{
			reply(42, 0x100000008, 0, jstr("/a/_c_x-lock-0000000003")),
			reply(list, 0x100000008, 0, i32(2), jstr("lock-0000000001"), jstr("lock-0000000002")),
			reply(-1, -1, 0, i32(2), i32(3), jstr("/a/lock-0000000001")), // watch event
			reply(del, 0x100000009, 0),
			reply(gone, 0x100000009, -101),
			reply(late, 0x100000009, 0, i32(1), jstr("x")),
			reply(createCall.xid, 0x10000000a, 0, jstr("/a/_c_y-lock-0000000004")),
			reply(dataCall.xid, 0x10000000a, 0, jstr("abc"), make([]byte, 68)), // data, then its stat
		} {
			stream = append(stream, r...)
		}
		for rest := stream; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 30))
			if trial == 0 {
				n = len(rest)
			}
			w.noteRead(rest[:n])
			rest = rest[n:]
		}
		if len(broke) > 0 {
			t.Fatalf("trial %d: the tap found the wire broken: %q", trial, broke)
		}
		if r := answered(t, listCall); r.err != nil {
			t.Fatalf("trial %d: listing: %v", trial, r.err)
		} else if names, err := parseChildren(r.body); err != nil || !slices.Equal(names, []string{"lock-0000000001", "lock-0000000002"}) {
			t.Fatalf("trial %d: listing %q, %v", trial, names, err)
		}
		if r := answered(t, delCall); r.err != nil || len(r.body) != 0 {
			t.Fatalf("trial %d: delete: %v, body %q", trial, r.err, r.body)
		}
		if r := answered(t, goneCall); !errors.Is(r.err, zk.ErrNoNode) {
			t.Fatalf("trial %d: missing node: %v", trial, r.err)
		}
		if r := answered(t, createCall); r.zxid != 0x10000000a {
			t.Fatalf("trial %d: direct create's zxid %x", trial, r.zxid)
		} else if p, err := r.path(); err != nil || p != "/a/_c_y-lock-0000000004" {
			t.Fatalf("trial %d: direct create: %q, %v", trial, p, err)
		}
		if _, ok := z.take("/a/_c_y-lock-0000000004"); ok {
			t.Fatalf("trial %d: a direct create was noted for go-zookeeper's Create", trial)
		}
		if d, err := answered(t, dataCall).data(); err != nil || string(d) != "abc" {
			t.Fatalf("trial %d: direct read: %q, %v", trial, d, err)
		}
		if isDone(lateCall) {
			t.Fatalf("trial %d: a forgotten request was answered", trial)
		}
		if zx, ok := z.take("/a/_c_x-lock-0000000003"); !ok || zx != 0x100000008 {
			t.Fatalf("trial %d: create zxid %x, %v", trial, zx, ok)
		}
		if isDone(leftCall) {
			t.Fatalf("trial %d: a request with no reply was answered: %v", trial, leftCall.err)
		}
		w.failDirect()
		if r := answered(t, leftCall); !errors.Is(r.err, zk.ErrConnectionClosed) {
			t.Fatalf("trial %d: after the connection failed: %v", trial, r.err)
		}
		if _, ok := w.expectReply(); ok {
			t.Fatalf("trial %d: a failed connection took a direct request", trial)
		}
	}
}

// The credentials a client has are those whose setAuth go-zookeeper had
// accepted on one connection, the most of any: credentials added through
// Conn().AddAuth count as WithDigestAuth's do.
func TestDirectCredentialsCount(t *testing.T) {
	var creds atomic.Int32
	connect := func() *wireTap {
		w := &wireTap{out: &createZxids{}, creds: &creds}
		w.noteWrite(frame(i32(0), i64(0), i32(4000), i64(0), jstr("pw")))
		w.noteRead(frame(i32(0), i32(4000), i64(0x1234), jstr("password")))
		return w
	}
	w := connect()
	if _, ok := w.expectReply(); !ok {
		t.Fatal("a client without credentials took no direct request once connected")
	}
	for xid := int32(1); xid <= 2; xid++ { // two AddAuth calls
		w.noteWrite(request(xid, opSetAuth, i32(0), jstr("digest"), jstr("u:p")))
		w.noteRead(reply(xid, 0, 0))
	}
	w.noteWrite(request(3, opSetAuth, i32(0), jstr("digest"), jstr("bad")))
	w.noteRead(reply(3, 0, -115)) // refused: go-zookeeper keeps no credential
	if creds.Load() != 2 {
		t.Fatalf("credentials counted %d, want 2", creds.Load())
	}
	w = connect()
	for xid := int32(4); xid <= 5; xid++ {
		if _, ok := w.expectReply(); ok {
			t.Fatalf("a direct request taken with %d of 2 credentials sent again", xid-4)
		}
		w.noteWrite(request(xid, opSetAuth, i32(0), jstr("digest"), jstr("u:p")))
		w.noteRead(reply(xid, 0, 0))
	}
	if _, ok := w.expectReply(); !ok {
		t.Fatal("no direct request with both credentials sent again")
	}
}

// A connect response that says the session expired opens the connection
// to no direct request: go-zookeeper (v1.0.4) leaves that connection
// without closing it, and a request on it would wait for ever.
func TestDirectExpiredConnect(t *testing.T) {
	var told int64 = -1
	w := wireTap{out: &createZxids{}, connect: func(_ int, _ int32, session int64) { told = session }}
	w.noteWrite(frame(i32(0), i64(0), i32(4000), i64(0x1234), jstr("pw")))
	w.noteRead(frame(i32(0), i32(0), i64(0), jstr("")))
	if told != 0 {
		t.Fatalf("connect told of session %d, want 0", told)
	}
	if _, ok := w.expectReply(); ok {
		t.Fatal("a connection whose session expired took a direct request")
	}
}

// The tap finds each way the wire can break what direct requests rest on,
// and nothing in what go-zookeeper and the server do.
func TestWireGuard(t *testing.T) {
	connectReq := frame(i32(0), i64(0), i32(4000), i64(0), jstr("pw"))
	connectResp := frame(i32(0), i32(4000), i64(0x1234), jstr("password"))
	get := func(xid int32) []byte { return request(xid, opGetData, jstr("/a"), []byte{0}) }
	type step struct {
		write, direct, read []byte
	}
	for _, tc := range []struct {
		name  string
		steps []step
		broke string // a word of the reason; "" for none
	}{
		{"in order", []step{{write: get(1)}, {write: get(2)}, {read: reply(1, 5, 0)}, {read: reply(2, 5, 0)}}, ""},
		{"pings and events", []step{{write: request(-2, 11)}, {read: reply(-1, -1, 0, i32(2), i32(3), jstr("/a"))}, {read: reply(-2, 5, 0)}}, ""},
		{"setAuth answered first", []step{{write: get(1)}, {write: request(2, opSetAuth, i32(0), jstr("digest"), jstr("u:p"))}, {read: reply(2, 0, 0)}, {read: reply(1, 5, 0)}}, ""},
		{"written behind a later xid", []step{{write: get(2)}, {write: get(1)}, {read: reply(2, 5, 0)}, {read: reply(1, 5, 0)}}, ""},
		{"direct between", []step{{write: get(1)}, {direct: get(1 << 30)}, {write: get(2)}, {read: reply(1, 5, 0)}, {read: reply(1<<30, 5, 0)}, {read: reply(2, 5, 0)}}, ""},
		{"a frame in two writes", []step{{write: get(1)[:9]}}, "not one whole request"},
		{"two frames in one write", []step{{write: append(get(1), get(2)...)}}, "not one whole request"},
		{"xid far ahead", []step{{write: get(1)}, {write: get(1 << 29)}}, "after xid"},
		{"xid reused", []step{{write: get(1)}, {write: get(1)}}, "after xid"},
		{"odd negative xid", []step{{write: request(-9, 11)}}, "xid -9"},
		{"replies out of order", []step{{write: get(1)}, {write: get(2)}, {read: reply(2, 5, 0)}}, "came before"},
		{"reply to nothing", []step{{write: get(1)}, {read: reply(7, 5, 0)}}, "no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var broke []string
			w := wireTap{out: &createZxids{}, broke: func(r string) { broke = append(broke, r) }}
			w.noteWrite(connectReq)
			w.noteRead(connectResp)
			for _, s := range tc.steps {
				switch {
				case s.write != nil:
					w.noteWrite(s.write)
				case s.direct != nil:
					w.noteDirectWrite(s.direct)
				default:
					w.noteRead(s.read)
				}
			}
			switch {
			case tc.broke == "" && len(broke) > 0:
				t.Fatalf("found broken: %q", broke)
			case tc.broke == "":
				if !w.takesDirect() {
					t.Fatal("takes no direct request")
				}
			case len(broke) != 1 || !strings.Contains(broke[0], tc.broke):
				t.Fatalf("broke %q, want once with %q", broke, tc.broke)
			case w.takesDirect():
				t.Fatal("a broken connection takes direct requests")
			}
		})
	}
}

// A connection failing while a direct reply's body is being read fails
// that request too.
func TestDirectFailsMidReply(t *testing.T) {
	w := wireTap{out: &createZxids{}}
	w.noteWrite(frame(i32(0), i64(0), i32(4000), i64(0), jstr("pw")))
	w.noteRead(frame(i32(0), i32(4000), i64(0x1234), jstr("password")))
	call, ok := w.expectReply()
	if !ok {
		t.Fatal("no direct request")
	}
	r := reply(call.xid, 7, 0, i32(1), jstr("lock-0000000001"))
	w.noteRead(r[:len(r)-3])
	w.failDirect()
	if got := answered(t, call); !errors.Is(got.err, zk.ErrConnectionClosed) {
		t.Fatalf("reply = %v, want ErrConnectionClosed", got)
	}
	w.noteRead(r[len(r)-3:]) // nobody is answered twice
}

// answered returns call once it is answered; the tap answers as it reads,
// so it must be already.
func answered(t *testing.T, call *directCall) *directCall {
	t.Helper()
	if !isDone(call) {
		t.Fatalf("direct request %d not answered", call.xid)
	}
	return call
}

func isDone(call *directCall) bool {
	select {
	case <-call.done:
		return true
	default:
		return false
	}
}

// Direct requests' xids stay a billion away from go-zookeeper's, wherever
// its counter is (it runs on across connections and wraps at 2^31).
func TestDirectXids(t *testing.T) {
	for _, last := range []int32{0, 1, 1<<30 - 3, 1<<31 - 2} {
		w := wireTap{out: &createZxids{}, lastXid: last, connected: true}
		for range 3 {
			call, ok := w.expectReply()
			if !ok {
				t.Fatal("no direct request")
			}
			if call.xid < 0 || !w.isDirect(call.xid) {
				t.Fatalf("after go-zookeeper's %d: direct xid %d", last, call.xid)
			}
			for next := range int32(100000) {
				if x := (last + next) & xidMask; x == call.xid || w.isDirect(x) {
					t.Fatalf("after go-zookeeper's %d: its xid %d taken as direct (%d)", last, x, call.xid)
				}
			}
		}
	}
}

// An error mapped to ErrClosed once (by a direct request's caller, say) is
// not wrapped again by a caller above it that maps errors too.
func TestMapClosedOnce(t *testing.T) {
	c := &Client{closed: true}
	once := c.mapClosed(zk.ErrConnectionClosed)
	if !errors.Is(once, ErrClosed) || !errors.Is(once, zk.ErrConnectionClosed) {
		t.Fatalf("mapClosed = %v, want ErrClosed wrapping the connection loss", once)
	}
	if twice := c.mapClosed(once); twice != once {
		t.Fatalf("mapped again: %q, was %q", twice, once)
	}
}

// writeFails is a connection whose writes fail.
type writeFails struct{ scriptedConn }

func (w *writeFails) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// A failed read or write of the connection makes it take no more direct
// requests at once, but the ones waiting on it fail only when go-zookeeper
// closes it, after its send loop has stopped (so that a caller retrying at
// once does not go into that loop).
func TestDirectFailWithConnection(t *testing.T) {
	for _, how := range []string{"read", "write"} {
		wc := &writeFails{scriptedConn{err: io.EOF}}
		tc := &trackedConn{Conn: wc, tap: wireTap{wrote: true, readFirst: true, connected: true}, wturn: make(chan struct{}, 1)}
		call, ok := tc.tap.expectReply()
		if !ok {
			t.Fatal("the connection took no direct request")
		}
		switch how {
		case "read":
			if _, err := tc.Read(make([]byte, 8)); err != io.EOF {
				t.Fatalf("read: %v, want EOF", err)
			}
		case "write":
			if err := tc.writeDirect(context.Background(), request(call.xid, opDelete, jstr("/a/b"), i32(-1))); err != nil {
				t.Fatal(err)
			}
		}
		if !wc.closed {
			t.Fatalf("after a failed %s: the connection was not closed", how)
		}
		if _, ok := tc.tap.expectReply(); ok {
			t.Fatalf("after a failed %s: a direct request was taken", how)
		}
		if isDone(call) {
			t.Fatalf("after a failed %s: a waiting request failed before the connection was closed: %v", how, call.err)
		}
		tc.Close()
		if r := answered(t, call); !errors.Is(r.err, zk.ErrConnectionClosed) {
			t.Fatalf("after a failed %s and Close: %v", how, r.err)
		}
	}
}

// recordingConn is a connection that keeps what is written on it.
type recordingConn struct {
	scriptedConn
	mu      sync.Mutex
	written []byte
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, p...)
	return len(p), nil
}

// A direct write waits while another writer has the connection, and writes
// once its turn comes; a caller whose context ends while it waits writes
// nothing and gets its context's error.
func TestDirectWriteWaitsItsTurn(t *testing.T) {
	rc := &recordingConn{}
	tc := &trackedConn{Conn: rc, tap: wireTap{wrote: true, readFirst: true, connected: true}, wturn: make(chan struct{}, 1)}
	frame := request(1<<30, opDelete, jstr("/a/b"), i32(-1))

	tc.wturn <- struct{}{} // another writer has the connection
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() { gaveUp <- tc.writeDirect(ctx, frame) }()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller whose context ended while it waited: %v, want context.Canceled", err)
	}

	wrote := make(chan error)
	go func() { wrote <- tc.writeDirect(context.Background(), frame) }()
	select {
	case err := <-wrote:
		t.Fatalf("the direct write did not wait for its turn: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	rc.mu.Lock()
	if len(rc.written) != 0 {
		t.Fatalf("%d bytes written while another writer had the connection", len(rc.written))
	}
	rc.mu.Unlock()
	<-tc.wturn // the other writer is done
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rc.written, frame) {
		t.Fatalf("written %x, want the one frame %x", rc.written, frame)
	}
	select {
	case tc.wturn <- struct{}{}: // the turn was given back
	default:
		t.Fatal("the direct write kept the connection's turn")
	}
}

// A direct reply read from the connection in the same read as a watch
// event before it is handed over only once go-zookeeper has read the whole
// reply, so after it has handled the event, as its own replies are.
func TestDirectReplyAfterEarlierFrames(t *testing.T) {
	call := func(tc *trackedConn) *directCall {
		t.Helper()
		c, ok := tc.tap.expectReply()
		if !ok {
			t.Fatal("no direct request")
		}
		tc.tap.noteDirectWrite(request(c.xid, opGetChildren, jstr("/a"), []byte{0}))
		return c
	}
	connectResp := frame(i32(0), i32(4000), i64(0x1234), jstr("password"))
	event := reply(-1, -1, 0, i32(2), i32(3), jstr("/a/lock-0000000001"))
	setup := func() (*trackedConn, *directCall) {
		sc := &scriptedConn{} // no error: each read finds what the test put there
		tc := &trackedConn{Conn: sc, c: &Client{}, tap: wireTap{out: &createZxids{}, hold: true}, wturn: make(chan struct{}, 1)}
		tc.tap.noteWrite(frame(i32(0), i64(0), i32(4000), i64(0), jstr("pw")))
		sc.reads = [][]byte{connectResp}
		readFrame(t, tc) // the connect response
		return tc, call(tc)
	}

	tc, c := setup()
	sc := tc.Conn.(*scriptedConn)
	sc.reads = [][]byte{bytes.Join([][]byte{event, reply(c.xid, 7, 0, i32(1), jstr("lock-0000000002"))}, nil)}
	readFrame(t, tc) // go-zookeeper reads the event: all of the read is in the tap
	if isDone(c) {
		t.Fatal("the direct reply was handed over before go-zookeeper read the event ahead of it")
	}
	readFrame(t, tc) // and the reply
	if r := answered(t, c); r.err != nil {
		t.Fatalf("direct reply: %v", r.err)
	}

	// A reply that came but that go-zookeeper has not read when the
	// connection closes stands: it is handed over, not failed.
	tc, c = setup()
	sc = tc.Conn.(*scriptedConn)
	sc.reads = [][]byte{bytes.Join([][]byte{event, reply(c.xid, 7, -101)}, nil)}
	readFrame(t, tc)
	if isDone(c) {
		t.Fatal("handed over before go-zookeeper read it")
	}
	tc.Close()
	if r := answered(t, c); !errors.Is(r.err, zk.ErrNoNode) {
		t.Fatalf("after Close: %v, want the reply's ErrNoNode", r.err)
	}
}

// readFrame reads one frame from tc as go-zookeeper does: its length, then
// the rest.
func readFrame(t *testing.T, tc *trackedConn) {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(tc, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[0])<<24|int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]))
	if _, err := io.ReadFull(tc, body); err != nil {
		t.Fatal(err)
	}
}

// A write of go-zookeeper's that fails ends the connection and is reported
// as done: told of the error, go-zookeeper v1.0.4 would answer the request
// twice (once with it, once when it fails the connection's requests), and
// its connection loop blocks on the second answer if the caller has not
// taken the first.
func TestWriteFailureEndsConnection(t *testing.T) {
	wc := &writeFails{}
	tc := &trackedConn{Conn: wc, tap: wireTap{wrote: true, readFirst: true, connected: true}, wturn: make(chan struct{}, 1)}
	req := request(7, opGetData, jstr("/a"), []byte{0})
	if n, err := tc.Write(req); n != len(req) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(req))
	}
	if !wc.closed {
		t.Fatal("the connection was not closed after its write failed")
	}
	if tc.tap.takesDirect() {
		t.Fatal("a connection whose write failed takes direct requests")
	}
}
