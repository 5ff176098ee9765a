package locktest

import (
	"io"
	"net"
	"time"
)

// SlowDialer returns a dialer whose connections receive every byte delay
// late, as over a network with that one-way delay, without limiting
// throughput: with a delay far above the server's own time, a call that
// waits for n replies in sequence takes n delays.
func SlowDialer(delay time.Duration) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		s := &slowConn{Conn: conn, delay: delay, chunks: make(chan chunk, 4096)}
		go s.pump()
		return s, nil
	}
}

type slowConn struct {
	net.Conn
	delay  time.Duration
	chunks chan chunk
	buf    []byte
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
			s.chunks <- chunk{b: b[:n], due: time.Now().Add(s.delay)}
		}
		if err != nil {
			s.chunks <- chunk{err: err}
			return
		}
	}
}

func (s *slowConn) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		c, ok := <-s.chunks
		if !ok {
			return 0, io.EOF
		}
		if c.err != nil {
			return 0, c.err
		}
		time.Sleep(time.Until(c.due))
		s.buf = c.b
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}
