package recipe

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

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

// The tap finds the zxid of every successful create however the server's
// bytes are split into reads, and nothing else.
func TestWireTap(t *testing.T) {
	connectReq := frame(i32(0), i64(1<<32), i32(4000), i64(0), jstr("pw"))
	connectResp := frame(i32(0), i32(4000), i64(0x1234), jstr("password"))
	writes := [][]byte{
		connectReq,
		request(1, opCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3)),
		request(2, 8, jstr("/a"), []byte{0}),                                  // getChildren
		request(3, opCreate, jstr("/a/_c_y-lock-"), jstr(""), i32(0), i32(3)), // fails below
		request(4, opCreate2, jstr("/b/n"), jstr(""), i32(0), i32(0)),
		request(5, 4, jstr("/a/_c_x-lock-0000000001"), []byte{1}), // getData
	}
	stat := make([]byte, 68)
	reads := [][]byte{
		connectResp,
		reply(-1, -1, 0, i32(4), i32(3), jstr("/a")), // watch event
		reply(1, 0x100000007, 0, jstr("/a/_c_x-lock-0000000001")),
		reply(2, 0x100000008, 0, i32(2), jstr("x"), jstr("y")),
		reply(-2, 0x100000008, 0), // ping
		reply(3, 0x100000008, -110),
		reply(4, 0x10000000a, 0, jstr("/b/n"), stat),
		reply(5, 0x10000000a, 0, jstr("/a/_c_y-lock-0000000009"), stat), // not a create
	}
	var stream []byte
	for _, r := range reads {
		stream = append(stream, r...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var z createZxids
		w := wireTap{out: &z}
		for _, p := range writes {
			w.noteWrite(p)
		}
		for rest := stream; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 40))
			if trial == 0 {
				n = len(rest) // one read of everything
			}
			w.noteRead(rest[:n])
			rest = rest[n:]
		}
		if zx, ok := z.take("/a/_c_x-lock-0000000001"); !ok || zx != 0x100000007 {
			t.Fatalf("trial %d: create zxid = %x, %v", trial, zx, ok)
		}
		if zx, ok := z.take("/b/n"); !ok || zx != 0x10000000a {
			t.Fatalf("trial %d: create2 zxid = %x, %v", trial, zx, ok)
		}
		if _, ok := z.take("/a/_c_y-lock-0000000009"); ok {
			t.Fatalf("trial %d: a getData reply was taken for a create", trial)
		}
		if len(z.m) != 0 || len(w.inflight) != 0 {
			t.Fatalf("trial %d: left over %v %v", trial, z.m, w.inflight)
		}
	}
}

func FuzzWireTap(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		var z createZxids
		w := wireTap{out: &z}
		w.noteWrite(nil)
		w.noteWrite(request(1, opCreate))
		w.noteRead(b) // must not panic or grow without bound
		if len(z.m) > maxNotedCreates {
			t.Fatal("unbounded")
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
	tap.noteWrite(request(1, 8, jstr("/a/_c_x-lock-"), []byte{0}))                       // a getChildren of that path
	tap.noteWrite(request(2, opCreate, jstr("/a/_c_y-lock-"), jstr(""), i32(0), i32(3))) // another create
	if isClosed(mine) {
		t.Fatal("told of a request that is not our create")
	}
	tap.noteWrite(request(3, opCreate, jstr("/a/_c_x-lock-"), jstr(""), i32(0), i32(3)))
	tap.noteWrite(request(4, opCreate, jstr("/a/_c_z-lock-"), jstr(""), i32(0), i32(3)))
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
	tap.noteWrite(request(5, opCreate, i32(1<<30))) // a path length past the frame: ignored
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
// connection, passes large reads through, and returns the connection's
// error only once the bytes before it are consumed.
func TestTrackedConnBuffersReads(t *testing.T) {
	c := &Client{}
	replies := append(reply(1, 7, 0, jstr("x")), reply(2, 8, 0, jstr("yy"))...)
	big := make([]byte, readBufferSize+10)
	sc := &scriptedConn{reads: [][]byte{replies, big}, err: io.EOF}
	tc := &trackedConn{Conn: sc, c: c, tap: wireTap{out: &c.zxids, readFirst: true}}
	var got []byte
	for range 4 { // length, frame, length, frame
		var hdr [4]byte
		if _, err := io.ReadFull(tc, hdr[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(tc, body); err != nil {
			t.Fatal(err)
		}
		got = append(append(got, hdr[:]...), body...)
		if len(got) == len(replies) {
			break
		}
	}
	if string(got) != string(replies) || sc.calls != 1 {
		t.Fatalf("read %d bytes in %d reads of the connection, want %d in 1", len(got), sc.calls, len(replies))
	}
	p := make([]byte, len(big))
	if n, err := io.ReadFull(tc, p); n != len(big) || err != nil {
		t.Fatalf("large read: %d, %v", n, err)
	}
	if _, err := tc.Read(p); err != io.EOF {
		t.Fatalf("after the last bytes: %v, want EOF", err)
	}
	if !sc.closed {
		t.Fatal("the connection was not closed after its read failed")
	}
}
