package recipe

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
)

// The encoded lengths, against the jute encoding worked out by hand: a
// string or buffer is a 4-byte length and its bytes, an ACL entry its
// permissions and two strings, a frame an 8-byte header and the request, a
// multi 9 bytes of header before each op and after the last.
func TestEncodedLengths(t *testing.T) {
	world := zk.WorldACL(zk.PermAll) // world:anyone: 4 + 4+5 + 4+6 = 23
	for _, tc := range []struct {
		name string
		got  int
		want int
	}{
		{"create /a xy", frameLen(createLen("/a", []byte("xy"), world)), 8 + (4 + 2) + (4 + 2) + (4 + 23) + 4},
		{"create, nil data", createLen("/a", nil, world), (4 + 2) + 4 + (4 + 23) + 4},
		{"create, no ACL", createLen("/a", nil, nil), (4 + 2) + 4 + 4 + 4},
		{"two entries", aclLen(zk.DigestACL(zk.PermAll, "u", "p")), 4 + 4 + (4 + 6) + (4 + len("u:") + 28)},
		{"set", SetData("/ab", []byte("x")).encodedLen(world), (4 + 3) + (4 + 1) + 4},
		{"delete", Delete("/ab").encodedLen(world), (4 + 3) + 4},
		{"check", Check("/ab", 3).encodedLen(world), (4 + 3) + 4},
		{"create op", Create("/a", []byte("xy")).encodedLen(world), (4 + 2) + (4 + 2) + (4 + 23) + 4},
		{"multi of one check", multiLen(Check("/a", AnyVersion).encodedLen(nil)), 8 + 9 + (4 + 2 + 4) + 9},
		{"empty multi", multiLen(), 8 + 9},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// tooLarge refuses from one byte over the limit, and only then.
func TestTooLarge(t *testing.T) {
	c := &Client{cfg: config{maxPacket: 5000}}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{0, true}, {4999, true}, {5000, true}, {5001, false}, {1 << 30, false}} {
		err := c.tooLarge("x", tc.size)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("size %d: %v; want ok=%v", tc.size, err, tc.ok)
		}
	}
}

// The measure agrees with the bytes the protocol codec writes, for a
// transaction of every kind of op, with an ACL of two entries.
func TestMeasureMatchesEncoding(t *testing.T) {
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	ops := []Op{Check("/l/_c_x-lock-0000000001", AnyVersion), Create("/d/a", []byte("hello")),
		CreateSequential("/d/log-", nil), SetData("/d/b", make([]byte, 300)), SetDataVersion("/d/c", []byte("v"), 7),
		Delete("/d/e"), Check("/d/f", 2)}
	var jacl []jute.ACL
	for _, a := range acl {
		jacl = append(jacl, jute.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID})
	}
	var mops []jute.MultiOp
	bodies := make([]int, len(ops))
	for i, o := range ops {
		bodies[i] = o.encodedLen(acl)
		switch o.kind {
		case kindCreate, kindCreateSeq:
			mops = append(mops, jute.MultiOp{Op: jute.OpCreate, Create: jute.CreateRequest{Path: o.path, Data: o.data, ACL: jacl}})
		case kindSet:
			mops = append(mops, jute.MultiOp{Op: jute.OpSetData, SetData: jute.SetDataRequest{Path: o.path, Data: o.data, Version: o.version}})
		case kindDelete:
			mops = append(mops, jute.MultiOp{Op: jute.OpDelete, PathVersion: jute.PathVersion{Path: o.path, Version: o.version}})
		default:
			mops = append(mops, jute.MultiOp{Op: jute.OpCheck, PathVersion: jute.PathVersion{Path: o.path, Version: o.version}})
		}
	}
	frame := jute.AppendMulti(jute.RequestHeader{Xid: 1, Op: jute.OpMulti}.Append(nil), mops)
	if got := multiLen(bodies...); got != len(frame) {
		t.Fatalf("measured %d bytes, the codec writes %d", got, len(frame))
	}
	create := (&jute.CreateRequest{Path: "/d/_c_x-lease-", Data: []byte("host:1"), ACL: jacl, Flags: 3}).Append(nil)
	if got := createLen("/d/_c_x-lease-", []byte("host:1"), acl); got != len(create) {
		t.Fatalf("create measured %d bytes, the codec writes %d", got, len(create))
	}
}
