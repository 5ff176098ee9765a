package locktest

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// SlowDialer returns a dialer whose connections receive every byte delay
// late, as over a network with that one-way delay, without limiting
// throughput: with a delay far above the server's own time, a call that
// waits for n replies in sequence takes n delays. Read deadlines hold as
// on any connection, so a client still finds a silent one dead.
func SlowDialer(delay time.Duration) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		s := &slowConn{Conn: conn, delay: delay, chunks: make(chan chunk, 4096), closed: make(chan struct{})}
		go s.pump()
		return s, nil
	}
}

type slowConn struct {
	net.Conn
	delay    time.Duration
	chunks   chan chunk
	buf      []byte
	pending  *chunk                    // received, not yet due
	deadline atomic.Pointer[time.Time] // read deadline, nil for none
	closed   chan struct{}
	once     atomic.Bool
}

type chunk struct {
	b   []byte
	due time.Time
	err error
}

func (s *slowConn) pump() {
	defer close(s.chunks)
	for {
		b := make([]byte, 32<<10)
		n, err := s.Conn.Read(b)
		if n > 0 {
			select {
			case s.chunks <- chunk{b: b[:n], due: time.Now().Add(s.delay)}:
			case <-s.closed:
				return
			}
		}
		if err != nil {
			select {
			case s.chunks <- chunk{err: err}:
			case <-s.closed:
			}
			return
		}
	}
}

func (s *slowConn) SetReadDeadline(t time.Time) error {
	s.deadline.Store(&t)
	return nil
}

func (s *slowConn) SetDeadline(t time.Time) error {
	s.deadline.Store(&t)
	return s.Conn.SetWriteDeadline(t)
}

func (s *slowConn) Close() error {
	if s.once.CompareAndSwap(false, true) {
		close(s.closed)
	}
	return s.Conn.Close()
}

// expired returns a channel that fires at the read deadline (nil: none).
func (s *slowConn) expired() (<-chan time.Time, func()) {
	d := s.deadline.Load()
	if d == nil || d.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(time.Until(*d))
	return t.C, func() { t.Stop() }
}

func (s *slowConn) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		timeout, stop := s.expired()
		defer stop()
		if s.pending == nil {
			select {
			case c, ok := <-s.chunks:
				if !ok {
					return 0, io.EOF
				}
				if c.err != nil {
					return 0, c.err
				}
				s.pending = &c
			case <-timeout:
				return 0, os.ErrDeadlineExceeded
			}
		}
		wait := time.NewTimer(time.Until(s.pending.due))
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		}
		s.buf, s.pending = s.pending.b, nil
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}
