package transport

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// testMaxFrame is recipe.DefaultMaxFrame, the client's default frame limit.
const testMaxFrame = 8 << 20

// countUp counts what the transport reports up, and drops it.
type countUp struct{ refused atomic.Int64 }

func (u *countUp) SessionEvent(zk.State, int64, string) {}
func (u *countUp) NodeEvent(zk.Event)                   {}
func (u *countUp) Alive(time.Duration)                  {}
func (u *countUp) Rewatched()                           {}
func (u *countUp) RefusedFrame(error)                   { u.refused.Add(1) }

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func frame(parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(out, body...)
}

func i32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func jstr(s string) []byte {
	return append(i32(int32(len(s))), s...)
}

// request builds a client request frame: xid, opcode, payload.
func request(xid, op int32, payload ...[]byte) []byte {
	return frame(append([][]byte{i32(xid), i32(op)}, payload...)...)
}

// reply builds a server reply frame: xid, zxid, err, body.
func reply(xid int32, zxid int64, errCode int32, body ...[]byte) []byte {
	return frame(append([][]byte{i32(xid), i64(zxid), i32(errCode)}, body...)...)
}

// tapConn returns a trackedConn over a connection that returns reads one
// by one (each maybe in pieces of at most split bytes, 0: whole), then
// err, with writes noted as go-zookeeper's.
func tapConn(reads [][]byte, err error, writes ...[]byte) (*trackedConn, *scriptedConn) {
	c := New(Config{SessionTimeout: 2 * time.Second, MaxFrame: testMaxFrame}, &countUp{})
	sc := &scriptedConn{reads: reads, err: err}
	tc := &trackedConn{Conn: sc, t: c, tap: wireTap{out: &c.zxids, zxids: &c.sessionZxid, limit: c.cfg.MaxFrame}}
	for _, w := range writes {
		tc.tap.noteWrite(w)
	}
	return tc, sc
}

// readFrames reads frames from r as go-zookeeper does (the length, then
// the frame, each with io.ReadFull) until an error, and returns them.
func readFrames(r io.Reader) (frames [][]byte, err error) {
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return frames, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return frames, err
		}
		frames = append(frames, append(hdr[:], body...))
	}
}

var (
	connectReq  = frame(i32(0), i64(1<<32), i32(4000), i64(0), jstr("0123456789abcdef"))
	connectResp = frame(i32(0), i32(4000), i64(0x1234), jstr("0123456789abcdef"))
)

// split cuts b into pieces of random lengths from 1 to at most n.
func split(rng *rand.Rand, b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		k := 1 + rng.IntN(min(len(b), n))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

// The tap finds the zxid of every successful create however the server's
// bytes are split into reads, and nothing else; every frame reaches the
// reader whole and unchanged.
func TestWireTap(t *testing.T) {
	writes := [][]byte{
		connectReq,
		request(1, jute.OpCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3)),
		request(2, jute.OpGetChildren, jstr("/a"), []byte{0}),
		request(3, jute.OpCreate, jstr("/a/_c_y-lock-"), jstr(""), i32(0), i32(3)), // fails below
		request(-2, jute.OpPing),
		request(4, jute.OpCreate2, jstr("/b/n"), jstr(""), i32(0), i32(0)),
		request(5, jute.OpGetData, jstr("/a/_c_x-lock-0000000001"), []byte{1}),
		request(6, jute.OpSetAuth, i32(0), jstr("digest"), jstr("u:p")), // answered first
	}
	stat := make([]byte, 68)
	reads := [][]byte{
		connectResp,
		reply(-1, -1, 0, i32(4), i32(3), jstr("/a")), // watch event
		reply(1, 0x100000007, 0, jstr("/a/_c_x-lock-0000000001")),
		reply(2, 0x100000008, 0, i32(2), jstr("x"), jstr("y")),
		reply(3, 0x100000008, -110),
		reply(-2, 0x100000008, 0), // ping
		reply(4, 0x10000000a, 0, jstr("/b/n"), stat),
		reply(6, 0, 0),
		reply(5, 0x10000000a, 0, jstr("/a/_c_y-lock-0000000009"), stat), // not a create
	}
	var stream []byte
	for _, r := range reads {
		stream = append(stream, r...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		pieces := [][]byte{stream}
		if trial > 0 {
			pieces = split(rng, stream, 40)
		}
		tc, _ := tapConn(pieces, io.EOF, writes...)
		got, err := readFrames(tc)
		if err != io.EOF || len(got) != len(reads) {
			t.Fatalf("trial %d: read %d frames, then %v; want %d, then EOF", trial, len(got), err, len(reads))
		}
		for i := range got {
			if string(got[i]) != string(reads[i]) {
				t.Fatalf("trial %d: frame %d changed", trial, i)
			}
		}
		z := &tc.t.zxids
		if zx, ok := z.take("/a/_c_x-lock-0000000001"); !ok || zx != 0x100000007 {
			t.Fatalf("trial %d: create zxid = %x, %v", trial, zx, ok)
		}
		if zx, ok := z.take("/b/n"); !ok || zx != 0x10000000a {
			t.Fatalf("trial %d: create2 zxid = %x, %v", trial, zx, ok)
		}
		if _, ok := z.take("/a/_c_y-lock-0000000009"); ok {
			t.Fatalf("trial %d: a getData reply was taken for a create", trial)
		}
		if len(z.m) != 0 || len(tc.tap.inflight) != 0 {
			t.Fatalf("trial %d: left over %v %v", trial, z.m, tc.tap.inflight)
		}
	}
}

// Each bad frame ends the connection: the reader gets the frames before it
// whole, then the error alone, never a byte of the bad frame; the
// connection is closed and the refusal counted.
func TestTapRefuses(t *testing.T) {
	stat := make([]byte, 68)
	getChildren := request(1, jute.OpGetChildren2, jstr("/a"), []byte{0})
	getData := request(1, jute.OpGetData, jstr("/a"), []byte{0})
	multi := request(1, jute.OpMulti)
	ok := reply(7, 0x10, 0) // answers a delete (xid 7) written first
	del := request(7, jute.OpDelete, jstr("/a"), i32(-1))
	unhex := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	for _, tc := range []struct {
		name   string
		writes [][]byte // after the connect request and the delete
		first  []byte   // replaces the connect response
		bad    []byte
		why    string
	}{
		{name: "short watch event", bad: unhex("00000004ffffffff"), why: "shorter than a reply header"},
		{name: "12-byte watch event", bad: unhex("0000000cffffffff0000000000000000"), why: "shorter than a reply header"},
		{name: "short unknown xid", bad: unhex("0000000400003039"), why: "shorter than a reply header"},
		{name: "unknown xid", bad: reply(0x3039, 0x10, 0), why: "which no request on the connection has"},
		{name: "other negative xid", bad: reply(-4, 0, 0), why: "xid -4"},
		{name: "out of order", writes: [][]byte{getData, request(2, jute.OpSync, jstr("/a"))}, bad: reply(2, 0x10, 0, jstr("/a")), why: "before the reply to xid"},
		{name: "oversized", bad: unhex("fffffff0"), why: "over the limit"},
		{name: "length with the top bit", bad: unhex("80000000"), why: "over the limit"},
		{name: "children count", writes: [][]byte{getChildren}, bad: reply(1, 0x10, 0, i32(1<<31-1), jstr("x"), stat), why: "does not parse"},
		{name: "children null", writes: [][]byte{getChildren}, bad: reply(1, 0x10, 0, i32(-1), stat), why: "does not parse"},
		{name: "string past the frame", writes: [][]byte{getChildren}, bad: reply(1, 0x10, 0, i32(1), i32(1000), stat), why: "does not parse"},
		{name: "data past the frame", writes: [][]byte{getData}, bad: reply(1, 0x10, 0, i32(70000), stat), why: "does not parse"},
		{name: "stat cut", writes: [][]byte{getData}, bad: reply(1, 0x10, 0, jstr("x"), stat[:60]), why: "does not parse"},
		{name: "multi without end", writes: [][]byte{multi}, bad: reply(1, 0x10, 0, i32(jute.OpDelete), []byte{0}, i32(0)), why: "does not parse"},
		{name: "multi cut in its flag", writes: [][]byte{multi}, bad: reply(1, 0x10, 0, i32(-1)), why: "does not parse"},
		{name: "watch event path", bad: reply(-1, -1, 0, i32(4), i32(3), i32(50)), why: "does not parse"},
		{name: "zxid backwards", bad: reply(-2, 0x0f, 0), writes: [][]byte{request(-2, jute.OpPing)}, why: "below the session's last"},
		{name: "timeout 0", first: frame(i32(0), i32(0), i64(0x1234), jstr("0123456789abcdef")), why: "timeout of 0 ms"},
		{name: "timeout -1", first: frame(i32(0), i32(-1), i64(0x1234), jstr("0123456789abcdef")), why: "timeout of -1 ms"},
		{name: "timeout 1 ms", first: frame(i32(0), i32(1), i64(0x1234), jstr("0123456789abcdef")), why: "timeout of 1 ms"},
		{name: "huge connect response", first: unhex("2d9a8f00"), why: "a connect response of"},
		{name: "long password", first: frame(i32(0), i32(4000), i64(0x1234), jstr(strings.Repeat("p", 300))), why: "connect response of"},
		{name: "password past the frame", first: frame(i32(0), i32(4000), i64(0x1234), i32(16)), why: "does not parse"},
		{name: "protocol version", first: frame(i32(7), i32(4000), i64(0x1234), jstr("0123456789abcdef")), why: "protocol version 7"},
		{name: "HTTP", first: []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), why: "a connect response of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := connectResp
			var good [][]byte
			if tc.first != nil {
				first = tc.first
			} else {
				good = [][]byte{connectResp, ok}
			}
			stream := append(append([]byte(nil), first...), ok...)
			stream = append(stream, tc.bad...)
			writes := append([][]byte{connectReq, del}, tc.writes...)
			for _, pieces := range []int{0, 3} {
				reads := [][]byte{stream}
				if pieces > 0 {
					reads = split(rand.New(rand.NewPCG(3, 4)), stream, pieces)
				}
				conn, sc := tapConn(reads, io.EOF, writes...)
				got, err := readFrames(conn)
				if !errors.Is(err, errBadFrame) || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("error %v, want one that says %q", err, tc.why)
				}
				if len(got) != len(good) {
					t.Fatalf("read %d frames before the error, want %d", len(got), len(good))
				}
				if refused := conn.t.up.(*countUp).refused.Load(); !sc.closed || refused != 1 {
					t.Fatalf("closed %v, refused %d", sc.closed, refused)
				}
				if _, err := conn.Read(make([]byte, 100)); !errors.Is(err, errBadFrame) {
					t.Fatalf("a read after the error: %v", err)
				}
			}
		})
	}
}

// A frame up to the limit is read however large, in a buffer that grows
// with what arrives and goes back to its first size after it.
func TestTapLargeFrame(t *testing.T) {
	names := make([][]byte, 0, 100000)
	for i := range 100000 {
		names = append(names, jstr(fmt.Sprintf("_c_%036d-lock-%010d", i, i)))
	}
	body := append([][]byte{i32(int32(len(names)))}, names...)
	big := reply(1, 0x10, 0, body...)
	if len(big) > testMaxFrame || len(big) < 5<<20 {
		t.Fatalf("a listing of 100,000 protected names is %d bytes", len(big))
	}
	conn, _ := tapConn([][]byte{connectResp, big, reply(2, 0x11, 0)}, io.EOF,
		connectReq, request(1, jute.OpGetChildren, jstr("/a"), []byte{0}), request(2, jute.OpDelete, jstr("/a"), i32(-1)))
	got, err := readFrames(conn)
	if err != io.EOF || len(got) != 3 || len(got[1]) != len(big) {
		t.Fatalf("read %d frames, then %v", len(got), err)
	}
	if cap(conn.buf) > readBufferSize {
		t.Fatalf("the buffer kept %d bytes after the large frame", cap(conn.buf))
	}
}

// A frame go-zookeeper writes in pieces is noted once whole.
func TestTapSplitWrites(t *testing.T) {
	var cw createWrites
	tap := wireTap{out: &createZxids{}, written: &cw}
	mine, forget := cw.expect("/a/_c_x-lock-")
	defer forget()
	create := request(1, jute.OpCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3))
	stream := append(append([]byte(nil), connectReq...), create...)
	for _, p := range split(rand.New(rand.NewPCG(5, 6)), stream, 5) {
		tap.noteWrite(p)
	}
	if !isClosed(mine) || len(tap.inflight) != 1 || tap.inflight[0].xid != 1 {
		t.Fatalf("told %v, in flight %v", isClosed(mine), tap.inflight)
	}
}

func FuzzWireTap(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 20})
	f.Add(reply(1, 5, 0, i32(1<<31-1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		conn, _ := tapConn([][]byte{connectResp, b}, io.EOF,
			connectReq, request(1, jute.OpGetChildren2, jstr("/a"), []byte{0}))
		frames, err := readFrames(conn) // must not panic or grow without bound
		if err == nil {
			t.Fatal("no error at the end")
		}
		if len(frames) > 0 && string(frames[0]) != string(connectResp) {
			t.Fatal("the connect response changed")
		}
		if cap(conn.buf) > 2*max(len(b), readBufferSize) {
			t.Fatalf("a buffer of %d bytes for %d", cap(conn.buf), len(b))
		}
	})
}

// A caller waiting for its create is told when that create, and no other
// request, is written; one that stopped waiting is not.
func TestCreateWrites(t *testing.T) {
	var cw createWrites
	tap := wireTap{out: &createZxids{}, written: &cw}
	tap.noteWrite(frame(i32(0), i64(0), i32(4000), i64(0), jstr("pw"))) // connect request
	mine, forget := cw.expect("/a/_c_x-lock-")
	other, forgetOther := cw.expect("/a/_c_z-lock-")
	forgetOther()
	tap.noteWrite(request(1, 8, jstr("/a/_c_x-lock-"), []byte{0}))                            // a getChildren of that path
	tap.noteWrite(request(2, jute.OpCreate, jstr("/a/_c_y-lock-"), jstr(""), i32(0), i32(3))) // another create
	if isClosed(mine) {
		t.Fatal("told of a request that is not our create")
	}
	tap.noteWrite(request(3, jute.OpCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3)))
	tap.noteWrite(request(4, jute.OpCreate, jstr("/a/_c_z-lock-"), jstr(""), i32(0), i32(3)))
	if !isClosed(mine) {
		t.Fatal("not told of our create")
	}
	if isClosed(other) {
		t.Fatal("told after forgetting")
	}
	forget() // after being told: a no-op
	if n := cw.waiting.Load(); n != 0 || len(cw.m) != 0 {
		t.Fatalf("%d (%d) still awaited, want none", n, len(cw.m))
	}
	tap.noteWrite(request(5, jute.OpCreate, i32(1<<30))) // a path length past the frame: ignored
}

// scriptedConn returns its reads one by one, then err.
type scriptedConn struct {
	net.Conn
	reads  [][]byte
	err    error
	calls  int
	closed bool
}

func (s *scriptedConn) Close() error {
	s.closed = true
	return nil
}

func (s *scriptedConn) Read(p []byte) (int, error) {
	s.calls++
	if len(s.reads) == 0 {
		return 0, s.err
	}
	n := copy(p, s.reads[0])
	s.reads[0] = s.reads[0][n:]
	if len(s.reads[0]) == 0 {
		s.reads = s.reads[1:]
		if len(s.reads) == 0 && s.err != nil {
			return n, s.err // data and the error together
		}
	}
	return n, nil
}

// The read buffer serves go-zookeeper's small reads from one read of the
// connection, and returns the connection's error only once the bytes
// before it are consumed, and alone.
func TestTrackedConnBuffersReads(t *testing.T) {
	replies := append(reply(1, 7, 0, jstr("x")), reply(2, 8, 0, jstr("yy"))...)
	tc, sc := tapConn([][]byte{connectResp, replies}, io.EOF, connectReq,
		request(1, jute.OpSync, jstr("x")), request(2, jute.OpSync, jstr("yy")))
	got, err := readFrames(tc)
	if err != io.EOF || len(got) != 3 {
		t.Fatalf("read %d frames, then %v", len(got), err)
	}
	if sc.calls != 2 { // the connect response; the replies with the error
		t.Fatalf("%d reads of the connection, want 2", sc.calls)
	}
	if !sc.closed {
		t.Fatal("the connection was not closed after its read failed")
	}
}
