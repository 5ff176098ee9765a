package recipe_test

// A hostile wire: frames no correct ZooKeeper server sends, from a fake
// server that speaks the handshake and then sends one, and from a
// tampering proxy in front of a real server that injects or rewrites one
// on a live connection. Each must end the connection (the client dials
// again), panic nothing, drive no large allocation, and leave the client
// able to take a lock afterwards. The frames are given as bytes: the
// 4-byte length, then the body.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// hexFrame decodes a frame written as hex with spaces between fields.
func hexFrame(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// The frames of the hostile-wire tests, sent after a good handshake.
var hostileFrames = []struct {
	name  string
	frame []byte
}{
	// Length 4, xid -1 (a watch event): go-zookeeper v1.0.4 slices
	// buf[16:4].
	{"short watch event", hexFrame("00000004 ffffffff")},
	// Length 12, xid -1: buf[16:12].
	{"12-byte watch event", hexFrame("0000000c ffffffff 00000000 00000005")},
	// Length 4, an xid never sent.
	{"short reply to an unknown xid", hexFrame("00000004 00003039")},
	// A whole reply header (xid, zxid, error) for an xid never sent.
	{"reply to an unknown xid", hexFrame("00000010 00003039 0000000000000001 00000000")},
	// A watch event whose path's length runs past the frame.
	{"string past the frame", hexFrame("0000001d ffffffff ffffffffffffffff 00000000 00000004 00000003 00100000 2f")},
	// A frame announcing 0xfffffff0 bytes (4 GiB); a few bytes follow.
	{"frame of 0xfffffff0 bytes", hexFrame("fffffff0 00000001 0000000000000001 00000000")},
}

// The connect responses of the hostile-wire tests: protocol version,
// granted timeout, session id, password.
var hostileConnects = []struct {
	name  string
	frame []byte
}{
	{"granted timeout 0", hexFrame("00000024 00000000 00000000 0000000000001234 00000010 00112233445566778899aabbccddeeff")},
	{"granted timeout -1", hexFrame("00000024 00000000 ffffffff 0000000000001234 00000010 00112233445566778899aabbccddeeff")},
	// A length of 2 GiB for the connect response itself.
	{"connect response of 0x7ffffff0 bytes", hexFrame("7ffffff0 00000000 00000fa0 0000000000001234")},
	// A password of 1 MiB, announced and not sent.
	{"password of 1 MiB", hexFrame("00000024 00000000 00000fa0 0000000000001234 00100000 00112233445566778899aabbccddeeff")},
}

// goodConnect is the connect response of the fake server: a 4 s session.
var goodConnect = hexFrame("00000024 00000000 00000fa0 0000000000001234 00000010 00112233445566778899aabbccddeeff")

// readFrame reads one frame (length and body) of at most max bytes.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, hdr[:])
	_, err := io.ReadFull(r, b[4:])
	return b, err
}

// countingDialer dials over TCP and counts the dials.
type countingDialer struct{ n atomic.Int64 }

func (d *countingDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.n.Add(1)
	return net.DialTimeout(network, addr, timeout)
}

// fakeServer accepts connections on loopback. Its first connection is its
// own: it reads the connect request and answers with connect (a good
// response, or a hostile one), then, if after is set, sends after. Later
// connections are passed to upstream (a real server), so that the client
// can go on.
type fakeServer struct {
	t        testing.TB
	ln       net.Listener
	upstream string
	connect  []byte
	after    []byte
	filler   int // bytes of filler sent after the hostile frame, until the client hangs up

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	n      int
	sentAt time.Time     // when the hostile frame went out
	hungUp chan struct{} // closed when the client ends the first connection
	hungAt time.Time
}

func startFakeServer(t testing.TB, upstream string, connect, after []byte, filler int) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, ln: ln, upstream: upstream, connect: connect, after: after, filler: filler, hungUp: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		first := s.n == 0
		s.n++
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		if first {
			go s.hostile(c)
		} else {
			go s.pass(c)
		}
	}
}

// hostile serves the first connection.
func (s *fakeServer) hostile(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	defer close(s.hungUp)
	if _, err := readFrame(c, 1<<20); err != nil {
		return
	}
	if _, err := c.Write(s.connect); err != nil {
		return
	}
	if s.after != nil {
		// Let the client take the session, then send the frame.
		time.Sleep(50 * time.Millisecond)
		if _, err := c.Write(s.after); err != nil {
			return
		}
	}
	s.mu.Lock()
	s.sentAt = time.Now()
	s.mu.Unlock()
	// The filler, as fast as the client takes it, while it keeps the
	// connection; then read until it hangs up.
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, c)
	}()
	chunk := make([]byte, 64<<10)
	for sent := 0; sent < s.filler; sent += len(chunk) {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(chunk); err != nil {
			break
		}
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
	}
	s.mu.Lock()
	s.hungAt = time.Now()
	s.mu.Unlock()
}

// pass forwards a later connection to the upstream server.
func (s *fakeServer) pass(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	if s.upstream == "" {
		return
	}
	up, err := net.DialTimeout("tcp", s.upstream, 5*time.Second)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conns = append(s.conns, up)
	s.mu.Unlock()
	defer up.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.Close()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	<-done
}

// hangUpDelay is how long the client kept the first connection after
// the hostile frame went out.
func (s *fakeServer) hangUpDelay(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	select {
	case <-s.hungUp:
	case <-time.After(within):
		t.Fatalf("the client kept the connection for %v after the hostile frame", within)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hungAt.Sub(s.sentAt)
}

// hostileClient connects a client through addr with a 4 s session and
// counts its dials.
func hostileClient(t testing.TB, addr string, opts ...recipe.Option) (*recipe.Client, *countingDialer) {
	t.Helper()
	d := &countingDialer{}
	c := locktest.Client(t, []string{addr}, append([]recipe.Option{recipe.WithDialer(d.dial)}, opts...)...)
	return c, d
}

// hostileBound is B for the 4 s sessions of these tests: a lock is taken
// within it once the bad frame is refused (as the simulation's
// simLiveBound: 1.5 sessions and a second).
const hostileBound = 7 * time.Second

// lockWithin takes and releases a free lock within bound.
func lockWithin(t testing.TB, c *recipe.Client, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	begin := time.Now()
	h, err := newLock(t, c, zktest.UniquePath(t)).Acquire(ctx)
	if err != nil {
		t.Fatalf("a free lock not taken within %v: %v", bound, err)
	}
	t.Logf("a free lock taken in %v", time.Since(begin).Round(time.Millisecond))
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// allocated returns a function that returns the bytes allocated since
// (by the whole process: the tests of this file do not run in parallel).
func allocated() func() uint64 {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() uint64 {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
}

// checkAlloc fails the test if n bytes allocated are more than a client
// that meets a hostile frame may allocate.
func checkAlloc(t testing.TB, n uint64) {
	t.Helper()
	if n > hostileAllocLimit {
		t.Errorf("%d MiB allocated, want under %d MiB (twice the frame cap and a margin)", n>>20, hostileAllocLimit>>20)
	}
}

// Against a fake server: the handshake, then the frame. The client ends
// the connection at once (well before its ping timeout), dials again,
// and, passed to a real server, takes a lock.
func TestHostileServerFrames(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range hostileFrames {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFakeServer(t, srv.Addr(), goodConnect, tc.frame, 1<<20)
			alloc := allocated()
			c, d := hostileClient(t, fake.addr())
			delay := fake.hangUpDelay(t, 10*time.Second)
			checkAlloc(t, alloc())
			if delay > time.Second {
				t.Errorf("the client kept the connection %v after the frame %x", delay, tc.frame[:min(len(tc.frame), 24)])
			}
			locktest.Eventually(t, 10*time.Second, "a second dial", func() bool { return d.n.Load() >= 2 })
			checkTapRefused(t, c)
			lockWithin(t, c, hostileBound)
		})
	}
}

// checkTapRefused fails the test unless the client's wire tap refused a
// frame (rather than go-zookeeper reading it).
func checkTapRefused(t testing.TB, c *recipe.Client) {
	t.Helper()
	if n := c.Stats().RefusedFrames; n < 1 {
		t.Errorf("RefusedFrames = %d: the wire tap let the frame through", n)
	}
}

// Against a fake server whose connect response is hostile: the client
// refuses it, dials again, and, passed to a real server, takes a lock.
func TestHostileServerConnect(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range hostileConnects {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFakeServer(t, srv.Addr(), tc.frame, nil, 1<<20)
			alloc := allocated()
			c, d := hostileClient(t, fake.addr())
			fake.hangUpDelay(t, 10*time.Second)
			checkAlloc(t, alloc())
			if n := d.n.Load(); n < 2 {
				t.Errorf("%d dials: the client kept the hostile connection", n)
			}
			checkTapRefused(t, c)
			lockWithin(t, c, hostileBound)
		})
	}
}

// tamperProxy is a proxy in front of a real server that reads the
// server's frames one by one and lets a rule replace any of them, on
// the first connection only; later connections pass untouched. It reads
// the client's requests to know which opcode each reply answers.
type tamperProxy struct {
	ln     net.Listener
	target string
	// rule returns what to send for the i-th frame of the server (0: the
	// connect response) of the first connection; op is the opcode of the
	// request it answers (0 if none).
	rule func(i int, op int32, frame []byte) []byte

	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	n       int
	ops     map[int32]int32 // xid to opcode, first connection
	fired   chan struct{}   // closed when rule changed a frame
	firedAt time.Time
	once    sync.Once
	ended   chan struct{} // closed when the first connection ends
}

func startTamperProxy(t testing.TB, target string, rule func(i int, op int32, frame []byte) []byte) *tamperProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tamperProxy{ln: ln, target: target, rule: rule, ops: map[int32]int32{}, fired: make(chan struct{}), ended: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *tamperProxy) addr() string { return p.ln.Addr().String() }

func (p *tamperProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		first := p.n == 0
		p.n++
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c, up, first)
	}
}

func (p *tamperProxy) serve(c, up net.Conn, first bool) {
	defer p.wg.Done()
	defer c.Close()
	defer up.Close()
	if first {
		defer close(p.ended)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer up.Close()
		if !first {
			io.Copy(up, c)
			return
		}
		for i := 0; ; i++ {
			f, err := readFrame(c, 64<<20)
			if err != nil {
				return
			}
			if i > 0 && len(f) >= 12 {
				xid, op := int32(binary.BigEndian.Uint32(f[4:])), int32(binary.BigEndian.Uint32(f[8:]))
				p.mu.Lock()
				p.ops[xid] = op
				p.mu.Unlock()
			}
			if _, err := up.Write(f); err != nil {
				return
			}
		}
	}()
	defer func() { c.Close(); <-done }()
	if !first {
		io.Copy(c, up)
		return
	}
	for i := 0; ; i++ {
		f, err := readFrame(up, 64<<20)
		if err != nil {
			return
		}
		var op int32
		if i > 0 && len(f) >= 8 {
			p.mu.Lock()
			op = p.ops[int32(binary.BigEndian.Uint32(f[4:]))]
			p.mu.Unlock()
		}
		out := f
		if p.rule != nil {
			if r := p.rule(i, op, f); r != nil && !bytes.Equal(r, f) {
				out = r
				p.once.Do(func() {
					p.mu.Lock()
					p.firedAt = time.Now()
					p.mu.Unlock()
					close(p.fired)
				})
			}
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// awaitTamper waits until the rule has changed a frame and the client
// has ended that connection, and returns how long it kept it.
func (p *tamperProxy) awaitTamper(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	timeout := time.After(within)
	select {
	case <-p.fired:
	case <-timeout:
		t.Fatalf("no frame tampered with within %v", within)
	}
	select {
	case <-p.ended:
	case <-timeout:
		t.Fatalf("the client kept the tampered connection for %v", within)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.firedAt)
}

// The opcodes the tampering rules look for.
const (
	opGetChildren  = 8
	opGetChildren2 = 12
)

// zxidBack returns a rule that rewrites the zxid of the first reply to a
// request (xid > 0) read after one with a zxid above 1 to 1.
func zxidBack() func(i int, op int32, f []byte) []byte {
	var seen, done bool
	return func(i int, op int32, f []byte) []byte {
		if i == 0 || done || len(f) < 20 || int32(binary.BigEndian.Uint32(f[4:])) <= 0 {
			return nil
		}
		if int64(binary.BigEndian.Uint64(f[8:])) <= 1 {
			return nil
		}
		if !seen {
			seen = true
			return nil
		}
		done = true
		g := bytes.Clone(f)
		binary.BigEndian.PutUint64(g[8:], 1)
		return g
	}
}

// The same frames, and rewritten replies, on a live connection to a real
// server: the client ends it at once, dials again and takes a lock within
// B (before the change: the unknown xid wedged the tap, and every Lock
// failed for a minute with "no trusted session yet").
func TestHostileTamper(t *testing.T) {
	srv := zktest.Shared(t)
	type rule = func(i int, op int32, f []byte) []byte
	inject := func(frame []byte) rule {
		// Before the first reply after the connect response.
		return func(i int, op int32, f []byte) []byte {
			if i == 1 {
				return append(append([]byte(nil), frame...), f...)
			}
			return nil
		}
	}
	cases := []struct {
		name string
		rule rule
	}{
		{"connect response granting 0 ms", func(i int, op int32, f []byte) []byte {
			if i == 0 && len(f) >= 12 {
				g := bytes.Clone(f)
				binary.BigEndian.PutUint32(g[8:], 0)
				return g
			}
			return nil
		}},
		{"connect response granting -1 ms", func(i int, op int32, f []byte) []byte {
			if i == 0 && len(f) >= 12 {
				g := bytes.Clone(f)
				binary.BigEndian.PutUint32(g[8:], 0xffffffff)
				return g
			}
			return nil
		}},
		// A getChildren reply whose vector count is 2^31-1.
		{"listing of 2^31-1 children", func(i int, op int32, f []byte) []byte {
			if (op == opGetChildren || op == opGetChildren2) && len(f) >= 24 && binary.BigEndian.Uint32(f[16:]) == 0 {
				g := bytes.Clone(f)
				binary.BigEndian.PutUint32(g[20:], 0x7fffffff)
				return g
			}
			return nil
		}},
		// The zxid of a reply to a request rewritten to 1, below one the
		// client has read.
		{"zxid going backwards", zxidBack()},
	}
	for _, tc := range hostileFrames {
		cases = append(cases, struct {
			name string
			rule rule
		}{tc.name, inject(tc.frame)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startTamperProxy(t, srv.Addr(), tc.rule)
			c, d := hostileClient(t, p.addr())
			// Traffic, so that there are replies to tamper with.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
				defer cancel()
				if h, err := newLock(t, c, zktest.UniquePath(t)).Acquire(ctx); err == nil {
					h.Release(ctx)
				}
			}()
			kept := p.awaitTamper(t, 10*time.Second)
			if kept > time.Second {
				t.Errorf("the client kept the tampered connection for %v", kept)
			}
			locktest.Eventually(t, 10*time.Second, "a second dial", func() bool { return d.n.Load() >= 2 })
			checkTapRefused(t, c)
			lockWithin(t, c, hostileBound)
		})
	}
}

// The reply to an unknown xid on a connection that has been healthy for
// a while: before the change it desynchronised the tap for good.
func TestHostileUnknownXidOnHealthyConnection(t *testing.T) {
	srv := zktest.Shared(t)
	var armed atomic.Bool
	frame := hexFrame("00000004 00003039")
	p := startTamperProxy(t, srv.Addr(), func(i int, op int32, f []byte) []byte {
		if i > 0 && armed.Load() {
			armed.Store(false)
			return append(append([]byte(nil), frame...), f...)
		}
		return nil
	})
	c, d := hostileClient(t, p.addr())
	lockWithin(t, c, hostileBound)
	armed.Store(true)
	lockWithin(t, c, hostileBound) // its replies carry the frame
	if kept := p.awaitTamper(t, 10*time.Second); kept > time.Second {
		t.Errorf("the client kept the connection %v after the frame", kept)
	}
	for i := range 3 {
		begin := time.Now()
		lockWithin(t, c, hostileBound)
		t.Logf("lock %d after the frame: %v, %d dials", i, time.Since(begin).Round(time.Millisecond), d.n.Load())
	}
	if n := d.n.Load(); n < 2 {
		t.Errorf("%d dials: the connection with the frame was kept", n)
	}
	checkTapRefused(t, c)
}

// httpSession is the session timeout of the clients pointed at an HTTP
// server: 2570 ms is 0x0a0a, so the connect request has a line end, and
// the HTTP server answers "HTTP/1.1 400 Bad Request" at once (without
// one it waits for the rest of the request line), whose first four
// bytes, "HTTP", read as a length, are 1.2 GB.
const httpSession = 2570 * time.Millisecond

// A client pointed at an HTTP server by mistake: Connect fails when its
// context ends, and nothing large is allocated (see TestHostileMemory).
func TestHostileHTTPServer(t *testing.T) {
	addr := startHTTP(t)
	d := &countingDialer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := recipe.Connect(ctx, []string{addr}, recipe.WithDialer(d.dial), recipe.WithSessionTimeout(httpSession))
	if err == nil {
		c.Close()
		t.Fatal("Connect to an HTTP server succeeded")
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("Connect: %v; %d dials, %d MiB allocated", err, d.n.Load(), (after.TotalAlloc-before.TotalAlloc)>>20)
	if d.n.Load() < 2 {
		t.Errorf("%d dials in 2 s", d.n.Load())
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > hostileAllocLimit {
		t.Errorf("%d MiB allocated against an HTTP server, want under %d MiB", a>>20, hostileAllocLimit>>20)
	}
}

// startHTTP starts an HTTP server on loopback.
func startHTTP(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// The default frame cap (8 MiB), and the margins of the memory checks:
// the peak RSS of a process that met a hostile frame stays under the cap
// plus hostileRSSMargin (a Go test binary with a client peaks at 11 to
// 13 MiB; before the change, 388 to 716 MiB),
// and what it allocates under hostileAllocLimit.
const (
	hostileCap        = recipe.DefaultMaxFrame
	hostileRSSMargin  = 32 << 20
	hostileAllocLimit = 2*hostileCap + 32<<20
)

// hostileMemEnv names the case TestHostileMemoryChild runs.
const hostileMemEnv = "ZKRECIPES_TEST_HOSTILE_MEM"

// Each frame that announces a large size, in a process of its own whose
// peak RSS (VmHWM) is measured: the server sends 256 MiB after the
// announcement, as fast as the client reads, for three connections.
// Before the change go-zookeeper allocated what the length said (4 GiB
// per connection) and filled it.
func TestHostileMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process per case")
	}
	for _, name := range []string{"frame", "connect", "http"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHostileMemoryChild$", "-test.v")
			cmd.Env = append(os.Environ(), hostileMemEnv+"="+name)
			out, err := cmd.CombinedOutput()
			hwm, alloc, ok := parseMem(string(out))
			if !ok {
				t.Fatalf("no measure in the child's output (%v):\n%s", err, tail(out, 4000))
			}
			t.Logf("%s: peak RSS %d MiB, %d MiB allocated", name, hwm>>20, alloc>>20)
			if err != nil {
				t.Errorf("the child process failed: %v\n%s", err, tail(out, 4000))
			}
			if hwm > hostileCap+hostileRSSMargin {
				t.Errorf("peak RSS %d MiB, want under the cap and a margin: %d MiB", hwm>>20, (hostileCap+hostileRSSMargin)>>20)
			}
			if alloc > hostileAllocLimit {
				t.Errorf("%d MiB allocated, want under %d MiB", alloc>>20, hostileAllocLimit>>20)
			}
		})
	}
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// parseMem reads the child's "hostile-mem: hwm=N alloc=N" line.
func parseMem(out string) (hwm, alloc uint64, ok bool) {
	for line := range strings.Lines(out) {
		if rest, found := strings.CutPrefix(strings.TrimSpace(line), "hostile-mem: "); found {
			_, err := fmt.Sscanf(rest, "hwm=%d alloc=%d", &hwm, &alloc)
			return hwm, alloc, err == nil
		}
	}
	return 0, 0, false
}

// vmHWM returns the process's peak resident set size.
func vmHWM() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// TestHostileMemoryChild is the process of TestHostileMemory; it does
// nothing unless started by it.
func TestHostileMemoryChild(t *testing.T) {
	name := os.Getenv(hostileMemEnv)
	if name == "" {
		t.Skip("run by TestHostileMemory")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	var addr string
	switch name {
	case "frame":
		addr = startMemServer(t, goodConnect, hexFrame("fffffff0 00000001 0000000000000001 00000000"))
	case "connect":
		addr = startMemServer(t, hexFrame("7ffffff0 00000000 00000fa0 0000000000001234"), nil)
	case "http":
		addr = startHTTP(t)
	default:
		t.Fatalf("unknown case %q", name)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	session := 4 * time.Second
	if name == "http" {
		session = httpSession
	}
	c, err := recipe.Connect(ctx, []string{addr}, recipe.WithSessionTimeout(session))
	if err == nil {
		// The fake server's session: let the client meet the frame.
		<-ctx.Done()
		c.Close()
	}
	runtime.ReadMemStats(&after)
	hwm, err := vmHWM()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("hostile-mem: hwm=%d alloc=%d\n", hwm, after.TotalAlloc-before.TotalAlloc)
}

// startMemServer serves three connections: each gets connect, then after
// (if set), then up to 256 MiB of filler, as fast as the client reads;
// later connections are closed at once.
func startMemServer(t testing.TB, connect, after []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n >= 3 {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := readFrame(c, 1<<20); err != nil {
					return
				}
				msg := append(bytes.Clone(connect), after...)
				if _, err := c.Write(msg); err != nil {
					return
				}
				chunk := make([]byte, 64<<10)
				for sent := 0; sent < 256<<20; sent += len(chunk) {
					c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
