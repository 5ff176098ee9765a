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

// Op is the opcode of a ZooKeeper request, as the header of a client's
// frame carries it.
type Op int32

// The opcodes the proxy names (ZooKeeper's ZooDefs.OpCode).
const (
	OpCreate          Op = 1
	OpDelete          Op = 2
	OpExists          Op = 3
	OpGetData         Op = 4
	OpSetData         Op = 5
	OpGetACL          Op = 6
	OpSetACL          Op = 7
	OpGetChildren     Op = 8
	OpSync            Op = 9
	OpPing            Op = 11
	OpGetChildren2    Op = 12
	OpCheck           Op = 13
	OpMulti           Op = 14
	OpCreate2         Op = 15
	OpReconfig        Op = 16
	OpCheckWatches    Op = 17
	OpRemoveWatches   Op = 18
	OpCreateContainer Op = 19
	OpDeleteContainer Op = 20
	OpCreateTTL       Op = 21
	OpMultiRead       Op = 22
	OpSetAuth         Op = 100
	OpSetWatches      Op = 101
	OpSASL            Op = 102
	OpSetWatches2     Op = 105
	OpAddWatch        Op = 106
	OpClose           Op = -11
)

var opNames = map[Op]string{
	OpCreate: "create", OpDelete: "delete", OpExists: "exists", OpGetData: "getData",
	OpSetData: "setData", OpGetACL: "getACL", OpSetACL: "setACL", OpGetChildren: "getChildren",
	OpSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2", OpCheck: "check",
	OpMulti: "multi", OpCreate2: "create2", OpReconfig: "reconfig", OpCheckWatches: "checkWatches",
	OpRemoveWatches: "removeWatches", OpCreateContainer: "createContainer",
	OpDeleteContainer: "deleteContainer", OpCreateTTL: "createTTL", OpMultiRead: "multiRead",
	OpSetAuth: "setAuth", OpSetWatches: "setWatches", OpSASL: "sasl", OpSetWatches2: "setWatches2",
	OpAddWatch: "addWatch", OpClose: "closeSession",
}

// String returns ZooKeeper's name of the opcode ("getChildren2"), or
// "op(N)" for one the proxy does not name.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int32(o))
}

// creates reports whether the opcode creates a znode. A multi
// (transaction) counts as a create: the recipes use it to create several
// nodes at once.
func (o Op) creates() bool {
	switch o {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpMulti:
		return true
	}
	return false
}

// Fault is what the proxy does to a request picked by Arm.
type Fault uint8

// The faults Arm injects.
const (
	// LoseReply forwards the request to the server, forwards nothing more
	// from the client, waits for the server's reply to it (up to 2s),
	// discards that reply and cuts the connection: the server applied the
	// request, the client never sees the reply.
	LoseReply Fault = iota + 1
	// DropRequest discards the request and cuts the connection the same
	// way: the server never sees it, and the client sees a connection
	// loss.
	DropRequest
)

// String returns "lose reply" or "drop request".
func (f Fault) String() string {
	switch f {
	case LoseReply:
		return "lose reply"
	case DropRequest:
		return "drop request"
	}
	return fmt.Sprintf("fault(%d)", uint8(f))
}

// Direction is a set of directions of traffic through the proxy.
type Direction uint8

// The directions PartitionOneWay black-holes.
const (
	// ClientToServer is the client's requests (and pings).
	ClientToServer Direction = 1 << iota
	// ServerToClient is the server's replies and watch notifications.
	ServerToClient
	// BothWays is a full partition (Partition).
	BothWays = ClientToServer | ServerToClient
)

// String returns "client->server", "server->client", "both ways" or
// "none".
func (d Direction) String() string {
	switch d {
	case 0:
		return "none"
	case ClientToServer:
		return "client->server"
	case ServerToClient:
		return "server->client"
	case BothWays:
		return "both ways"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

const (
	// maxFrame bounds a client frame: far above jute.maxbuffer (1 MB by
	// default). A longer "length" on a connection's first frame is a
	// four-letter word, which the proxy passes through raw.
	maxFrame = 64 << 20
	// cutServerDelay is how long after cutting the client side the proxy
	// keeps the server side open, so the server still reads and applies
	// the requests it was sent.
	cutServerDelay = 100 * time.Millisecond
	// loseReplyWait bounds the wait for the reply a LoseReply discards:
	// past it, the connection is cut anyway.
	loseReplyWait    = 2 * time.Second
	proxyDialTimeout = 2 * time.Second
	// maxConnectFrame bounds the connect request the proxy reads whole
	// (about 50 bytes in practice); a longer first frame is forwarded
	// without looking at its session.
	maxConnectFrame = 4096
)

// ProxyStats counts what a Proxy has done.
type ProxyStats struct {
	// Connections is the number of client connections accepted.
	Connections int
	// Requests is the number of requests, pings aside, forwarded to a
	// server (the one whose reply is lost included).
	Requests int
	// Creates is the number of create requests (create, create2,
	// createContainer, createTTL, and multi transactions) forwarded to a
	// server.
	Creates int
	// Cuts is the number of connections cut after forwarding a request
	// (CutAfterCreates, and Arm with LoseReply).
	Cuts int
	// Dropped is the number of requests discarded by Arm with
	// DropRequest (each cut its connection).
	Dropped int
}

// Request is one request the proxy read from a client, as Recorded
// returns it. A connection's first frame (its connect request) and
// four-letter words are not requests.
type Request struct {
	// Conn numbers the connection, from 1 in the order the proxy
	// accepted them.
	Conn int
	Xid  int32
	Op   Op
	// Fault is what Arm or CutAfterCreates did to it (0: nothing).
	Fault Fault
	// Blackholed: a partition (Partition, PartitionOneWay) discarded it.
	Blackholed bool
}

// rule picks the requests a fault hits: the nth (every nth, when
// periodic) request whose opcode matches.
type rule struct {
	fault    Fault
	nth      int
	periodic bool
	ops      []Op // nil: every opcode but ping
	seen     int
}

func (r *rule) matches(op Op) bool {
	if r.ops == nil {
		return op != OpPing
	}
	for _, o := range r.ops {
		if o == op {
			return true
		}
	}
	return false
}

// hit counts a matching request and reports whether the fault hits it.
func (r *rule) hit() bool {
	r.seen++
	if r.periodic {
		return r.seen%r.nth == 0
	}
	return r.seen == r.nth
}

// Proxy is a fault-injecting TCP proxy between ZooKeeper clients and one
// server, on 127.0.0.1: point a client at Addr instead of the server, then
// inject faults while the test runs. It forwards bytes unchanged and
// parses the frames just enough to see each request's xid and opcode and
// each connection's session.
//
// The faults, and what a client sees:
//
//   - Partition, PartitionOneWay and Heal: a network partition, both ways
//     or one way, with the TCP connections left open: silence, until the
//     client gives up on the connection or the server expires the session.
//   - DropAll: every connection is closed; the client reconnects at once
//     and keeps its session.
//   - LoseNextReply, DropNextRequest, Arm and CutAfterCreates: one request
//     is applied but its reply lost, or dropped unseen; the connection is
//     cut, so the call fails with a connection error and the client
//     reconnects with its session.
//   - ExpireSessions: the server expires the sessions of the proxy's
//     clients now, as if they had been silent for their whole timeout;
//     their ephemeral nodes are deleted and each client is told its
//     session expired.
//
// Record and Recorded list the requests the proxy sees, Sessions the
// sessions on its connections, Retarget sends new connections to
// another server, and Stats counts what the proxy did.
type Proxy struct {
	ln   net.Listener
	done chan struct{} // closed by Close
	// bytes: a byte-level proxy (NewByteProxy), which parses nothing.
	bytes bool
	// greet, if set, forwards the first bytes a byte-level proxy reads
	// from a client (the ensemble's election links rewrite the address
	// a member announces there, see peers.go).
	greet func(r *bufio.Reader) ([]byte, error)

	mu        sync.Mutex
	target    string
	creates   *rule // CutAfterCreates
	armed     *rule // Arm
	holes     Direction
	recording bool
	recorded  []Request
	closed    bool
	conns     map[*proxyConn]struct{}
	expiring  map[int64]chan struct{} // sessions ExpireSessions is expiring
	stats     ProxyStats
	wg        sync.WaitGroup
}

// NewProxy starts a proxy listening on a free port of 127.0.0.1 that
// forwards to the ZooKeeper server at target ("host:port").
func NewProxy(target string) (*Proxy, error) {
	return newProxy(target, false, nil)
}

// NewByteProxy starts a proxy like NewProxy that forwards bytes without
// parsing them, for any TCP protocol: ZooKeeper's quorum and election
// links between the members of an ensemble (Ensemble.Partition puts
// such proxies between them), or a client of another protocol. Partition,
// PartitionOneWay, Heal, DropAll, Retarget, Stats.Connections and Close
// work as they do on a ZooKeeper client proxy, checked for every chunk
// of bytes read; the faults that need frames (Arm, CutAfterCreates,
// ExpireSessions, Record) see no requests and do nothing.
func NewByteProxy(target string) (*Proxy, error) {
	return newProxy(target, true, nil)
}

func newProxy(target string, bytes bool, greet func(*bufio.Reader) ([]byte, error)) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zktest: proxy: %w", err)
	}
	p := &Proxy{
		ln:     ln,
		done:   make(chan struct{}),
		bytes:  bytes,
		greet:  greet,
		target: target,
		conns:  make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients connect to, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAfterCreates makes the proxy lose the reply to every n-th create
// (LoseReply): it forwards the n-th, 2n-th, ... create request (counted
// across all connections from this call on) to the server, waits for its
// reply, discards it and cuts that connection, so the server applied the
// create and the client never sees the reply. Creates inside a multi
// request are not counted.
// n <= 0 disables cutting. It is independent of Arm.
func (p *Proxy) CutAfterCreates(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates = nil
	if n > 0 {
		p.creates = &rule{fault: LoseReply, nth: n, periodic: true,
			ops: []Op{OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpMulti}}
	}
}

// Arm makes the proxy inject f into the n-th request (n >= 1), counted
// across all connections from this call on, whose opcode is one of ops;
// with no ops, every request but pings counts. The connection is cut
// then (see LoseReply and DropRequest): the requests the client sent
// after it are not forwarded (nor, with DropRequest, the replies to
// earlier ones that the server had not sent yet). The rule
// fires once; Arm replaces a rule that has not fired yet, Disarm removes
// it. Requests black-holed by a partition do not count. Stats tells whether
// it fired (Cuts or Dropped).
func (p *Proxy) Arm(f Fault, n int, ops ...Op) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
	if (f == LoseReply || f == DropRequest) && n > 0 {
		p.armed = &rule{fault: f, nth: n, ops: append([]Op(nil), ops...)}
		if len(ops) == 0 {
			p.armed.ops = nil
		}
	}
}

// LoseNextReply makes the proxy lose the reply to the next request whose
// opcode is one of ops (with no ops, the next request but a ping): it is
// Arm(LoseReply, 1, ops...). The server applies the request; the client's
// call fails with a connection error (go-zookeeper's
// zk.ErrConnectionClosed) and the client reconnects, keeping its session,
// so the change is there when it looks again. Like Arm, it replaces a rule
// that has not fired yet.
func (p *Proxy) LoseNextReply(ops ...Op) { p.Arm(LoseReply, 1, ops...) }

// DropNextRequest makes the proxy drop the next request whose opcode is
// one of ops (with no ops, the next request but a ping): it is
// Arm(DropRequest, 1, ops...). The server never sees the request; the
// client's call fails with a connection error (zk.ErrConnectionClosed)
// and the client reconnects, keeping its session. Like Arm, it replaces a
// rule that has not fired yet.
func (p *Proxy) DropNextRequest(ops ...Op) { p.Arm(DropRequest, 1, ops...) }

// Disarm removes the rule set by Arm, if it has not fired.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
}

// Record starts a new recording of the requests the proxy reads from its
// clients (pings included), discarding the previous one.
func (p *Proxy) Record() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recording = true
	p.recorded = nil
}

// Recorded returns the requests read since Record, in the order the proxy
// read them, and stops recording.
func (p *Proxy) Recorded() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recording = false
	out := p.recorded
	p.recorded = nil
	return out
}

// Partition black-holes the traffic between the proxy's clients and the
// server in both directions, like a network partition, on current and new
// connections, while the TCP connections stay open: the proxy reads the
// bytes each side sends and discards them, and hides from the client a
// server closing its side. A connection accepted during the partition is
// held open but not connected to a server.
//
// What a client sees: silence. Its requests and pings get no answer, so
// go-zookeeper gives up on the connection after 2/3 of the session
// timeout and keeps reconnecting (to connections that stay silent), and
// a recipe.Client tells its holders they lost ownership (recipe.ErrLost
// with recipe.ErrConnectionSuspended) once it has heard nothing for its
// loss timeout (by default half the session timeout). The server expires
// the session once it has heard nothing for the session timeout. Heal
// ends the partition.
func (p *Proxy) Partition() { p.partition(BothWays) }

// PartitionOneWay black-holes the traffic in direction d only
// (ClientToServer or ServerToClient), on current and new connections,
// like Partition does for both. With client->server traffic black-holed
// the server hears nothing (and expires the session after its timeout)
// while its notifications still reach the client; with server->client
// traffic black-holed the server applies the client's requests and keeps
// the session alive, but the client sees no reply and gives up on the
// connection after 2/3 of the session timeout.
//
// PartitionOneWay(BothWays) is Partition, PartitionOneWay(0) is Heal.
// Going from one direction to the other lifts the first: the connections
// on which it was black-holed are closed, as Heal closes them.
func (p *Proxy) PartitionOneWay(d Direction) { p.partition(d) }

// Heal lifts any partition (Partition, PartitionOneWay). Since the
// streams of the connections that were partitioned lost bytes, Heal
// closes them, both sides: the client reconnects at once, through the
// proxy, and gets its session back if the server has not expired it (or
// is told it expired: go-zookeeper's StateExpired). New connections are
// forwarded normally.
func (p *Proxy) Heal() { p.partition(0) }

// partition black-holes the directions d, closing the connections on
// which a direction not in d was black-holed.
func (p *Proxy) partition(d Direction) {
	d &= BothWays
	p.mu.Lock()
	p.holes = d
	var lifted []*proxyConn
	for c := range p.conns {
		old := Direction(c.holes.Load())
		if old&^d != 0 {
			lifted = append(lifted, c)
			continue
		}
		c.holes.Store(uint32(d))
	}
	p.mu.Unlock()
	for _, c := range lifted {
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

// decide records a request read from connection c and returns the fault
// to inject into it (0: forward it). blackholed requests are only
// recorded.
func (p *Proxy) decide(c *proxyConn, xid int32, op Op, blackholed bool) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	var f Fault
	if !blackholed {
		for _, r := range []*rule{p.armed, p.creates} {
			if r != nil && r.matches(op) && r.hit() && f == 0 {
				f = r.fault
				if r == p.armed {
					p.armed = nil
				}
			}
		}
		switch f {
		case DropRequest:
			p.stats.Dropped++
		case LoseReply:
			p.stats.Cuts++
		}
		if f != DropRequest {
			if op != OpPing {
				p.stats.Requests++
			}
			if op.creates() {
				p.stats.Creates++
			}
		}
	}
	if p.recording {
		p.recorded = append(p.recorded, Request{Conn: c.id, Xid: xid, Op: op, Fault: f, Blackholed: blackholed})
	}
	return f
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
		c := &proxyConn{p: p, client: client, id: p.stats.Connections, target: p.target, greet: p.greet}
		c.holes.Store(uint32(p.holes))
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// proxyConn is one client connection and, unless it was accepted while
// client->server traffic was black-holed, its connection to the server.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	id     int
	target string // the server this connection is (or would be) forwarded to
	greet  func(*bufio.Reader) ([]byte, error)
	holes  atomic.Uint32 // Direction black-holed
	cut    atomic.Bool   // client side cut by a fault
	raw4lw atomic.Bool   // a four-letter word, not a session: no frames
	// losing: the reply to the request with xid loseXid is to be
	// discarded, and the connection cut (LoseReply).
	losing  atomic.Bool
	loseXid atomic.Int32

	mu           sync.Mutex
	server       net.Conn // nil until dialed
	serverClosed bool
	clientOnce   sync.Once
	sess         session // seen in the connect request, then its response
}

func (c *proxyConn) holed(d Direction) bool {
	return Direction(c.holes.Load())&d != 0
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

// run connects to the server unless client->server traffic is
// black-holed, then forwards client->server frames; a second goroutine
// copies server->client bytes.
func (c *proxyConn) run() {
	p := c.p
	defer p.wg.Done()
	var server net.Conn
	if !c.holed(ClientToServer) {
		s, err := net.DialTimeout("tcp", c.target, proxyDialTimeout)
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
// one whole frame at a time, and injects the faults decide picks.
func (c *proxyConn) clientToServer(server net.Conn) {
	defer c.endClientToServer()
	r := bufio.NewReaderSize(c.client, 32<<10)
	if c.p.bytes {
		c.copyBytes(server, r, ClientToServer, c.greet)
		return
	}
	if !c.forwardConnect(server, r) {
		return
	}
	for c.forwardRequest(server, r) {
	}
}

// endClientToServer closes what clientToServer leaves behind.
func (c *proxyConn) endClientToServer() {
	switch {
	case c.losing.Load():
		// serverToClient cuts when the reply comes.
	case c.cut.Load():
		// The server side is closed by the cut's timer.
		c.closeClient()
	default:
		c.closeBoth()
	}
}

// readLength reads a frame's length, the first 4 bytes of hdr.
func readLength(r io.Reader, hdr []byte) (int64, error) {
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return 0, err
	}
	return int64(int32(binary.BigEndian.Uint32(hdr[:4]))), nil
}

// forwardConnect forwards the connection's first frame: a four-letter
// word, after which the rest of the connection passes as it is, or the
// connect request, whose session it remembers (a request resuming a
// session being expired waits until the session is gone). It reports
// whether request frames follow.
func (c *proxyConn) forwardConnect(server net.Conn, r *bufio.Reader) bool {
	var hdr [4]byte
	n, err := readLength(r, hdr[:])
	if err != nil {
		return false
	}
	if n < 0 || n > maxFrame {
		// Not a session: a four-letter word such as "ruok".
		c.raw(server, r, hdr[:])
		return false
	}
	frame := make([]byte, 4+n)
	copy(frame, hdr[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return false
	}
	if s, ok := parseConnectRequest(frame[4:]); n <= maxConnectFrame && ok {
		c.setSession(s)
		if !c.p.awaitExpiry(s.id) {
			return false
		}
	}
	if c.holed(ClientToServer) || server == nil {
		return true
	}
	_, err = server.Write(frame)
	return err == nil
}

// forwardRequest forwards one request frame, injecting the fault decide
// picks for it, or discards it while client->server traffic is
// black-holed. It reports whether to go on with the next frame.
func (c *proxyConn) forwardRequest(server net.Conn, r *bufio.Reader) bool {
	var hdr [12]byte
	n, err := readLength(r, hdr[:])
	if err != nil || n < 0 || n > maxFrame {
		return false
	}
	k := int64(0)
	if n >= 8 {
		// Request header: int32 xid, int32 opcode.
		if _, err := io.ReadFull(r, hdr[4:12]); err != nil {
			return false
		}
		k = 8
	}
	holed := c.holed(ClientToServer) || server == nil
	var f Fault
	xid := int32(binary.BigEndian.Uint32(hdr[4:8]))
	if k > 0 {
		f = c.p.decide(c, xid, Op(int32(binary.BigEndian.Uint32(hdr[8:12]))), holed)
	}
	switch {
	case holed:
		_, err := io.CopyN(io.Discard, r, n-k)
		return err == nil
	case f == DropRequest:
		c.cutNow()
		return false
	case f == LoseReply:
		// Before the request goes: its reply may come at once.
		c.loseXid.Store(xid)
		c.losing.Store(true)
	}
	if _, err := server.Write(hdr[:4+k]); err != nil {
		return false
	}
	if _, err := io.CopyN(server, r, n-k); err != nil {
		return false
	}
	if f == LoseReply {
		c.cutLater()
		return false
	}
	return true
}

// raw copies the rest of a non-session connection unchanged (or discards
// it while client->server traffic is black-holed).
func (c *proxyConn) raw(server net.Conn, r io.Reader, head []byte) {
	if c.holed(ClientToServer) || server == nil {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	c.raw4lw.Store(true)
	if _, err := server.Write(head); err != nil {
		return
	}
	_, _ = io.Copy(server, r)
}

// cutNow closes the client side now and the server side a little later,
// so the server applies what it was sent but the client sees no reply.
func (c *proxyConn) cutNow() {
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

// cutLater cuts the connection after loseReplyWait, in case the reply
// LoseReply waits for (to discard it and cut) never comes.
func (c *proxyConn) cutLater() {
	p := c.p
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(loseReplyWait)
		defer t.Stop()
		select {
		case <-t.C:
			c.cutNow()
		case <-p.done:
		}
	}()
}

// serverToClient forwards the server's frames to the client, dropping
// them while server->client traffic is black-holed and cutting the
// connection instead of forwarding a reply LoseReply loses. A
// four-letter word's answer is copied as it is.
func (c *proxyConn) serverToClient(server net.Conn) {
	defer c.p.wg.Done()
	r := bufio.NewReaderSize(server, 32<<10)
	if c.p.bytes {
		c.copyBytes(c.client, r, ServerToClient, nil)
		c.endServerToClient()
		return
	}
	frame := make([]byte, 0, 32<<10)
	clientOK := true
	for first := true; ; first = false {
		var err error
		if frame, err = c.readServerFrame(r, frame); err != nil {
			c.endServerToClient()
			return
		}
		// The first frame is the connect response; replies start with
		// the request's xid.
		if first {
			c.noteConnectResponse(frame)
		} else if c.losesReply(frame) {
			c.cutNow()
			clientOK = false
		}
		if !clientOK || c.holed(ServerToClient) {
			continue
		}
		if _, err := c.client.Write(frame); err != nil {
			clientOK = false
			if !c.cut.Load() {
				c.closeBoth()
				return
			}
			// Cut: keep draining the server until the cut's timer
			// closes it.
		}
	}
}

// readServerFrame reads the server's next frame into frame. On a
// four-letter word's connection it copies the rest of the answer as it is
// (or discards it while server->client traffic is black-holed) and
// returns io.EOF.
func (c *proxyConn) readServerFrame(r *bufio.Reader, frame []byte) ([]byte, error) {
	if _, err := r.Peek(1); err != nil {
		return frame, err
	}
	if c.raw4lw.Load() {
		var w io.Writer = c.client
		if c.holed(ServerToClient) {
			w = io.Discard
		}
		if _, err := io.Copy(w, r); err != nil {
			return frame, err
		}
		return frame, io.EOF
	}
	frame = frame[:4]
	if _, err := io.ReadFull(r, frame); err != nil {
		return frame, err
	}
	n := int64(int32(binary.BigEndian.Uint32(frame)))
	if n < 0 || n > maxFrame {
		return frame, fmt.Errorf("zktest: proxy: server frame of %d bytes", n)
	}
	frame = append(frame[:4], make([]byte, n)...)
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// noteConnectResponse remembers the session a connect response frame
// grants.
func (c *proxyConn) noteConnectResponse(frame []byte) {
	if s, ok := parseConnectResponse(frame[4:]); ok {
		c.setSession(s)
	}
}

// losesReply reports whether frame is the reply LoseReply loses.
func (c *proxyConn) losesReply(frame []byte) bool {
	return len(frame) >= 8 && c.losing.Load() && int32(binary.BigEndian.Uint32(frame[4:8])) == c.loseXid.Load()
}

// endServerToClient closes what the end of the server's stream leaves:
// the connection LoseReply cuts; under a partition of server->client
// traffic only the server side, hiding the close from the client until
// the partition ends; else both sides.
func (c *proxyConn) endServerToClient() {
	switch {
	case c.losing.Load():
		c.cutNow()
	case c.holed(ServerToClient) && !c.cut.Load():
		c.closeServer()
	default:
		c.closeBoth()
	}
}

// copyBytes copies src to dst (nil: discard) until either fails, chunk
// by chunk, discarding the chunks read while direction d is black-holed.
// greet, if set, first reads and forwards the opening of the stream in a
// form of its own.
func (c *proxyConn) copyBytes(dst net.Conn, src *bufio.Reader, d Direction, greet func(*bufio.Reader) ([]byte, error)) {
	if greet != nil {
		b, err := greet(src)
		if err != nil {
			return
		}
		if dst != nil && !c.holed(d) {
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !c.holed(d) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
