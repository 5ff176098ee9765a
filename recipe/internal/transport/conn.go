package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// wrapDialer wraps each connection in a trackedConn. Its wire tap checks
// every frame from the server before go-zookeeper reads it, tells the
// watchdog when a server answered one of our requests, as of the time the
// request was written (see Up.Alive: bytes that merely arrive, such as
// watch notifications or replies buffered during a pause, prove nothing),
// and notes the zxids of create replies; the connection also reads the
// session timeout the server granted from each connect response.
func (t *Conn) wrapDialer(dial zk.Dialer) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		start := time.Now()
		conn, err := dial(network, address, timeout)
		if err == nil && t.cfg.TLS != nil {
			conn, err = handshake(conn, t.cfg.TLS, address, timeout-time.Since(start))
		}
		if err != nil {
			t.dialErr.Store(&err) // errors of different types: not an atomic.Value
			if certificateRefused(err) {
				// Retrying will not change the certificate: Connect
				// gives up at once rather than when its context ends.
				t.untrustedOnce.Do(func() { close(t.untrusted) })
			}
			return nil, err
		}
		t.dials.Add(1)
		tc := &trackedConn{Conn: conn, t: t,
			tap: wireTap{out: &t.zxids, written: &t.createWrites, zxids: &t.sessionZxid,
				proof: t.alive, now: t.monotonic, limit: t.cfg.MaxFrame, rewatched: t.up.Rewatched},
			handshakeBy: time.Now().Add(handshakeTimeout(t.SessionTimeout()))}
		tc.tap.connect = tc.connectResponse
		tc.Conn.SetReadDeadline(tc.handshakeBy)
		return tc, nil
	}
}

// certificateRefused reports whether err is a TLS handshake that failed on
// a certificate (unknown authority, wrong host, expired, or refused by the
// server), which no retry can mend.
func certificateRefused(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		host     x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		alertErr tls.AlertError
	)
	var remote *net.OpError // an alert from the server: "remote error: tls: bad certificate"
	return errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &alertErr) ||
		(errors.As(err, &remote) && remote.Op == "remote error")
}

// handshake runs the TLS client handshake on conn within timeout. The
// server name defaults to the host of address.
func handshake(conn net.Conn, cfg *tls.Config, address string, timeout time.Duration) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Millisecond))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("recipe: TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// trackedConn is a net.Conn between go-zookeeper and the server, with a
// wire tap (see wire.go) on both directions.
//
// Reads are buffered, and framed: one system call takes whatever has
// arrived (often several replies, or a reply and a notification), and
// go-zookeeper is served only whole frames that the tap has checked. The
// buffer grows with the bytes that arrive, never to a length a frame
// announces, and never past the frame limit. A frame the tap refuses ends
// the connection: go-zookeeper gets the frames before it, then the error
// alone (never bytes with it: io.ReadFull drops an error that comes with
// the last bytes it asked for), and dials again.
type trackedConn struct {
	net.Conn
	t   *Conn
	tap wireTap

	// Of the reading goroutine (go-zookeeper's): the bytes Read handed
	// over, and, once the connect response said the session expired, the
	// count at which go-zookeeper has all of it and leaves the connection.
	consumed  int64
	abandonAt int64
	// The connect response, until its last byte is read, must come by
	// handshakeBy (see SetReadDeadline); connectEnd is the count of bytes
	// at its end, 0 until it was checked.
	handshakeBy time.Time
	connectEnd  int64

	// The read buffer: buf[r:ok] was checked and is go-zookeeper's to
	// read, buf[ok:w] is the start of the next frame.
	buf       []byte
	r, ok, w  int
	rerr      error // returned once the checked bytes are read
	closeOnce sync.Once
}

// readBufferSize is the size a connection's read buffer starts with and
// goes back to after a larger frame.
const readBufferSize = 16 << 10

func (t *trackedConn) Read(p []byte) (int, error) {
	for t.r == t.ok {
		if t.rerr != nil {
			return 0, t.rerr
		}
		t.fill()
	}
	n := copy(p, t.buf[t.r:t.ok])
	t.r += n
	t.consumed += int64(n)
	t.closeAbandoned()
	return n, nil
}

// fill reads what has arrived into the buffer and checks the frames that
// are now whole; a read error, or a frame the tap refuses, is kept in
// rerr and ends the connection.
func (t *trackedConn) fill() {
	t.compact()
	n, err := t.Conn.Read(t.buf[t.w:])
	t.w += n
	if ferr := t.frames(); ferr != nil {
		err = ferr
		t.t.refusedFrame(ferr)
	}
	if err != nil {
		t.rerr = err
		t.w = t.ok // the bytes of a refused or cut frame are nobody's
		t.close()
	}
}

// frames checks each whole frame after buf[:ok], moving ok past it.
func (t *trackedConn) frames() error {
	for {
		n, have := replyLen(t.buf[t.ok:t.w])
		if !have {
			return nil
		}
		if err := t.tap.checkLength(n); err != nil {
			return err
		}
		end := t.ok + 4 + n
		if end > t.w {
			return nil
		}
		if err := t.tap.checkFrame(t.buf[t.ok:end]); err != nil {
			return err
		}
		t.ok = end
	}
}

// replyLen returns the length that starts b, unsigned, as go-zookeeper
// reads it; have is false when b is shorter than four bytes.
func replyLen(b []byte) (n int, have bool) {
	if len(b) < 4 {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(b)), true
}

// compact makes room in the buffer for a read: it moves the unread bytes
// to its start, and doubles it when a frame fills it (up to what the
// frame's length asks, which checkLength bounded). A buffer grown for a
// large frame goes back to its first size once that frame is read.
func (t *trackedConn) compact() {
	if t.r == t.w {
		if cap(t.buf) > readBufferSize {
			t.buf = nil
		}
		t.r, t.ok, t.w = 0, 0, 0
	}
	if t.buf == nil {
		t.buf = make([]byte, readBufferSize)
		t.r, t.ok, t.w = 0, 0, 0
		return
	}
	if t.w < len(t.buf) {
		return
	}
	if t.r > 0 {
		copy(t.buf, t.buf[t.r:t.w])
		t.ok -= t.r
		t.w -= t.r
		t.r = 0
		if t.w < len(t.buf) {
			return
		}
	}
	want := len(t.buf) * 2
	if n, have := replyLen(t.buf[t.ok:t.w]); have && t.ok+4+n < want {
		want = max(t.ok+4+n, t.w+1)
	}
	nb := make([]byte, want)
	copy(nb, t.buf[:t.w])
	t.buf = nb
}

// Write writes go-zookeeper's bytes, noted by the tap as they go. A write
// that fails ends the connection (see close) and is reported to
// go-zookeeper as done: the read that then fails makes go-zookeeper fail
// every request on the connection, once. Told of the error, go-zookeeper
// v1.0.4 would answer the request with it and, once the connection is
// down, answer it again with the others; its one-slot answer channel then
// blocks its connection loop for good if the caller has not taken the
// first answer yet, and the client never reconnects.
func (t *trackedConn) Write(p []byte) (int, error) {
	if t.t != nil && t.t.splitWrites.Load() && len(p) > 8 {
		// A test's go-zookeeper that writes a frame in two.
		if _, err := t.write(p[:len(p)/2]); err != nil {
			return 0, err
		}
		return t.write(p[len(p)/2:])
	}
	return t.write(p)
}

func (t *trackedConn) write(p []byte) (int, error) {
	t.tap.noteWrite(p)
	if _, err := t.Conn.Write(p); err != nil {
		t.close()
	}
	return len(p), nil
}

// close closes the connection once, from any side.
func (t *trackedConn) close() {
	t.closeOnce.Do(func() { t.Conn.Close() })
}

// Close closes the connection (go-zookeeper's, once its send loop has
// stopped).
func (t *trackedConn) Close() error {
	t.close()
	return nil
}

// closeAbandoned closes the connection once go-zookeeper has read a connect
// response that said the session expired: go-zookeeper (v1.0.4) then dials
// anew without closing this one, and its descriptor would stay open.
func (t *trackedConn) closeAbandoned() {
	if t.abandonAt > 0 && t.consumed >= t.abandonAt {
		t.abandonAt = 0
		t.close()
	}
}

// connectResponse is told of a valid connect response (see
// wireTap.connect), on the reading goroutine.
func (t *trackedConn) connectResponse(g grant) {
	if g.timeoutMs > 0 {
		t.t.negotiatedMs.Store(int64(g.timeoutMs))
	}
	t.t.wireSession.Store(g.session)
	t.connectEnd = 4 + int64(g.length) // the first frame on the connection
	if g.session == 0 {
		t.abandonAt = t.connectEnd
		if t.t.hosts != nil {
			t.t.hosts.answered() // the server is up: dial it again at once
		}
	}
}

// handshakeTimeout is how long a server may take to answer a connect
// request: the receive timeout go-zookeeper applies to a connected server
// (two thirds of the session timeout). go-zookeeper itself waits ten times
// that for the answer (13s for 2s sessions), on a server that accepts
// connections but does not serve them yet (one starting up, or out of its
// quorum), where the client should go on to the next server, or dial this
// one again.
func handshakeTimeout(session time.Duration) time.Duration { return session * 2 / 3 }

// SetReadDeadline sets the connection's read deadline; until the whole
// connect response has been read, no later than handshakeBy (go-zookeeper
// reads its header with a deadline of ten receive timeouts, and the rest
// with none).
func (t *trackedConn) SetReadDeadline(d time.Time) error {
	if !t.handshakeBy.IsZero() && (t.connectEnd == 0 || t.consumed < t.connectEnd) {
		if d.IsZero() || d.After(t.handshakeBy) {
			d = t.handshakeBy
		}
	}
	return t.Conn.SetReadDeadline(d)
}

// zkLogger sends go-zookeeper's log lines to the client's logger at debug
// level (go-zookeeper logs to the standard logger by default).
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if !z.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	z.l.Debug(fmt.Sprintf(format, args...), "source", "go-zookeeper")
}
