package recipe

import (
	"encoding/binary"
	"math/rand/v2"
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
		if len(z.m) != 0 || len(w.pending) != 0 {
			t.Fatalf("trial %d: left over %v %v", trial, z.m, w.pending)
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
