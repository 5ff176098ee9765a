package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"
)

const (
	// expireStepWait bounds each step of expiring one session: the dial,
	// and each exchange (connect, closeSession) with the server.
	expireStepWait = 3 * time.Second
	// expireTimeoutMs is the session timeout asked for when resuming a
	// session whose negotiated timeout the proxy did not see.
	expireTimeoutMs = 30000
	// maxPasswd bounds a session password: ZooKeeper's are 16 bytes.
	maxPasswd = 256
	// expireAttempts bounds the attempts at expiring one session.
	expireAttempts = 3
	// expireHoldWait bounds how long a connect request resuming a session
	// being expired waits.
	expireHoldWait = 4 * expireAttempts * expireStepWait
)

// session is what a client needs to resume a session: its id and
// password, and the timeout it asks for.
type session struct {
	id      int64
	passwd  []byte
	timeout int32 // milliseconds
}

// parseConnectRequest reads the session a connect request resumes
// (body: the frame after its length). A request for a new session
// (session id 0) yields ok false.
//
//	int32 protocolVersion, int64 lastZxidSeen, int32 timeOut,
//	int64 sessionId, buffer passwd, [bool readOnly]
func parseConnectRequest(body []byte) (session, bool) {
	if len(body) < 28 {
		return session{}, false
	}
	s := session{
		timeout: int32(binary.BigEndian.Uint32(body[12:16])),
		id:      int64(binary.BigEndian.Uint64(body[16:24])),
	}
	passwd, ok := readBuffer(body[24:])
	if !ok || s.id == 0 {
		return session{}, false
	}
	s.passwd = passwd
	return s, true
}

// parseConnectResponse reads the session a connect response grants
// (body: the frame after its length). A refused session (id 0: it
// expired, or the password was wrong) yields the zero session with ok
// true: the connection has no session.
//
//	int32 protocolVersion, int32 timeOut, int64 sessionId,
//	buffer passwd, [bool readOnly]
func parseConnectResponse(body []byte) (session, bool) {
	if len(body) < 20 {
		return session{}, false
	}
	s := session{
		timeout: int32(binary.BigEndian.Uint32(body[4:8])),
		id:      int64(binary.BigEndian.Uint64(body[8:16])),
	}
	passwd, ok := readBuffer(body[16:])
	if !ok {
		return session{}, false
	}
	if s.id == 0 || s.timeout <= 0 {
		return session{}, true
	}
	s.passwd = passwd
	return s, true
}

// readBuffer reads a jute buffer (int32 length, then the bytes; -1 is
// null) at the start of b, and copies it.
func readBuffer(b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	n := int32(binary.BigEndian.Uint32(b[:4]))
	if n < 0 {
		return nil, true
	}
	if n > maxPasswd || int(n) > len(b)-4 {
		return nil, false
	}
	return append([]byte(nil), b[4:4+n]...), true
}

func (c *proxyConn) setSession(s session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = s
}

func (c *proxyConn) session() session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// sessionTarget is a session seen on a current connection and the server
// that connection goes to.
type sessionTarget struct {
	session
	target string
}

// sessions returns the sessions seen on the current connections, each
// once, in the order the proxy accepted their connections (the latest
// connection of a session giving its password and server).
func (p *Proxy) sessions() []sessionTarget {
	cs := p.snapshot()
	sort.Slice(cs, func(i, j int) bool { return cs[i].id < cs[j].id })
	var out []sessionTarget
	at := make(map[int64]int)
	for _, c := range cs {
		s := c.session()
		if s.id == 0 {
			continue
		}
		if i, ok := at[s.id]; ok {
			out[i] = sessionTarget{s, c.target}
			continue
		}
		at[s.id] = len(out)
		out = append(out, sessionTarget{s, c.target})
	}
	return out
}

// Sessions returns the ids of the ZooKeeper sessions of the clients
// currently connected through the proxy, each once, in the order their
// connections were accepted. A connection's session is the one its
// connect request resumes, then the one the server's connect response
// grants; connections without one (not yet answered, four-letter words,
// sessions the server refused as expired) are left out. A connection
// accepted during a partition counts once the client sent its connect
// request, since a reconnecting client names its session there.
func (p *Proxy) Sessions() []int64 {
	ss := p.sessions()
	ids := make([]int64, len(ss))
	for i, s := range ss {
		ids[i] = s.id
	}
	return ids
}

// ExpireSessions expires, on the server, the session of every client
// currently connected through the proxy (see Sessions), and returns how
// many it expired. It is what Apache Curator's KillSession does: for each
// session it opens a new connection straight to the server (so it works
// during a partition too), resumes the session there with its id and
// password, and closes it. A session the server already expired counts
// as expired.
//
// What a client sees: the server deletes the session's ephemeral nodes
// at once and closes the client's connection (handed over to the
// resuming connection); the client reconnects through the proxy and is
// told its session expired: go-zookeeper reports zk.StateExpired, and a
// recipe.Client ends its holds with recipe.ErrLost and
// recipe.ErrSessionExpired, typically within milliseconds. During a
// partition the client learns it when the partition heals. A client that
// reconnects through the proxy meanwhile is held until its session is
// gone, so that it cannot take the session back first. Sessions of
// clients connected to the server by other routes are not touched.
//
// Each step (dial, connect, closeSession) is bounded by a deadline of 3s,
// and a session is tried at most 3 times, so it never hangs. On failure
// it goes on with the other sessions and returns the count of those it
// expired with an error naming the sessions it could not.
func (p *Proxy) ExpireSessions() (int, error) {
	ss := p.sessions()
	// The server closes the client's connection when the session is
	// resumed on another: hold the client's reconnection until the
	// session is closed, or it would take the session back first.
	p.mu.Lock()
	if p.expiring == nil {
		p.expiring = make(map[int64]chan struct{})
	}
	var held []int64
	for _, s := range ss {
		if _, ok := p.expiring[s.id]; !ok {
			p.expiring[s.id] = make(chan struct{})
			held = append(held, s.id)
		}
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, id := range held {
			close(p.expiring[id])
			delete(p.expiring, id)
		}
	}()

	var errs []error
	n := 0
	for _, s := range ss {
		if err := expireSession(s.target, s.session); err != nil {
			errs = append(errs, fmt.Errorf("session %#x on %s: %w", s.id, s.target, err))
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("zktest: proxy: expire sessions: %w", errors.Join(errs...))
	}
	return n, nil
}

// awaitExpiry waits while ExpireSessions expires session id (bounded by
// expireHoldWait), and reports false if the proxy closed meanwhile.
func (p *Proxy) awaitExpiry(id int64) bool {
	p.mu.Lock()
	ch := p.expiring[id]
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	t := time.NewTimer(expireHoldWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-p.done:
		return false
	}
	return true
}

// expireSession expires session s on the server at target. Should
// another connection take the session back between its two steps, it
// tries again.
func expireSession(target string, s session) error {
	var err error
	for range expireAttempts {
		var retry bool
		if retry, err = tryExpire(target, s); !retry {
			return err
		}
	}
	return err
}

// tryExpire resumes session s on a new connection to the server at
// target and closes it there. It reports retry when the server closed
// the connection before the session was closed: another connection
// resumed it meanwhile.
func tryExpire(target string, s session) (retry bool, err error) {
	conn, err := net.DialTimeout("tcp", target, expireStepWait)
	if err != nil {
		return false, err
	}
	defer conn.Close()

	timeout := s.timeout
	if timeout <= 0 {
		timeout = expireTimeoutMs
	}
	req := make([]byte, 0, 4+33+len(s.passwd))
	req = binary.BigEndian.AppendUint32(req, uint32(29+len(s.passwd)))
	req = binary.BigEndian.AppendUint32(req, 0) // protocolVersion
	req = binary.BigEndian.AppendUint64(req, 0) // lastZxidSeen
	req = binary.BigEndian.AppendUint32(req, uint32(timeout))
	req = binary.BigEndian.AppendUint64(req, uint64(s.id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(s.passwd)))
	req = append(req, s.passwd...)
	req = append(req, 0) // readOnly: false
	resp, err := exchange(conn, req)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	got, ok := parseConnectResponse(resp)
	if !ok {
		return false, fmt.Errorf("connect: malformed response of %d bytes", len(resp))
	}
	if got.id == 0 {
		return false, nil // already expired
	}
	if got.id != s.id {
		return false, fmt.Errorf("connect: the server granted session %#x", got.id)
	}

	// closeSession: a request header (int32 xid, int32 opcode), no body.
	const xid = 1
	req = req[:0]
	req = binary.BigEndian.AppendUint32(req, 8)
	req = binary.BigEndian.AppendUint32(req, xid)
	closeOp := int32(OpClose)
	req = binary.BigEndian.AppendUint32(req, uint32(closeOp))
	for {
		// The reply header: int32 xid, int64 zxid, int32 err.
		resp, err = exchange(conn, req)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				// Closed without a reply: the session moved to another
				// connection (or the server closed it and hung up
				// first; the next attempt then finds it expired).
				return true, fmt.Errorf("closeSession: %w", err)
			}
			return false, fmt.Errorf("closeSession: %w", err)
		}
		if len(resp) < 16 {
			return false, fmt.Errorf("closeSession: malformed reply of %d bytes", len(resp))
		}
		if int32(binary.BigEndian.Uint32(resp[:4])) != xid {
			req = nil // a notification: read on
			continue
		}
		if code := int32(binary.BigEndian.Uint32(resp[12:16])); code != 0 {
			return false, fmt.Errorf("closeSession: error code %d", code)
		}
		return false, nil
	}
}

// exchange writes frame (unless empty) and reads the next frame, each
// within expireStepWait, and returns its body.
func exchange(conn net.Conn, frame []byte) ([]byte, error) {
	if err := conn.SetDeadline(time.Now().Add(expireStepWait)); err != nil {
		return nil, err
	}
	if len(frame) > 0 {
		if _, err := conn.Write(frame); err != nil {
			return nil, err
		}
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(n[:]))
	if size < 0 || size > maxConnectFrame {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	return body, nil
}
