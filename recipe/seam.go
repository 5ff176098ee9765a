package recipe

import (
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/transport"
)

// zkSeam is everything the engine learns from ZooKeeper, in one place: the
// lock engine (acquire, hold, cleanup) and the client's trust in its
// session reach ZooKeeper only through it, so the phase machine can run
// against a scripted fake as well as against the transport
// (recipe/internal/transport), which implements it in production.
//
// Downwards, a seam carries requests with go-zookeeper's signatures and
// meaning: each blocks until its reply (or the connection's failure), and
// the *W forms return a channel that delivers one watch event. Upwards, it
// reports to the client through [transport.Up] (see clientUp): connection
// and session state changes with the session they concern (these end and
// begin epochs), node events, and the proof that a server was alive: the
// time, on the seam's clock, at which an answered request was written.
type zkSeam interface {
	Children(path string) ([]string, *zk.Stat, error)
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	Get(path string) ([]byte, *zk.Stat, error)
	GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error)
	ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error)
	Set(path string, data []byte, version int32) (*zk.Stat, error)
	Delete(path string, version int32) error
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	CreateContainer(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	Multi(ops ...any) ([]zk.MultiResponse, error)
	AddAuth(scheme string, auth []byte) error
	// CreateThenRead creates path and, with dir set, lists dir (and reads
	// its data, with readDir) in the same round trip, the reads sent
	// behind the create: see [transport.CreateThenRead], the one
	// implementation of it. The result carries the node's zxid.
	CreateThenRead(path string, data []byte, flags int32, acl []zk.ACL, dir string, readDir bool) (created, error)
	// SessionID is the session of the connection now, 0 while there is none.
	SessionID() int64
	// SessionTimeout is the session timeout the server granted (the one
	// asked for until the first connection).
	SessionTimeout() time.Duration
	// Close ends the session.
	Close()

	// CreateZxid returns, and forgets, the zxid of the create whose reply
	// returned path (the node's czxid, its fencing token); false when it
	// was not seen.
	CreateZxid(path string) (int64, bool)
	// Now is the time since the seam was made, on a monotonic clock.
	Now() time.Duration
}

// created is what a create with reads behind it learnt: the node, its
// zxid, and the listing read in its round trip, if any.
type created = transport.Created

// clientUp is how the transport reports to the client ([transport.Up]).
type clientUp struct{ c *Client }

func (u clientUp) SessionEvent(state zk.State, session int64, server string) {
	u.c.sessionEvent(state, session, server)
}

// NodeEvent hands node events to the client's dispatch (dispatch.go).
func (u clientUp) NodeEvent(ev zk.Event)      { u.c.watches.route(ev) }
func (u clientUp) Alive(sentAt time.Duration) { u.c.heardAt(int64(sentAt)) }
func (u clientUp) Rewatched()                 { u.c.rewatched() }
func (u clientUp) RefusedFrame(err error)     { u.c.refusedFrame(err) }
