package recipe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// wrapDialer wraps each connection in a trackedConn. Its wire tap tells the
// watchdog when a server answered one of our requests, as of the time the
// request was written (see Client.heardAt: bytes that merely arrive, such as
// watch notifications or replies buffered during a pause, prove nothing),
// and notes the zxids of create replies; the connection also reads the
// session timeout the server granted from each connect response.
func (c *Client) wrapDialer(dial zk.Dialer) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		start := time.Now()
		conn, err := dial(network, address, timeout)
		if err == nil && c.cfg.tls != nil {
			conn, err = handshake(conn, c.cfg.tls, address, timeout-time.Since(start))
		}
		if err != nil {
			c.dialErr.Store(&err) // errors of different types: not an atomic.Value
			if certificateRefused(err) {
				// Retrying will not change the certificate: Connect
				// gives up at once rather than when its context ends.
				c.untrustedOnce.Do(func() { close(c.untrusted) })
			}
			return nil, err
		}
		c.dials.Add(1)
		t := &trackedConn{Conn: conn, c: c, tap: wireTap{out: &c.zxids, written: &c.createWrites, proof: c.heardAt, now: c.monotonic,
			broke: c.wireBroke, creds: &c.creds}, wturn: make(chan struct{}, 1),
			handshakeBy: time.Now().Add(handshakeTimeout(c.SessionTimeout()))}
		t.tap.connect = t.connectResponse
		t.tap.hold = true
		t.Conn.SetReadDeadline(t.handshakeBy)
		if prev := c.liveConn.Load(); prev != nil {
			// go-zookeeper's xids run on across connections: direct
			// requests keep away from them on this one too.
			t.tap.lastXid = prev.tap.lastWritten()
		}
		c.liveConn.Store(t)
		return t, nil
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

// trackedConn is a net.Conn whose reads and writes go through a wire tap
// (see wire.go), which notes the replies to our requests for the watchdog
// and the zxids of create replies.
//
// It also buffers reads: go-zookeeper reads every reply with two calls (the
// length, then the frame), each a system call on a bare connection. Here
// one system call takes whatever has arrived (often several replies, or a
// reply and a notification) and go-zookeeper's reads are served from it.
// Bytes are noted as they are read from the connection; a deadline
// applies to the reads that reach it, which are the ones that wait.
type trackedConn struct {
	net.Conn
	c   *Client
	tap wireTap

	// Of the reading goroutine (go-zookeeper's): the bytes Read handed
	// over, and, once the connect response said the session expired, the
	// count at which go-zookeeper has all of it and leaves the connection.
	consumed  int64
	abandonAt int64
	// The connect response, until its last byte is read, must come by
	// handshakeBy (see SetReadDeadline); connectEnd is the count of bytes
	// at its end, 0 until its header is read.
	handshakeBy time.Time
	connectEnd  int64

	rbuf []byte // read buffer; rbuf[r:w] is unread
	r, w int
	rerr error // error of the read that filled the buffer, returned once it is drained

	// Writes, go-zookeeper's and direct requests' (see direct.go), take
	// turns: a writer holds wturn's one slot.
	wturn chan struct{}
}

// readBufferSize is the size of a connection's read buffer. Frames larger
// than this are read into go-zookeeper's buffer directly.
const readBufferSize = 16 << 10

func (t *trackedConn) Read(p []byte) (int, error) {
	if t.r == t.w {
		if t.rerr != nil {
			err := t.rerr
			t.rerr = nil
			return 0, err
		}
		if len(p) >= readBufferSize {
			n, err := t.readConn(p)
			t.consumed += int64(n)
			t.tap.release(t.consumed)
			t.closeAbandoned()
			return n, err
		}
		if t.rbuf == nil {
			t.rbuf = make([]byte, readBufferSize)
		}
		n, err := t.readConn(t.rbuf)
		t.r, t.w = 0, n
		if n == 0 {
			return 0, err
		}
		t.rerr = err
	}
	n := copy(p, t.rbuf[t.r:t.w])
	t.r += n
	t.consumed += int64(n)
	t.tap.release(t.consumed)
	t.closeAbandoned()
	return n, nil
}

// closeAbandoned closes the connection once go-zookeeper has read a connect
// response that said the session expired: go-zookeeper (v1.0.4) then dials
// anew without closing this one, and without it a direct request could
// wait on it for ever (none is taken once the response was read, see
// wireTap.connectResponse) and its descriptor would stay open.
func (t *trackedConn) closeAbandoned() {
	if t.abandonAt > 0 && t.consumed >= t.abandonAt {
		t.abandonAt = 0
		t.Close()
	}
}

// connectResponse is told of the connect response's header (see
// wireTap.connect), on the reading goroutine.
func (t *trackedConn) connectResponse(length int, timeoutMs int32, session int64) {
	if timeoutMs > 0 {
		t.c.negotiatedMs.Store(int64(timeoutMs))
	}
	t.c.wireSession.Store(session)
	t.connectEnd = 4 + int64(length) // the first frame on the connection
	if session == 0 {
		t.abandonAt = t.connectEnd
		if t.c.hosts != nil {
			t.c.hosts.answered() // the server is up: dial it again at once
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

// readConn reads from the connection into b and notes what came. A failed
// read ends the connection (see fail).
func (t *trackedConn) readConn(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	t.note(b[:n])
	if err != nil {
		t.fail()
	}
	return n, err
}

// note follows bytes read from the server.
func (t *trackedConn) note(p []byte) {
	if len(p) == 0 {
		return
	}
	t.tap.noteRead(p)
}

// zkLogger sends go-zookeeper's log lines to the client's logger at debug
// level (go-zookeeper logs to the standard logger by default).
// The replies to direct requests, which go-zookeeper reports as replies to
// unknown requests, are left out.
type zkLogger struct {
	l *slog.Logger
	c *Client
}

func (z zkLogger) Printf(format string, args ...any) {
	if !z.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	if format == unknownReplyFormat && len(args) == 1 {
		if xid, ok := args[0].(int32); ok && z.c != nil {
			if t := z.c.liveConn.Load(); t != nil && t.tap.isDirect(xid) {
				return
			}
		}
	}
	z.l.Debug(fmt.Sprintf(format, args...), "source", "go-zookeeper")
}

// unknownReplyFormat is go-zookeeper's log line for a reply whose xid is
// none of its requests'.
const unknownReplyFormat = "Response for unknown request with xid %d"
