package recipe

import (
	"time"

	"github.com/go-zookeeper/zk"
)

// zkSeam is everything the engine learns from ZooKeeper, in one place: the
// lock engine (acquire, hold, cleanup) and the client's trust in its
// session reach ZooKeeper only through it, so the phase machine can run
// against a scripted fake as well as against go-zookeeper.
//
// Downwards, a seam carries requests with go-zookeeper's signatures and
// meaning: each blocks until its reply (or the connection's failure), and
// the *W forms return a channel that delivers one watch event. Upwards, it
// reports to the client:
//
//   - connection and session state changes, by calling
//     [Client.sessionEvent] with the session they concern (this ends and
//     begins epochs);
//   - the proof that a server was alive, by calling [Client.heardAt] with
//     the time, on the seam's clock, at which an answered request was
//     written;
//   - through createZxid and createWritten below, what the wire tap saw of
//     creates: each one's zxid, and the moment its request was written.
//
// now is the clock the loss timeout reads.
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
	// SessionID is the session of the connection now, 0 while there is none.
	SessionID() int64
	// Close ends the session.
	Close()

	// createZxid returns, and forgets, the zxid of the create whose reply
	// returned path (the node's czxid, its fencing token); false when it
	// was not seen.
	createZxid(path string) (int64, bool)
	// createWritten returns a channel closed once a create request for
	// path has been written to the connection (never, when the seam cannot
	// tell), and a function to call when no longer interested.
	createWritten(path string) (written <-chan struct{}, forget func())
	// now is the time since the seam was made, on a monotonic clock.
	now() time.Duration
}

// liveZK is the seam to a real ensemble: go-zookeeper's connection, and the
// wire tap on it (see wire.go) for zxids, write timing and proof of life.
// The connection is attached once go-zookeeper has made it; the clock and
// the tap work before that, while go-zookeeper dials.
type liveZK struct {
	*zk.Conn
	c     *Client
	start time.Time
}

func (z *liveZK) createZxid(path string) (int64, bool) { return z.c.zxids.take(path) }

func (z *liveZK) createWritten(path string) (<-chan struct{}, func()) {
	return z.c.createWrites.expect(path)
}

func (z *liveZK) now() time.Duration { return time.Since(z.start) }

// onEvent is go-zookeeper's event callback: it reports session state
// changes, with the session id of the last connect response, to the
// client, and hands node events to the client's dispatch (dispatch.go). It
// runs on go-zookeeper's goroutines and must never block.
func (z *liveZK) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		z.c.watches.route(ev)
		return
	}
	z.c.sessionEvent(ev.State, z.c.wireSession.Load(), ev.Server)
}
