package jute

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// The encodings below are ZooKeeper's, as go-zookeeper v1.0.4 writes and
// reads them (its encodePacket and decodePacket on the same records).
func TestEncodings(t *testing.T) {
	stat := Stat{Czxid: 1, Mzxid: 2, Ctime: 3, Mtime: 4, Version: 5, Cversion: 6, Aversion: 7, EphemeralOwner: 8, DataLength: 9, NumChildren: 10, Pzxid: 11}
	statHex := "0000000000000001 0000000000000002 0000000000000003 0000000000000004 00000005 00000006 00000007 0000000000000008 00000009 0000000a 000000000000000b"
	world := []ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}
	worldHex := "00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65"
	for _, tc := range []struct {
		name string
		enc  []byte
		want string
	}{
		{"request header", RequestHeader{Xid: 7, Op: OpGetData}.Append(nil), "00000007 00000004"},
		{"ping header", RequestHeader{Xid: XidPing, Op: OpPing}.Append(nil), "fffffffe 0000000b"},
		{"reply header", ReplyHeader{Xid: 7, Zxid: 0x100, Err: -101}.Append(nil), "00000007 0000000000000100 ffffff9b"},
		{"connect request (go-zookeeper)", (&ConnectRequest{Timeout: 2000, Passwd: make([]byte, 16)}).Append(nil),
			"00000000 0000000000000000 000007d0 0000000000000000 00000010 00000000000000000000000000000000"},
		{"connect request (read-only flag)", (&ConnectRequest{SessionID: 1, Passwd: []byte{}, HasReadOnly: true}).Append(nil),
			"00000000 0000000000000000 00000000 0000000000000001 00000000 00"},
		{"connect response", (&ConnectResponse{Timeout: 4000, SessionID: 0x0100000000000001, Passwd: []byte{1, 2}}).Append(nil),
			"00000000 00000fa0 0100000000000001 00000002 0102 00"},
		{"create", (&CreateRequest{Path: "/a", Data: []byte("x"), ACL: world, Flags: 3}).Append(nil),
			"00000002 2f61 00000001 78 " + worldHex + " 00000003"},
		{"create, null data", (&CreateRequest{Path: "/a", ACL: world}).Append(nil),
			"00000002 2f61 ffffffff " + worldHex + " 00000000"},
		{"delete", PathVersion{Path: "/a", Version: -1}.Append(nil), "00000002 2f61 ffffffff"},
		{"getData with a watch", PathWatch{Path: "/a", Watch: true}.Append(nil), "00000002 2f61 01"},
		{"setData", (&SetDataRequest{Path: "/a", Data: []byte{}, Version: 2}).Append(nil), "00000002 2f61 00000000 00000002"},
		{"stat", stat.Append(nil), statHex},
		{"children", AppendStrings(nil, []string{"a", "bc"}), "00000002 00000001 61 00000002 6263"},
		{"setWatches", (&SetWatchesRequest{RelativeZxid: 9, Data: []string{"/a"}, Exist: []string{}, Child: nil}).Append(nil),
			"0000000000000009 00000001 00000002 2f61 00000000 00000000"},
		{"setAuth", (&SetAuthRequest{Scheme: "digest", Auth: []byte("u:p")}).Append(nil), "00000000 00000006 646967657374 00000003 753a70"},
		{"watch event", (&WatcherEvent{Type: 2, State: 3, Path: "/a"}).Append(nil), "00000002 00000003 00000002 2f61"},
		{"multi", AppendMulti(nil, []MultiOp{
			{Op: OpCheck, PathVersion: PathVersion{Path: "/a", Version: 1}},
			{Op: OpDelete, PathVersion: PathVersion{Path: "/b", Version: -1}},
		}), "0000000d 00 ffffffff 00000002 2f61 00000001 00000002 00 ffffffff 00000002 2f62 ffffffff ffffffff 01 ffffffff"},
		{"multi results", AppendMultiResults(nil, []MultiResult{
			{Op: OpCreate, Path: "/a"}, {Op: OpDelete},
		}), "00000001 00 00000000 00000002 2f61 00000002 00 00000000 ffffffff 01 ffffffff"},
		{"failed multi results", AppendMultiResults(nil, []MultiResult{
			{Op: OpError, Err: 0}, {Op: OpError, Err: -101},
		}), "ffffffff 00 00000000 00000000 ffffffff 00 ffffff9b ffffff9b ffffffff 01 ffffffff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(tc.want); !bytes.Equal(tc.enc, want) {
				t.Errorf("encoded\n%x, want\n%x", tc.enc, want)
			}
		})
	}
}

// roundTrip encodes v, reads it back with read and checks that the record
// read is v and the whole encoding was read.
func roundTrip[T any](t *testing.T, name string, v T, enc func(T) []byte, read func(*Reader) T) {
	t.Helper()
	b := enc(v)
	r := NewReader(b)
	got := read(r)
	if err := r.End(); err != nil {
		t.Errorf("%s: read back: %v", name, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("%s: read back %+v, want %+v", name, got, v)
	}
	// Every proper prefix is too short (but for an optional last flag).
	for n := range len(b) - optional(v) {
		r := NewReader(b[:n])
		read(r)
		if r.End() == nil {
			t.Errorf("%s: a prefix of %d of %d bytes read without error", name, n, len(b))
		}
	}
}

// optional is the length of v's optional last field.
func optional(v any) int {
	switch v.(type) {
	case ConnectRequest, ConnectResponse:
		return 1
	}
	return 0
}

func TestRoundTrips(t *testing.T) {
	roundTrip(t, "create", CreateRequest{Path: "/x", Data: []byte("d"), ACL: []ACL{{31, "digest", "u:h"}}, Flags: 2},
		func(c CreateRequest) []byte { return c.Append(nil) }, func(r *Reader) (c CreateRequest) { c.Read(r); return })
	roundTrip(t, "connect request", ConnectRequest{Timeout: 1, SessionID: 2, Passwd: []byte{3}, HasReadOnly: true, ReadOnly: true},
		func(c ConnectRequest) []byte { return c.Append(nil) }, func(r *Reader) (c ConnectRequest) { c.Read(r); return })
	roundTrip(t, "connect response", ConnectResponse{Timeout: 1, SessionID: 2, Passwd: []byte{3}},
		func(c ConnectResponse) []byte { return c.Append(nil) }, func(r *Reader) (c ConnectResponse) { c.Read(r); return })
	roundTrip(t, "setWatches", SetWatchesRequest{RelativeZxid: 4, Data: []string{"/a"}, Exist: []string{}, Child: []string{"/b", "/c"}},
		func(s SetWatchesRequest) []byte { return s.Append(nil) }, func(r *Reader) (s SetWatchesRequest) { s.Read(r); return })
	ops := []MultiOp{
		{Op: OpCreate, Create: CreateRequest{Path: "/a", Data: []byte{}, ACL: []ACL{}, Flags: 1}},
		{Op: OpSetData, SetData: SetDataRequest{Path: "/b", Data: []byte("v"), Version: 3}},
		{Op: OpCheck, PathVersion: PathVersion{Path: "/c", Version: 4}},
	}
	roundTrip(t, "multi", ops, func(o []MultiOp) []byte { return AppendMulti(nil, o) }, func(r *Reader) []MultiOp { return r.ReadMulti() })
	res := []MultiResult{{Op: OpCreate, Path: "/a"}, {Op: OpCreate2, Path: "/b", Stat: Stat{Czxid: 5}}, {Op: OpSetData, Stat: Stat{Version: 1}}, {Op: OpCheck}}
	roundTrip(t, "multi results", res, func(m []MultiResult) []byte { return AppendMultiResults(nil, m) }, func(r *Reader) []MultiResult { return r.ReadMultiResults() })
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    string
		read func(*Reader)
		want error
	}{
		{"negative string length", "fffffffe", func(r *Reader) { _ = r.String() }, ErrLength},
		{"string past the end", "00000005 6162", func(r *Reader) { _ = r.String() }, ErrShort},
		{"vector longer than the bytes", "7fffffff", func(r *Reader) { r.Strings() }, ErrShort},
		{"ACL vector longer than the bytes", "00010000 00000001", func(r *Reader) { r.ReadACL() }, ErrShort},
		{"unknown multi op", "00000063 00 ffffffff", func(r *Reader) { r.ReadMulti() }, ErrUnknownOp},
		{"bytes after", "00000000 00", func(r *Reader) { _ = r.String() }, ErrTrailing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(unhex(tc.b))
			tc.read(r)
			if err := r.End(); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	b, at := BeginFrame([]byte{9})
	b = RequestHeader{Xid: 1, Op: OpPing}.Append(b)
	b = EndFrame(b, at)
	if want := unhex("09 00000008 00000001 0000000b"); !bytes.Equal(b, want) {
		t.Fatalf("frame %x, want %x", b, want)
	}
	body, err := ReadFrame(bytes.NewReader(b[1:]), nil, MaxBuffer)
	if err != nil || !bytes.Equal(body, b[5:]) {
		t.Fatalf("ReadFrame: %x, %v", body, err)
	}
	if _, err := ReadFrame(bytes.NewReader(unhex("00100000")), nil, MaxBuffer); !errors.Is(err, ErrLength) {
		t.Errorf("oversized frame: %v, want ErrLength", err)
	}
	if _, err := ReadFrame(bytes.NewReader(unhex("00000004 00")), nil, MaxBuffer); err == nil {
		t.Errorf("a cut frame read without error")
	}
}

// FuzzRequest reads any bytes as a request frame's body, as a server
// does: never a panic, and what reads without error encodes to bytes that
// read back as the same record.
func FuzzRequest(f *testing.F) {
	f.Add((&CreateRequest{Path: "/a", ACL: []ACL{{31, "world", "anyone"}}}).Append(RequestHeader{1, OpCreate}.Append(nil)))
	f.Add(AppendMulti(RequestHeader{2, OpMulti}.Append(nil), []MultiOp{{Op: OpDelete, PathVersion: PathVersion{"/a", -1}}}))
	f.Add((&SetWatchesRequest{Data: []string{"/a"}}).Append(RequestHeader{3, OpSetWatches}.Append(nil)))
	f.Fuzz(func(t *testing.T, b []byte) {
		once, ok := reencode(b)
		if !ok {
			return
		}
		twice, ok := reencode(once)
		if !ok || !bytes.Equal(once, twice) {
			t.Fatalf("read %x, encoded as %x, which reads back as %x (%v)", b, once, twice, ok)
		}
	})
}

// reencode reads a request and encodes what it read; ok is false when the
// request does not read.
func reencode(b []byte) (out []byte, ok bool) {
	r := NewReader(b)
	var h RequestHeader
	h.Read(r)
	out = h.Append(nil)
	switch h.Op {
	case OpCreate, OpCreate2, OpCreateContainer:
		var c CreateRequest
		c.Read(r)
		out = c.Append(out)
	case OpDelete, OpCheck:
		var p PathVersion
		p.Read(r)
		out = p.Append(out)
	case OpExists, OpGetData, OpGetChildren, OpGetChildren2:
		var p PathWatch
		p.Read(r)
		out = p.Append(out)
	case OpSetData:
		var s SetDataRequest
		s.Read(r)
		out = s.Append(out)
	case OpMulti:
		out = AppendMulti(out, r.ReadMulti())
	case OpSetWatches:
		var s SetWatchesRequest
		s.Read(r)
		out = s.Append(out)
	case OpSetAuth:
		var s SetAuthRequest
		s.Read(r)
		out = s.Append(out)
	default:
		return nil, false
	}
	return out, r.End() == nil
}

// FuzzReply reads any bytes as a reply body of each kind: never a panic.
func FuzzReply(f *testing.F) {
	f.Add(AppendStrings(nil, []string{"a", "b"}))
	f.Add(AppendMultiResults(nil, []MultiResult{{Op: OpCreate2, Path: "/a"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, read := range []func(*Reader){
			func(r *Reader) { r.Strings() },
			func(r *Reader) { r.ReadMultiResults() },
			func(r *Reader) { var s Stat; s.Read(r) },
			func(r *Reader) { var c ConnectResponse; c.Read(r) },
			func(r *Reader) { var e WatcherEvent; e.Read(r) },
			func(r *Reader) { r.Buffer(); var s Stat; s.Read(r) },
		} {
			r := NewReader(b)
			read(r)
			if r.Err() == nil && r.Offset() > len(b) {
				t.Fatalf("read %d of %d bytes", r.Offset(), len(b))
			}
		}
	})
}

func TestParse(t *testing.T) {
	f := EndFrame(AppendInt32(AppendString(RequestHeader{Xid: 5, Op: OpDelete}.Append(AppendInt32(nil, 0)), "/a"), -1), 0)
	if want := unhex("00000012 00000005 00000002 00000002 2f61 ffffffff"); !bytes.Equal(f, want) {
		t.Fatalf("a delete request: %x, want %x", f, want)
	}
	if !IsFrame(f) || IsFrame(f[:len(f)-1]) {
		t.Error("IsFrame")
	}
	if h, ok := ParseRequestHeader(f[4:]); !ok || h != (RequestHeader{5, OpDelete}) {
		t.Errorf("ParseRequestHeader: %+v %v", h, ok)
	}
	if n, ok := Len(f[12:]); !ok || n != 2 {
		t.Errorf("Len: %d %v", n, ok)
	}
	if _, ok := Len(unhex("00000003 6161")); ok {
		t.Error("Len of a cut string: ok")
	}
	rh := ReplyHeader{Xid: 9, Zxid: 1 << 40, Err: -101}
	if h, ok := ParseReplyHeader(rh.Append(nil)); !ok || h != rh {
		t.Errorf("ParseReplyHeader: %+v %v", h, ok)
	}
}

// CheckReply accepts a body only if the Reader reads the same fields from
// it without error, and never panics.
func FuzzCheckReply(f *testing.F) {
	var st Stat
	f.Add(int32(OpGetChildren2), st.Append(AppendStrings(nil, []string{"a", "b"})))
	f.Add(int32(OpGetACL), st.Append(AppendACL(nil, []ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})))
	f.Add(int32(OpMulti), AppendInt32(AppendBool(AppendInt32(nil, -1), true), -1))
	f.Add(int32(OpGetData), st.Append(AppendBuffer(nil, []byte("x"))))
	f.Add(int32(OpGetChildren), AppendInt32(nil, 1<<31-1))
	f.Fuzz(func(t *testing.T, op int32, b []byte) {
		if CheckReply(op, b) != nil {
			return
		}
		r := NewReader(b)
		switch op {
		case OpGetChildren, OpGetChildren2:
			if r.Strings() == nil && len(b) >= 4 && b[0]&0x80 != 0 {
				t.Fatal("accepted a null vector")
			}
		case OpGetACL:
			r.ReadACL()
		case OpGetData, OpReconfig:
			r.Buffer()
			var s Stat
			s.Read(r)
		case OpCreate, OpCreateContainer, OpCreateTTL, OpSync:
			_ = r.String()
		case OpExists, OpSetData, OpSetACL:
			var s Stat
			s.Read(r)
		}
		if r.Err() != nil {
			t.Fatalf("CheckReply accepted what the reader refuses: %v", r.Err())
		}
	})
}

// CheckReply refuses what would make go-zookeeper's decoder allocate more
// than the frame holds, or fail.
func TestCheckReply(t *testing.T) {
	var st Stat
	stat := st.Append(nil)
	for _, tc := range []struct {
		name string
		op   int32
		body []byte
		ok   bool
	}{
		{"children", OpGetChildren2, append(AppendStrings(nil, []string{"a"}), stat...), true},
		{"children huge count", OpGetChildren2, append(AppendInt32(nil, 1<<31-1), stat...), false},
		{"children null", OpGetChildren2, append(AppendInt32(nil, -1), stat...), false},
		{"children no stat", OpGetChildren2, AppendStrings(nil, []string{"a"}), false},
		{"children trailing", OpGetChildren, append(AppendStrings(nil, []string{"a"}), 1, 2, 3), true},
		{"create", OpCreate, AppendString(nil, "/a"), true},
		{"create null path", OpCreate, AppendInt32(nil, -1), false},
		{"create path past the end", OpCreate, AppendInt32(nil, 9), false},
		{"data null", OpGetData, append(AppendInt32(nil, -1), stat...), true},
		{"data -2", OpGetData, append(AppendInt32(nil, -2), stat...), false},
		{"acl", OpGetACL, append(AppendACL(nil, []ACL{{31, "world", "anyone"}}), stat...), true},
		{"acl count", OpGetACL, append(AppendInt32(nil, 100), stat...), false},
		{"delete", OpDelete, nil, true},
		{"exists short", OpExists, stat[:67], false},
		{"multi done", OpMulti, AppendInt32(AppendBool(AppendInt32(nil, -1), true), -1), true},
		{"multi create", OpMulti, AppendInt32(AppendBool(AppendInt32(AppendString(AppendInt32(AppendBool(AppendInt32(nil, OpCreate), false), 0), "/a"), -1), true), -1), true},
		{"multi no end", OpMulti, AppendInt32(AppendBool(AppendInt32(nil, OpDelete), false), 0), false},
		{"multi unknown", OpMulti, AppendInt32(AppendBool(AppendInt32(nil, 77), false), 0), false},
		{"unknown op", 999, []byte{1}, true},
	} {
		if err := CheckReply(tc.op, tc.body); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if CheckWatchEvent(AppendString(AppendInt32(AppendInt32(nil, 4), 3), "/a")) != nil {
		t.Error("a watch event refused")
	}
	if CheckWatchEvent(AppendInt32(AppendInt32(AppendInt32(nil, 4), 3), 50)) == nil {
		t.Error("a watch event with its path past the end accepted")
	}
}
