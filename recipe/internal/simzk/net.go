package simzk

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The network: in-memory TCP connections between the clients' hosts and
// the server, built on channels and timers so that everything waiting on
// them is durably blocked in a synctest bubble, and time moves on.
//
// A connection is two halves, one per direction. A write never blocks: it
// copies the bytes into the half with the time they reach the other end
// (later by the host's link delay, and not before the end of a partition
// of that direction, as TCP retransmits what a partition held up once it
// heals); a read waits for the first bytes due, its deadline, or the end.

// Errors of the network, as a TCP stack reports them.
var (
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errTimeout = &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
)

// addr is the address of either end.
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// segment is bytes in flight, and when they reach the reader.
type segment struct {
	b   []byte
	due time.Time
}

// half is one direction of a connection.
type half struct {
	path *path // the faults of this direction

	mu      sync.Mutex // never held while waiting
	segs    []segment
	lastDue time.Time
	eof     bool          // the writer closed: the reader reads the end after segs
	reset   bool          // the connection was aborted: reads and writes fail
	gone    bool          // the reader closed: writes fail
	wake    chan struct{} // cap 1: segs, eof or reset changed
}

func newHalf(p *path) *half { return &half{path: p, wake: make(chan struct{}, 1)} }

func (h *half) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// write queues a copy of b, in pieces if the path says so.
func (h *half) write(b []byte) error {
	delay, cutUntil, pieces := h.path.state()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.reset:
		return errReset
	case h.gone || h.eof:
		return &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	}
	now := time.Now()
	due := later(later(now.Add(delay), h.lastDue), cutUntil)
	n := max(1, min(pieces, len(b)))
	for i := range n {
		p := b[i*len(b)/n : (i+1)*len(b)/n]
		d := due.Add(time.Duration(i) * pieceGap)
		h.segs = append(h.segs, segment{b: append([]byte(nil), p...), due: d})
		h.lastDue = d
	}
	h.poke()
	return nil
}

// pieceGap is the time between the pieces of a write split in pieces.
const pieceGap = 100 * time.Microsecond

// read reads what is due, waiting for it until deadline (zero: none) or
// until closed is closed.
func (h *half) read(p []byte, deadline func() time.Time, closed <-chan struct{}) (int, error) {
	for {
		now := time.Now()
		n, next, err := h.take(p, now)
		if n > 0 || err != nil {
			return n, err
		}
		dl := deadline()
		if !dl.IsZero() && !dl.After(now) {
			return 0, os.ErrDeadlineExceeded
		}
		if next.IsZero() || (!dl.IsZero() && dl.Before(next)) {
			next = dl
		}
		var tc <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(next.Sub(now))
			tc = t.C
		}
		select {
		case <-h.wake:
		case <-tc:
		case <-closed:
			err = net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return 0, err
		}
	}
}

// take copies into p what is due by now; with nothing due, it returns the
// end of the stream or the connection's reset, or else when the next bytes
// are due (zero: none in flight).
func (h *half) take(p []byte, now time.Time) (n int, next time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reset {
		return 0, next, errReset
	}
	for len(h.segs) > 0 && n < len(p) && !h.segs[0].due.After(now) {
		c := copy(p[n:], h.segs[0].b)
		n += c
		if c == len(h.segs[0].b) {
			h.segs = h.segs[1:]
		} else {
			h.segs[0].b = h.segs[0].b[c:]
		}
	}
	switch {
	case n > 0:
		return n, next, nil
	case len(h.segs) > 0:
		return 0, h.segs[0].due, nil
	case h.eof:
		return 0, next, io.EOF
	}
	return 0, next, nil
}

// holdUntil moves the segments not yet due to no earlier than t: a partition
// beginning holds up what is still in flight.
func (h *half) holdUntil(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.segs {
		if h.segs[i].due.After(time.Now()) && h.segs[i].due.Before(t) {
			h.segs[i].due = t
		}
	}
	h.lastDue = later(h.lastDue, t)
}

// end is one end of a connection: a net.Conn.
type end struct {
	in, out       *half // what the end reads, what it writes
	local, remote addr
	closeOnce     sync.Once
	closed        chan struct{} // closed by Close
	dmu           sync.Mutex
	rdl, wdl      time.Time // the read and write deadlines, under dmu
	onClose       func()    // the host's bookkeeping, for a client end
	peer          *end      // the other end
}

var _ net.Conn = (*end)(nil)

func (e *end) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case <-e.closed:
		return 0, net.ErrClosed
	default:
	}
	return e.in.read(p, func() time.Time {
		e.dmu.Lock()
		defer e.dmu.Unlock()
		return e.rdl
	}, e.closed)
}

// Write never blocks: TCP's buffers are taken to be large enough. It
// yields the processor first, as a system call may: another goroutine of
// the bubble that is ready to run may run before the bytes go out.
func (e *end) Write(p []byte) (int, error) {
	runtime.Gosched()
	select {
	case <-e.closed:
		return 0, net.ErrClosed
	default:
	}
	e.dmu.Lock()
	wdl := e.wdl
	e.dmu.Unlock()
	if !wdl.IsZero() && !wdl.After(time.Now()) {
		return 0, os.ErrDeadlineExceeded
	}
	if err := e.out.write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close ends the connection as close(2) does: the other end reads what
// was sent, then the end; what the other end sends from then on fails.
func (e *end) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		e.out.mu.Lock()
		e.out.eof = true
		e.out.poke()
		e.out.mu.Unlock()
		e.in.mu.Lock()
		e.in.gone = true
		e.in.segs = nil
		e.in.mu.Unlock()
		if e.onClose != nil {
			e.onClose()
		}
	})
	return nil
}

// abort breaks the connection, as a reset does: both ends fail at once,
// and what was in flight is lost.
func (e *end) abort() {
	for _, h := range []*half{e.in, e.out} {
		h.mu.Lock()
		h.reset = true
		h.segs = nil
		h.poke()
		h.mu.Unlock()
	}
}

func (e *end) LocalAddr() net.Addr  { return e.local }
func (e *end) RemoteAddr() net.Addr { return e.remote }

func (e *end) SetDeadline(t time.Time) error {
	e.dmu.Lock()
	e.rdl, e.wdl = t, t
	e.dmu.Unlock()
	e.in.poke()
	return nil
}

func (e *end) SetReadDeadline(t time.Time) error {
	e.dmu.Lock()
	e.rdl = t
	e.dmu.Unlock()
	e.in.poke()
	return nil
}

func (e *end) SetWriteDeadline(t time.Time) error {
	e.dmu.Lock()
	e.wdl = t
	e.dmu.Unlock()
	return nil
}

// path is one direction of a host's link to the server: its delay, its
// partitions and whether writes arrive in pieces.
type path struct {
	mu       sync.Mutex
	delay    time.Duration
	cutUntil time.Time
	pieces   int
	halves   map[*half]struct{} // of the connections open on it
}

func (p *path) state() (delay time.Duration, cutUntil time.Time, pieces int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay, p.cutUntil, p.pieces
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
