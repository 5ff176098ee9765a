package zktest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ZooKeeper request opcodes that create a znode. A multi (transaction)
// counts as a create: the recipes use it to create several nodes at once.
const (
	opCreate          = 1
	opMulti           = 14
	opCreate2         = 15
	opCreateContainer = 19
	opCreateTTL       = 21
)

const (
	// maxFrame bounds a client frame: far above jute.maxbuffer (1 MB by
	// default). A longer "length" on a connection's first frame is a
	// four-letter word, which the proxy passes through raw.
	maxFrame = 64 << 20
	// cutServerDelay is how long after cutting the client side the proxy
	// keeps the server side open, so the server still reads and applies
	// the create.
	cutServerDelay   = 100 * time.Millisecond
	proxyDialTimeout = 2 * time.Second
)

// ProxyStats counts what a Proxy has done.
type ProxyStats struct {
	// Connections is the number of client connections accepted.
	Connections int
	// Creates is the number of create requests (create, create2,
	// createContainer, createTTL, and multi transactions) forwarded to a
	// server.
	Creates int
	// Cuts is the number of connections cut by CutAfterCreates.
	Cuts int
}

// Proxy is a fault-injecting TCP proxy between a ZooKeeper client and one
// server, on 127.0.0.1. It forwards bytes unchanged and parses the
// client's frames just enough to see each request's opcode. It can lose
// the reply to a create (CutAfterCreates), partition the network
// (Blackhole), drop every connection (DropAll) and send new connections to
// another server (Retarget).
type Proxy struct {
	ln   net.Listener
	done chan struct{} // closed by Close

	mu          sync.Mutex
	target      string
	cutEvery    int
	sinceCutSet int // creates seen since CutAfterCreates was set
	blackhole   bool
	closed      bool
	conns       map[*proxyConn]struct{}
	stats       ProxyStats
	wg          sync.WaitGroup
}

// NewProxy starts a proxy listening on a free port of 127.0.0.1 that
// forwards to the ZooKeeper server at target ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zktest: proxy: %w", err)
	}
	p := &Proxy{
		ln:     ln,
		done:   make(chan struct{}),
		target: target,
		conns:  make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients connect to, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAfterCreates makes the proxy lose the reply to every n-th create:
// after forwarding the n-th, 2n-th, ... create request (counted across
// all connections from this call on) to the server, it closes the client
// side of that connection at once, so the client never sees the reply,
// and closes the server side about 100ms later, so the server still
// applies the create. Creates inside a multi request are not counted.
// n <= 0 disables cutting.
func (p *Proxy) CutAfterCreates(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutEvery = n
	p.sinceCutSet = 0
}

// Blackhole on makes the proxy forward nothing in either direction, on
// existing and new connections, like a network partition: connections
// stay open (new ones are accepted and held), and what arrives is read
// and discarded. Blackhole off resumes forwarding for new connections and
// closes the connections that were black-holed.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	var holed []*proxyConn
	for c := range p.conns {
		if on {
			c.holed.Store(true)
		} else if c.holed.Load() {
			holed = append(holed, c)
		}
	}
	p.mu.Unlock()
	for _, c := range holed {
		c.closeBoth()
	}
}

// DropAll closes every current connection, both sides, now. New
// connections are accepted normally.
func (p *Proxy) DropAll() {
	for _, c := range p.snapshot() {
		c.closeBoth()
	}
}

// Retarget sends later connections to target; current ones keep their
// server.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening, closes every connection and waits until all of
// the proxy's goroutines have ended. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.done)
	err := p.ln.Close()
	p.mu.Unlock()
	for _, c := range p.snapshot() {
		c.closeBoth()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) snapshot() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

func (p *Proxy) remove(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// countCreate records a forwarded create and reports whether the
// connection must be cut after it.
func (p *Proxy) countCreate() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Creates++
	if p.cutEvery <= 0 {
		return false
	}
	p.sinceCutSet++
	if p.sinceCutSet%p.cutEvery != 0 {
		return false
	}
	p.stats.Cuts++
	return true
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// The listener is broken: nothing more to accept.
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			return
		}
		p.stats.Connections++
		c := &proxyConn{p: p, client: client}
		if p.blackhole {
			c.holed.Store(true)
		}
		p.conns[c] = struct{}{}
		target := p.target
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run(target)
	}
}

// proxyConn is one client connection and, unless it was accepted while
// black-holed, its connection to the server.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	holed  atomic.Bool // forward nothing
	cut    atomic.Bool // client side cut after a create

	mu           sync.Mutex
	server       net.Conn // nil until dialed
	serverClosed bool
	clientOnce   sync.Once
}

func (c *proxyConn) closeClient() {
	c.clientOnce.Do(func() { _ = c.client.Close() })
}

func (c *proxyConn) closeServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serverClosed {
		return
	}
	c.serverClosed = true
	if c.server != nil {
		_ = c.server.Close()
	}
}

func (c *proxyConn) closeBoth() {
	c.closeClient()
	c.closeServer()
	c.p.remove(c)
}

// run connects to the server unless black-holed, then forwards
// client->server frames; a second goroutine copies server->client bytes.
func (c *proxyConn) run(target string) {
	p := c.p
	defer p.wg.Done()
	var server net.Conn
	if !c.holed.Load() {
		s, err := net.DialTimeout("tcp", target, proxyDialTimeout)
		if err != nil {
			c.closeBoth()
			return
		}
		c.mu.Lock()
		if c.serverClosed { // dropped while dialing
			c.mu.Unlock()
			_ = s.Close()
			c.closeBoth()
			return
		}
		c.server = s
		c.mu.Unlock()
		server = s
		p.wg.Add(1)
		go c.serverToClient(server)
	}
	c.clientToServer(server)
}

// clientToServer forwards the client's frames to server (nil: discard),
// counting creates and cutting the connection when told to.
func (c *proxyConn) clientToServer(server net.Conn) {
	defer func() {
		if c.cut.Load() {
			// The server side is closed by the cut's timer.
			c.closeClient()
			return
		}
		c.closeBoth()
	}()
	r := bufio.NewReaderSize(c.client, 32<<10)
	var hdr [12]byte
	first := true
	for {
		if _, err := io.ReadFull(r, hdr[:4]); err != nil {
			return
		}
		n := int64(int32(binary.BigEndian.Uint32(hdr[:4])))
		if first && (n < 0 || n > maxFrame) {
			// Not a session: a four-letter word such as "ruok". Pass
			// the rest of the connection through as it is.
			c.raw(server, r, hdr[:4])
			return
		}
		if n < 0 || n > maxFrame {
			return
		}
		k := int64(0)
		op := int32(-1)
		if !first && n >= 8 {
			// Request header: int32 xid, int32 opcode.
			if _, err := io.ReadFull(r, hdr[4:12]); err != nil {
				return
			}
			k = 8
			op = int32(binary.BigEndian.Uint32(hdr[8:12]))
		}
		first = false
		if c.holed.Load() || server == nil {
			if _, err := io.CopyN(io.Discard, r, n-k); err != nil {
				return
			}
			continue
		}
		if _, err := server.Write(hdr[:4+k]); err != nil {
			return
		}
		if _, err := io.CopyN(server, r, n-k); err != nil {
			return
		}
		switch op {
		case opCreate, opCreate2, opCreateContainer, opCreateTTL, opMulti:
			if c.p.countCreate() {
				c.cutAfterCreate()
				return
			}
		}
	}
}

// raw copies the rest of a non-session connection unchanged (or discards
// it while black-holed).
func (c *proxyConn) raw(server net.Conn, r io.Reader, head []byte) {
	if c.holed.Load() || server == nil {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	if _, err := server.Write(head); err != nil {
		return
	}
	_, _ = io.Copy(server, r)
}

// cutAfterCreate closes the client side now and the server side a little
// later, so the server applies the create but its reply is lost.
func (c *proxyConn) cutAfterCreate() {
	c.cut.Store(true)
	c.closeClient()
	p := c.p
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(cutServerDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.done:
		}
		c.closeBoth()
	}()
}

// serverToClient copies the server's bytes to the client, dropping them
// while black-holed.
func (c *proxyConn) serverToClient(server net.Conn) {
	defer c.p.wg.Done()
	buf := make([]byte, 32<<10)
	clientOK := true
	for {
		n, err := server.Read(buf)
		if n > 0 && clientOK && !c.holed.Load() {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				clientOK = false
				if !c.cut.Load() {
					c.closeBoth()
					return
				}
				// Cut: keep draining the server until the cut's timer
				// closes it.
			}
		}
		if err != nil {
			if c.holed.Load() && !c.cut.Load() {
				// A partition hides the server's close from the client:
				// keep the client side open until the black hole ends.
				c.closeServer()
				return
			}
			c.closeBoth()
			return
		}
	}
}
