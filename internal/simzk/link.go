package simzk

import (
	"time"

	"github.com/go-zookeeper/zk"
)

// A link is one TCP connection between a client and the server. Its
// server side (under World.mu) holds the stream of messages to the
// client, in order, each with the time it reaches the client, and the
// watches the server keeps for the connection. Its client side is used
// by the Conn's loop only.
type link struct {
	id int
	c  *Conn
	s  *session

	// Server side, under World.mu.
	inbox   []message
	lastDue time.Time
	closed  bool // the server is done with it: nothing more is sent
	dataW   map[string]struct{}
	childW  map[string]struct{}

	// Client side, the Conn's loop only.
	pending  []*call // written, not answered, in the order written
	held     []*call // written during a partition: not at the server yet
	lastRecv time.Time
	nextPing time.Time
}

type msgKind int

const (
	msgReply msgKind = iota // the reply to call
	msgEvent                // a watch event
	msgEOF                  // the server closed the connection
	msgCut                  // the connection broke here (a lost reply)
)

// A message travels from the server to the client on a link.
type message struct {
	kind msgKind
	due  time.Time // when it reaches the client
	call *call
	rep  reply
	ev   zk.Event
}

// push sends m to the client: it arrives after the messages before it,
// and late by the client's SlowReplies. Under World.mu.
func (l *link) push(m message) {
	if l.closed {
		return
	}
	m.due = time.Now().Add(time.Duration(l.c.slow.Load()))
	if m.due.Before(l.lastDue) {
		m.due = l.lastDue
	}
	l.lastDue = m.due
	l.inbox = append(l.inbox, m)
	l.c.poke()
}

// attach makes the server side of a new connection for client c: it
// resumes session id (0: a new session with timeout). It returns nil if
// the session has expired. Under World.mu.
func (w *World) attach(c *Conn, id int64, timeout time.Duration) *link {
	var s *session
	if id == 0 {
		s = w.newSession(timeout)
	} else if s = w.sessions[id]; s == nil {
		return nil
	}
	if s.link != nil {
		// The session moves to the new connection; the server closes
		// the old one.
		w.closeLink(s.link, closeEOF)
	}
	w.nextLink++
	l := &link{
		id:     w.nextLink,
		c:      c,
		s:      s,
		dataW:  make(map[string]struct{}),
		childW: make(map[string]struct{}),
	}
	s.link = l
	s.lastHeard = time.Now()
	return l
}

// How a connection ends, for closeLink.
type closeHow int

const (
	closeBroken closeHow = iota // the client is gone: what was in flight is lost
	closeEOF                    // the server closes: the client reads what was sent, then the end
	closeCut                    // the connection breaks here: the client reads what was sent, then loses it
)

// closeLink ends the server's side of a connection: its watches go, and
// nothing more is sent on it. Under World.mu.
func (w *World) closeLink(l *link, how closeHow) {
	if l.closed {
		return
	}
	for p := range l.dataW {
		if set := w.dataW[p]; set != nil {
			delete(set, l)
			if len(set) == 0 {
				delete(w.dataW, p)
			}
		}
	}
	for p := range l.childW {
		if set := w.childW[p]; set != nil {
			delete(set, l)
			if len(set) == 0 {
				delete(w.childW, p)
			}
		}
	}
	l.dataW, l.childW = nil, nil
	switch how {
	case closeEOF:
		l.push(message{kind: msgEOF})
	case closeCut:
		l.push(message{kind: msgCut})
	default:
		l.inbox = nil
	}
	l.closed = true
	if l.s.link == l {
		l.s.link = nil
	}
}

// serve hands a request that reached the server on l to it: the server
// hears the session, applies the request and sends the reply (or, lose,
// breaks the connection where the reply would have been). A request on
// a connection the server has closed is not read. Under World.mu.
func (w *World) serve(l *link, cl *call, lose bool) {
	if l.closed || w.closed {
		return
	}
	l.s.lastHeard = time.Now()
	rep := cl.exec(w, l)
	if lose {
		w.closeLink(l, closeCut)
		return
	}
	l.push(message{kind: msgReply, call: cl, rep: rep})
	if rep.closeAfter {
		w.closeLink(l, closeEOF)
	}
}
