package main

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
)

// tap keeps the last reads from the ZooKeeper connection, so that a write
// after a resume can be explained by what the client read just before it.
type tap struct {
	mu    sync.Mutex
	reads [6]faults.WireRead
	n     int
}

// dial is a zk.Dialer whose connections report their reads to t.
func (t *tap) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &tappedConn{Conn: c, t: t}, nil
}

func (t *tap) note(p []byte, err error) {
	r := faults.WireRead{Wall: time.Now().UnixNano(), N: len(p)}
	if len(p) >= 4 {
		r.Head = int32(binary.BigEndian.Uint32(p))
	}
	if err != nil {
		r.Err = err.Error()
	}
	t.mu.Lock()
	t.reads[t.n%len(t.reads)] = r
	t.n++
	t.mu.Unlock()
}

// last returns the kept reads, oldest first.
func (t *tap) last() []faults.WireRead {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []faults.WireRead
	for i := max(t.n-len(t.reads), 0); i < t.n; i++ {
		out = append(out, t.reads[i%len(t.reads)])
	}
	return out
}

type tappedConn struct {
	net.Conn
	t *tap
}

func (c *tappedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.note(p[:n], err)
	return n, err
}
