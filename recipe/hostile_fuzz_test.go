package recipe_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// fuzzAllocLimit bounds what one input may make the process allocate: a
// client's connection (go-zookeeper's two buffers of 1.5 MiB), twice the
// frame cap, and a margin.
const fuzzAllocLimit = 2*hostileCap + 8<<20

// FuzzHostileServer runs the real client (Connect, go-zookeeper, the wire
// tap) against a fake server on an in-memory connection that completes
// the handshake, then answers the client's request with the fuzzed bytes
// (a reply's xid of 0 is replaced by the request's). Whatever the bytes,
// nothing panics, every call returns, and the input costs the process
// less than fuzzAllocLimit.
func FuzzHostileServer(f *testing.F) {
	for i, tc := range hostileFrames {
		f.Add(byte(i), tc.frame)
	}
	for i, s := range []string{
		// Replies with xid 0 (the request's): a header and nothing
		// else, a listing of 2^31-1 names, a string past the frame, a
		// zxid of 1, an error reply, a good getData reply.
		"00000010 00000000 0000000000000005 00000000",
		"00000014 00000000 0000000000000005 00000000 7fffffff",
		"00000018 00000000 0000000000000005 00000000 00000001 00100000",
		"00000010 00000000 0000000000000001 ffffff9b",
		"00000058 00000000 0000000000000005 00000000 00000000" + // data ""
			"0000000000000002 0000000000000002 0000000000000000 0000000000000000 00000000 00000000 00000000" +
			"0000000000000000 00000000 00000000 0000000000000002",
		"48545450 2f312e31 20343030",
	} {
		f.Add(byte(i), hexFrame(s))
	}
	f.Fuzz(func(t *testing.T, op byte, reply []byte) {
		if len(reply) > 1<<16 {
			return
		}
		alloc := allocated()
		begin := time.Now()
		fuzzOne(t, op, reply)
		if d := time.Since(begin); d > 3*time.Second {
			t.Fatalf("an input of %d bytes took %v", len(reply), d)
		}
		if n := alloc(); n > fuzzAllocLimit {
			t.Fatalf("%d MiB allocated for an input of %d bytes, want under %d MiB", n>>20, len(reply), fuzzAllocLimit>>20)
		}
	})
}

// fuzzOne connects a client to a fake server, sends it the request named
// by op, has the server answer with reply, then closes the client.
func fuzzOne(t *testing.T, op byte, reply []byte) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var dials atomic.Int32
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if dials.Add(1) > 1 {
			return nil, errors.New("fuzz: one connection only")
		}
		cli, srv := net.Pipe()
		wg.Go(func() { fuzzServe(srv, reply) })
		return cli, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := recipe.Connect(ctx, []string{"127.0.0.1:2181"}, recipe.WithDialer(dial), recipe.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatalf("connect to the fake server: %v", err)
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn := c.Conn()
		switch op % 5 {
		case 0:
			conn.Get("/fuzz")
		case 1:
			conn.Children("/fuzz")
		case 2:
			conn.Exists("/fuzz")
		case 3:
			conn.Create("/fuzz", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		case 4:
			conn.Multi(&zk.CreateRequest{Path: "/fuzz", Acl: zk.WorldACL(zk.PermAll)}, &zk.DeleteRequest{Path: "/fuzz", Version: -1})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not return within 5 s of the reply")
	}
}

// fuzzServe is the fake server: a good handshake, a ping answered, the
// first request answered with reply; then it reads until the client
// hangs up, or closes the connection 20 ms after the reply.
func fuzzServe(c net.Conn, reply []byte) {
	defer c.Close()
	if _, err := readFrame(c, 1<<20); err != nil {
		return
	}
	if _, err := c.Write(goodConnect); err != nil {
		return
	}
	for {
		f, err := readFrame(c, 1<<20)
		if err != nil || len(f) < 12 {
			return
		}
		xid, opcode := int32(binary.BigEndian.Uint32(f[4:])), int32(binary.BigEndian.Uint32(f[8:]))
		switch {
		case xid == -2: // ping
			if _, err := c.Write(hexFrame("00000010 fffffffe 0000000000000005 00000000")); err != nil {
				return
			}
			continue
		case xid <= 0 || opcode == -11 || opcode == 101: // close, setWatches
			continue
		}
		r := append([]byte(nil), reply...)
		if len(r) >= 8 && binary.BigEndian.Uint32(r[4:]) == 0 {
			binary.BigEndian.PutUint32(r[4:], uint32(xid))
		}
		c.SetDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Write(r); err != nil {
			return
		}
		io.Copy(io.Discard, c)
		return
	}
}
