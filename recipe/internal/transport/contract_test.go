package transport_test

// The contract with go-zookeeper. The wire tap (wire.go) and the
// connection under it (conn.go) rest on how go-zookeeper uses its
// connection, which is not its API. Each test here pins one of those
// assumptions on the go-zookeeper version in go.mod, against a real
// server, by recording go-zookeeper's own connection: no code of ours is
// between them. scripts/contract-breaks.sh builds go-zookeeper with each
// assumption broken on purpose (testdata/contract/*.patch) and checks that
// the test named in the patch fails.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// wireRecorder dials connections that record what go-zookeeper does with
// them.
type wireRecorder struct {
	mu    sync.Mutex
	conns []*recConn
}

func (w *wireRecorder) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c}
	w.mu.Lock()
	w.conns = append(w.conns, rc)
	w.mu.Unlock()
	return rc, nil
}

func (w *wireRecorder) all() []*recConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.conns)
}

func (w *wireRecorder) last() *recConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.conns) == 0 {
		return nil
	}
	return w.conns[len(w.conns)-1]
}

// recConn records every write, the bytes read, in which order, and whether
// it was closed.
type recConn struct {
	net.Conn
	writing atomic.Int32
	overlap atomic.Bool // two writes at once
	closed  atomic.Bool
	// With fail set, every read fails; readsAfter counts them (the first
	// included).
	fail       atomic.Bool
	readsAfter atomic.Int32

	wmu sync.Mutex // writes, one at a time
	mu  sync.Mutex
	ws  []recWrite
	in  []byte // everything read
}

// recWrite is one Write call: its bytes and how many bytes had been read
// on the connection before it.
type recWrite struct {
	p         []byte
	readUntil int
}

func (r *recConn) Write(p []byte) (int, error) {
	if r.writing.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.writing.Add(-1)
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	r.ws = append(r.ws, recWrite{p: bytes.Clone(p), readUntil: len(r.in)})
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// errInjected is the error of a read that a test made fail.
var errInjected = errors.New("read failed on purpose")

func (r *recConn) Read(p []byte) (int, error) {
	if r.fail.Load() {
		r.readsAfter.Add(1)
		return 0, errInjected
	}
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.in = append(r.in, p[:n]...)
	r.mu.Unlock()
	return n, err
}

func (r *recConn) Close() error {
	r.closed.Store(true)
	return r.Conn.Close()
}

// writes returns the writes so far.
func (r *recConn) writes() []recWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ws)
}

// replies returns the frames read so far, each with the count of bytes
// read up to its end; the first is the connect response.
func (r *recConn) replies() (frames [][]byte, ends []int) {
	r.mu.Lock()
	in := slices.Clone(r.in)
	r.mu.Unlock()
	for at := 0; at+4 <= len(in); {
		n := int(binary.BigEndian.Uint32(in[at:]))
		if at+4+n > len(in) {
			break
		}
		frames = append(frames, in[at+4:at+4+n])
		at += 4 + n
		ends = append(ends, at)
	}
	return frames, ends
}

// xidOp returns a request frame's xid and opcode.
func xidOp(p []byte) (xid, op int32) {
	return int32(binary.BigEndian.Uint32(p[4:])), int32(binary.BigEndian.Uint32(p[8:]))
}

// logRecorder keeps go-zookeeper's log lines with their format.
type logRecorder struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	format string
	args   []any
}

func (l *logRecorder) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, logLine{format, args})
}

// contractConn connects go-zookeeper alone, as it is, to addr through a
// recorder, with a 4 s session, and closes it when the test ends.
func contractConn(t *testing.T, addr string) (*zk.Conn, *wireRecorder, *logRecorder) {
	t.Helper()
	rec, logs := &wireRecorder{}, &logRecorder{}
	conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithDialer(rec.dial), zk.WithLogger(logs), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	awaitHasSession(t, events)
	go func() {
		for range events { // keep go-zookeeper's event channel drained
		}
	}()
	return conn, rec, logs
}

func awaitHasSession(t *testing.T, events <-chan zk.Event) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return
			}
		case <-deadline:
			t.Fatal("no session within 20s")
		}
	}
}

// reconnected waits until go-zookeeper has made more than n connections
// and a request succeeds on the last one.
func reconnected(t *testing.T, conn *zk.Conn, rec *wireRecorder, n int) *recConn {
	t.Helper()
	locktest.Eventually(t, 20*time.Second, "go-zookeeper reconnected", func() bool {
		if len(rec.all()) <= n {
			return false
		}
		_, _, err := conn.Exists("/")
		return err == nil
	})
	return rec.last()
}

// The connect request is the first write on a connection, one writer at a
// time, and nothing follows it until the whole connect response is read
// (so the tap takes the first frame each way for the connect request and
// its response); on every connection, also after a reconnect with
// credentials and watches to send again, under concurrent requests and
// pings.
func TestContractFrames(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	conn, rec, _ := contractConn(t, proxy.Addr())
	if err := conn.AddAuth("digest", []byte("u:p")); err != nil {
		t.Fatal(err)
	}
	dir := zktest.UniquePath(t)
	mkdir(t, conn, dir)
	if _, _, _, err := conn.ExistsW(dir + "/watched"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				p, err := conn.Create(fmt.Sprintf("%s/n-%d-", dir, g), []byte("data"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
				conn.Children(dir)
				if err == nil {
					conn.Get(p)
					conn.Delete(p, -1)
				}
				if g == 0 && i == 20 {
					proxy.DropAll() // a reconnect mid-run
				}
			}
		})
	}
	wg.Wait()
	reconnected(t, conn, rec, 1)
	time.Sleep(1600 * time.Millisecond) // a ping or more (every third of the session)

	pings := 0
	for i, c := range rec.all() {
		if c.overlap.Load() {
			t.Errorf("connection %d: two writes at once", i)
		}
		ws := c.writes()
		frames, ends := c.replies()
		for j, w := range ws {
			if j == 0 {
				if len(w.p) < 4+28 || binary.BigEndian.Uint32(w.p[4:]) != 0 {
					t.Errorf("connection %d: the first write is not a connect request: % x", i, w.p[:min(len(w.p), 16)])
				}
				continue
			}
			if len(frames) == 0 || w.readUntil < ends[0] {
				t.Errorf("connection %d: write %d went out before the connect response was read (%d bytes read)", i, j, w.readUntil)
			}
			if xid, _ := xidOp(w.p); xid == -2 {
				pings++
			}
		}
	}
	if n := len(rec.all()); n < 2 {
		t.Fatalf("%d connections, want a reconnect", n)
	}
	if pings == 0 {
		t.Error("no ping was written")
	}
}

// go-zookeeper closes a connection that failed, but leaves, without
// closing it, one whose
// connect response said the session expired (the client closes that one
// itself).
func TestContractConnectionClosed(t *testing.T) {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	conn, rec, _ := contractConn(t, proxy.Addr())
	first := rec.last()
	proxy.DropAll()
	reconnected(t, conn, rec, 1)
	locktest.Eventually(t, 5*time.Second, "go-zookeeper closing the failed connection", first.closed.Load)

	n := len(rec.all())
	if got, err := proxy.ExpireSessions(); err != nil || got != 1 {
		t.Fatalf("expire: %d, %v", got, err)
	}
	reconnected(t, conn, rec, n)
	var expired []*recConn
	for _, c := range rec.all()[n:] {
		if frames, _ := c.replies(); len(frames) > 0 && len(frames[0]) >= 16 && binary.BigEndian.Uint64(frames[0][8:]) == 0 {
			expired = append(expired, c)
		}
	}
	if len(expired) != 1 {
		t.Fatalf("%d connections answered as expired, want 1", len(expired))
	}
	time.Sleep(time.Second)
	if expired[0].closed.Load() {
		t.Fatal("go-zookeeper closed the connection answered as expired: it used to leave it (see trackedConn.closeAbandoned)")
	}
	expired[0].Conn.Close()
}

func mkdir(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	for _, p := range []string{"/zktest", dir} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

// A read that fails ends the connection for go-zookeeper: it reads no more
// from it, closes it, and dials again. (The wire tap ends a connection
// whose server sent a bad frame this way: the frames before it, then the
// error.)
func TestContractReadErrorEndsConnection(t *testing.T) {
	srv := zktest.Shared(t)
	conn, rec, _ := contractConn(t, srv.Addr())
	failed := rec.last()
	failed.fail.Store(true)
	conn.Exists("/") // its reply can no longer be read
	c := reconnected(t, conn, rec, 1)
	if c == failed {
		t.Fatal("no new connection")
	}
	time.Sleep(100 * time.Millisecond)
	if n := failed.readsAfter.Load(); n != 1 {
		t.Errorf("%d reads of the failed connection after its error, want none", n-1)
	}
	if !failed.closed.Load() {
		t.Error("the failed connection was not closed")
	}
}
