package simzk

import (
	"net"
	"sync"
	"time"
)

// DialLatency is how long a dial takes when the server can be reached.
const DialLatency = time.Millisecond

// Host is a client's machine: its link to the server, with the faults a
// TCP link has (partitions both ways or one way, a slow link, writes that
// arrive in pieces, connections that die), and the dialer that opens
// connections over it. Its methods may be called from any goroutine of
// the bubble.
type Host struct {
	w           *World
	name        string
	up, down    path // client to server, server to client
	mu          sync.Mutex
	conns       map[*end]struct{} // the client ends of the open connections
	dieAfter    []int32           // ops: the next request of one is applied, then the connection dies
	dieBefore   []int32           // ops: the connection dies as the next request of one arrives
	dials       int
	dialsFails  int
	session     int64     // of the host's last connection with a session
	address     string    // dialled last
	hostile     []Hostile // armed bad frames (Hostile)
	hostileSent int
}

// Address returns the server address the host dialled last.
func (h *Host) Address() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.address
}

// Session returns the session of the host's last connection that had
// one: the session the server would expire for it.
func (h *Host) Session() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.session
}

// NewHost returns a host whose link to the server has no fault.
func (w *World) NewHost(name string) *Host {
	h := &Host{w: w, name: name, conns: make(map[*end]struct{})}
	h.up.halves = make(map[*half]struct{})
	h.down.halves = make(map[*half]struct{})
	return h
}

// Dial opens a connection to the server: a zk.Dialer. It takes
// DialLatency; during a partition of either direction it waits for the
// partition's end or fails after timeout, and it is refused while the
// server is down.
func (h *Host) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	time.Sleep(DialLatency)
	for {
		_, upCut, _ := h.up.state()
		_, downCut, _ := h.down.state()
		cut := later(upCut, downCut)
		now := time.Now()
		if !cut.After(now) {
			break
		}
		if !cut.Before(deadline) {
			time.Sleep(deadline.Sub(now))
			return nil, errTimeout
		}
		time.Sleep(cut.Sub(now))
	}
	c2s, s2c := newHalf(&h.up), newHalf(&h.down)
	client := &end{in: s2c, out: c2s, local: addr(h.name + ":50000"), remote: addr(address), closed: make(chan struct{})}
	server := &end{in: c2s, out: s2c, local: addr(address), remote: addr(h.name + ":50000"), closed: make(chan struct{})}
	client.peer, server.peer = server, client
	h.mu.Lock()
	h.conns[client] = struct{}{}
	h.dials++
	h.address = address
	h.mu.Unlock()
	h.up.add(c2s)
	h.down.add(s2c)
	client.onClose = func() {
		h.mu.Lock()
		delete(h.conns, client)
		h.mu.Unlock()
		h.up.remove(c2s)
		h.down.remove(s2c)
	}
	if !h.w.accept(server, h, address) {
		client.Close()
		h.mu.Lock()
		h.dialsFails++
		h.mu.Unlock()
		return nil, errRefused
	}
	return client, nil
}

func (p *path) add(h *half) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.halves[h] = struct{}{}
}

func (p *path) remove(h *half) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.halves, h)
}

// cut partitions the path for d: what is written meanwhile, and what is
// in flight, arrives when it heals.
func (p *path) cut(d time.Duration) {
	until := time.Now().Add(d)
	p.mu.Lock()
	p.cutUntil = later(p.cutUntil, until)
	halves := make([]*half, 0, len(p.halves))
	for h := range p.halves {
		halves = append(halves, h)
	}
	p.mu.Unlock()
	for _, h := range halves {
		h.holdUntil(until)
	}
}

// Partition cuts the host off for d: both ways, or, with up or down
// only, one way (up: what the client sends; down: what the server
// sends). A connection outlives it if neither end gives up meanwhile.
func (h *Host) Partition(d time.Duration, up, down bool) {
	if up {
		h.up.cut(d)
	}
	if down {
		h.down.cut(d)
	}
}

// Slow delays everything the host and the server send each other by d,
// one way, for the next span.
func (h *Host) Slow(d, span time.Duration) {
	for _, p := range []*path{&h.up, &h.down} {
		p.mu.Lock()
		p.delay = d
		p.mu.Unlock()
	}
	h.w.after(span, func() {
		for _, p := range []*path{&h.up, &h.down} {
			p.mu.Lock()
			p.delay = 0
			p.mu.Unlock()
		}
	})
}

// Pieces makes every write, both ways, arrive in n pieces a little apart,
// for the next span.
func (h *Host) Pieces(n int, span time.Duration) {
	for _, p := range []*path{&h.up, &h.down} {
		p.mu.Lock()
		p.pieces = n
		p.mu.Unlock()
	}
	h.w.after(span, func() {
		for _, p := range []*path{&h.up, &h.down} {
			p.mu.Lock()
			p.pieces = 0
			p.mu.Unlock()
		}
	})
}

// Drop breaks every open connection of the host, as a reset does.
func (h *Host) Drop() {
	h.mu.Lock()
	conns := make([]*end, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

// AnyOp, as the op of DieAfterApply or DieBeforeRead, is any request but
// pings, credentials and the setting of watches.
const AnyOp int32 = 0

// DieAfterApply makes the connection that carries the host's next request
// with opcode op (or AnyOp) die once the server has applied it, before
// the reply is sent: the client cannot know whether it was.
func (h *Host) DieAfterApply(op int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dieAfter = append(h.dieAfter, op)
}

// DieBeforeRead makes the connection that carries the host's next request
// with opcode op (or AnyOp) die as it arrives, before the server reads it.
func (h *Host) DieBeforeRead(op int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dieBefore = append(h.dieBefore, op)
}

// takeDie reports, and forgets, a DieAfterApply (after) or DieBeforeRead
// waiting for a request with opcode op.
func (h *Host) takeDie(op int32, after bool) bool {
	if op == opPing || op == opSetAuth || op == opSetWatches || op == opClose {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	list := &h.dieBefore
	if after {
		list = &h.dieAfter
	}
	for i, o := range *list {
		if o == AnyOp || o == op {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

// Dials returns the connections the host opened, and the dials the
// server refused.
func (h *Host) Dials() (opened, refused int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dials, h.dialsFails
}
