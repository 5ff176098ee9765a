package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"
)

// MsgKind is the kind of a message a holder process sends to a
// [TokenStore].
type MsgKind string

// The messages of a holder process, in the order it sends them.
const (
	// MsgHello: connected, with this session, about to acquire.
	MsgHello MsgKind = "hello"
	// MsgGrant: acquired, with this token and node; Nodes lists the lock
	// directory as read right after the grant, on the holder's session.
	MsgGrant MsgKind = "grant"
	// MsgWrite: a write under the token; Checked and Wall are when the
	// holder's loss check before it began and when it had passed.
	MsgWrite MsgKind = "write"
	// MsgLost: the loss check failed; Wall is when, Err says why.
	MsgLost MsgKind = "lost"
	// MsgProbe: after a loss, one deliberate write under the old token, to
	// show that the store refuses it.
	MsgProbe MsgKind = "probe"
	// MsgFenced: the store refused a write; the holder stops as it would
	// at a loss (a write in flight across a pause ends this way).
	MsgFenced MsgKind = "fenced"
	// MsgReleased: released when told to, without a loss.
	MsgReleased MsgKind = "released"
	// MsgFailed: the holder could not go on (Err says why).
	MsgFailed MsgKind = "failed"
)

// StoreMsg is one message from a holder process.
type StoreMsg struct {
	Kind    MsgKind
	ID      int // the holder's number, given by the test
	PID     int
	Session int64
	Token   int64
	Node    string
	Nodes   []string
	Seq     int
	Checked int64 // the holder's wall clock, Unix nanoseconds
	Wall    int64
	Err     string
	// Reads are the holder's last reads from ZooKeeper, oldest first.
	Reads []WireRead `json:",omitempty"`
}

// WireRead is one read of a holder from its ZooKeeper connection.
type WireRead struct {
	Wall int64 // Unix nanoseconds, when the read returned
	N    int
	// Head is the first 4 bytes read, big endian: a frame's length, or,
	// in the read of a reply's body, its xid (-1 a watch notification, -2
	// a ping reply).
	Head int32
	Err  string `json:",omitempty"`
}

func (r WireRead) String() string {
	switch {
	case r.Err != "":
		return "error " + r.Err
	case r.N < 4:
		return fmt.Sprintf("%d bytes", r.N)
	case r.Head == -1:
		return fmt.Sprintf("%d bytes (watch notification)", r.N)
	case r.Head == -2:
		return fmt.Sprintf("%d bytes (ping reply)", r.N)
	}
	return fmt.Sprintf("%d bytes (head %d)", r.N, r.Head)
}

// StoreReply answers a StoreMsg. A write or probe is refused (OK false)
// when its token is lower than the highest the store has accepted.
type StoreReply struct {
	OK      bool
	Highest int64
}

// StoreEvent is a message as the store logged it: when it arrived, on the
// store's monotonic clock, and whether a write was accepted.
type StoreEvent struct {
	StoreMsg
	At       time.Time
	Accepted bool
}

// TokenStore is a fenced store served to holder processes on a unix
// socket: it accepts a write only if its fencing token is at least the
// highest one it accepted before, and logs every message in the order it
// handled them (one at a time), so the log is the order of events as the
// store saw them.
type TokenStore struct {
	ln net.Listener

	mu      sync.Mutex
	highest int64
	log     []StoreEvent
	byID    map[int]*HolderState
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// ListenStore serves a TokenStore on the unix socket path.
func ListenStore(path string) (*TokenStore, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	s := &TokenStore{ln: ln, byID: make(map[int]*HolderState), conns: make(map[net.Conn]bool)}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the socket's path.
func (s *TokenStore) Addr() string { return s.ln.Addr().String() }

func (s *TokenStore) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(conn)
	}
}

// serve answers one holder's messages until it hangs up.
func (s *TokenStore) serve(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	dec := json.NewDecoder(bufio.NewReader(conn))
	enc := json.NewEncoder(conn)
	for {
		var m StoreMsg
		if err := dec.Decode(&m); err != nil {
			return
		}
		if err := enc.Encode(s.handle(m)); err != nil {
			return
		}
	}
}

// handle logs m and, for a write or a probe, applies the fencing rule.
func (s *TokenStore) handle(m StoreMsg) StoreReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := StoreEvent{StoreMsg: m, At: time.Now()}
	if m.Kind == MsgWrite || m.Kind == MsgProbe {
		if m.Token >= s.highest {
			s.highest = m.Token
			ev.Accepted = true
		}
	}
	s.log = append(s.log, ev)
	s.note(ev)
	return StoreReply{OK: ev.Accepted || (m.Kind != MsgWrite && m.Kind != MsgProbe), Highest: s.highest}
}

// HolderState sums up one holder's messages so far: the last of each kind
// (nil if none came) and the number of writes.
type HolderState struct {
	Last             map[MsgKind]*StoreEvent
	Writes, Accepted int
}

// note adds ev to its holder's state.
func (s *TokenStore) note(ev StoreEvent) {
	hs := s.byID[ev.ID]
	if hs == nil {
		hs = &HolderState{Last: make(map[MsgKind]*StoreEvent)}
		s.byID[ev.ID] = hs
	}
	hs.Last[ev.Kind] = &ev
	if ev.Kind == MsgWrite {
		hs.Writes++
		if ev.Accepted {
			hs.Accepted++
		}
	}
}

// Holder returns the state of holder id.
func (s *TokenStore) Holder(id int) HolderState {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := HolderState{Last: make(map[MsgKind]*StoreEvent)}
	if cur := s.byID[id]; cur != nil {
		hs.Writes, hs.Accepted = cur.Writes, cur.Accepted
		for k, ev := range cur.Last {
			hs.Last[k] = ev
		}
	}
	return hs
}

// Events returns a copy of the log.
func (s *TokenStore) Events() []StoreEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StoreEvent(nil), s.log...)
}

// Close stops serving, hangs up on every holder and waits for the
// store's goroutines.
func (s *TokenStore) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// StoreClient is a holder's connection to a TokenStore. It is not safe
// for concurrent use.
type StoreClient struct {
	conn net.Conn
	enc  *json.Encoder
	dec  *json.Decoder
}

// DialStore connects to the TokenStore on the unix socket path.
func DialStore(path string) (*StoreClient, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &StoreClient{conn: conn, enc: json.NewEncoder(conn), dec: json.NewDecoder(bufio.NewReader(conn))}, nil
}

// Send sends m and waits for the store's answer.
func (c *StoreClient) Send(m StoreMsg) (StoreReply, error) {
	if err := c.enc.Encode(m); err != nil {
		return StoreReply{}, fmt.Errorf("store: send %s: %w", m.Kind, err)
	}
	var r StoreReply
	if err := c.dec.Decode(&r); err != nil {
		return StoreReply{}, fmt.Errorf("store: answer to %s: %w", m.Kind, err)
	}
	return r, nil
}

// Close hangs up.
func (c *StoreClient) Close() error { return c.conn.Close() }
