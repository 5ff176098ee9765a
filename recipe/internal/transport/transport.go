// Package transport is everything of the client that touches the
// connection to ZooKeeper: go-zookeeper's Conn, the wire tap that reads its
// frames (wire.go), the tracked connection under it with the TLS handshake
// (conn.go), the host provider that paces its dials (hostprovider.go), and
// the create with reads behind it in one round trip (behind.go).
//
// The engine reaches it only through its seam (package recipe's zkSeam),
// which [Conn] implements: requests go down with go-zookeeper's signatures
// and meaning, and what the transport learns comes up through [Up]:
// session events, node events, proof of life, and the setWatches answer.
// The zxids of created nodes come back with the create (see
// [CreateThenRead]) or from [Conn.CreateZxid].
//
// Whatever arrives on the wire is untrusted: a frame that is short,
// oversized or out of step ends the connection (and go-zookeeper dials
// again) before go-zookeeper parses it.
package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/retry"
)

// Up is what the transport reports to, the client above it. Its methods
// run on go-zookeeper's goroutines and on the reading side of a connection:
// they must never block.
type Up interface {
	// SessionEvent reports a connection or session state change, with the
	// session id of the last connect response.
	SessionEvent(state zk.State, session int64, server string)
	// NodeEvent hands on a watch event for a node.
	NodeEvent(ev zk.Event)
	// Alive reports that a server answered a request written at sentAt,
	// on the transport's clock ([Conn.Now]): the server was alive then.
	Alive(sentAt time.Duration)
	// Rewatched reports that the server answered go-zookeeper's watches,
	// set again on a new connection.
	Rewatched()
	// RefusedFrame reports a frame the wire tap refused; its connection
	// ends, and go-zookeeper dials again.
	RefusedFrame(err error)
}

// Config is the transport's part of the client's options.
type Config struct {
	SessionTimeout time.Duration // asked for, until a server grants one
	Dialer         zk.Dialer     // nil: net.DialTimeout
	TLS            *tls.Config   // nil: plain TCP
	MaxFrame       int           // the largest frame accepted from a server
	Logger         *slog.Logger  // go-zookeeper's lines go to it, at debug level
	// Backoff returns a fresh schedule for the rounds of dials.
	Backoff func() *retry.Pacer
	// Shuffle shuffles the servers; nil: math/rand/v2.
	Shuffle func(n int, swap func(i, j int))
	// BufferSize, when > 0, sizes go-zookeeper's two buffers (the
	// simulation's many clients).
	BufferSize int
	// Go runs the reads sent behind a create (see [Spawn]); nil: a
	// goroutine each.
	Go Spawn
}

// Conn is the transport of one client: go-zookeeper's connection with the
// tap on it. It implements the engine's seam. The clock and the tap work
// from New on, while go-zookeeper dials; the requests once Connect has
// returned.
type Conn struct {
	*zk.Conn
	cfg   Config
	up    Up
	start time.Time
	hosts *hostProvider

	lifetime context.Context // cancelled by Close
	cancel   context.CancelFunc

	dialErr       atomic.Pointer[error] // error of the last failed dial
	dials         atomic.Int64          // connections opened
	splitWrites   atomic.Bool           // tests: go-zookeeper's frames go out in two writes (trackedConn.Write)
	untrusted     chan struct{}         // closed when a server's certificate is refused
	untrustedOnce sync.Once
	negotiatedMs  atomic.Int64 // session timeout granted by the server
	wireSession   atomic.Int64 // session id of the last connect response
	zxids         createZxids  // zxids of create replies, by returned path
	sessionZxid   sessionZxid  // the highest zxid the session saw in replies
	createWrites  createWrites // creates written to the wire, for reads sent behind them
}

// New returns a transport that reports to up; Connect starts it.
func New(cfg Config, up Up) *Conn {
	t := &Conn{cfg: cfg, up: up, start: time.Now(), untrusted: make(chan struct{})}
	if t.cfg.Logger == nil {
		t.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if t.cfg.Backoff == nil {
		t.cfg.Backoff = func() *retry.Pacer { return retry.NewPacer(retry.Default(), minBackgroundWait) }
	}
	t.lifetime, t.cancel = context.WithCancel(context.Background())
	t.negotiatedMs.Store(cfg.SessionTimeout.Milliseconds())
	t.hosts = &hostProvider{t: t}
	return t
}

// minBackgroundWait is the shortest pause between two rounds of dials.
const minBackgroundWait = 100 * time.Millisecond

// Connect has go-zookeeper connect to servers through the transport. It
// returns at once; up hears of the session.
func (t *Conn) Connect(servers []string) error {
	dial := t.cfg.Dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, _, err := zk.Connect(servers, t.cfg.SessionTimeout, withBuffers(t.cfg.BufferSize,
		zk.WithHostProvider(t.hosts),
		zk.WithDialer(t.wrapDialer(dial)),
		zk.WithEventCallback(t.onEvent),
		zk.WithLogger(zkLogger{t.cfg.Logger}),
		zk.WithLogInfo(false),
	)...)
	if err != nil {
		return err
	}
	t.Conn = conn
	return nil
}

// withBuffers adds go-zookeeper's buffer sizes to opts when size > 0
// (go-zookeeper's option type is unexported: O stands for it).
func withBuffers[O ~func(*zk.Conn)](size int, opts ...O) []O {
	if size > 0 {
		opts = append(opts, O(zk.WithMaxBufferSize(size)), O(zk.WithMaxConnBufferSize(size)))
	}
	return opts
}

// Close ends the session and stops the dials. It is safe to call more than
// once, and before Connect.
func (t *Conn) Close() {
	t.cancel()
	if t.Conn != nil {
		t.Conn.Close()
	}
}

// ZK returns go-zookeeper's connection (nil before Connect).
func (t *Conn) ZK() *zk.Conn { return t.Conn }

// Now is the time since the transport was made, on a monotonic clock.
func (t *Conn) Now() time.Duration { return time.Since(t.start) }

// SessionTimeout is the session timeout the server granted (the one asked
// for until the first connect response).
func (t *Conn) SessionTimeout() time.Duration {
	return time.Duration(t.negotiatedMs.Load()) * time.Millisecond
}

// CreateZxid returns, and forgets, the zxid of the create whose reply
// returned path (the node's czxid); false when the tap did not see it.
func (t *Conn) CreateZxid(path string) (int64, bool) { return t.zxids.take(path) }

// CreateThenRead creates path and, with dir set, lists dir (and reads its
// data, with readDir) behind it in the same round trip: see the function
// CreateThenRead.
func (t *Conn) CreateThenRead(path string, data []byte, flags int32, acl []zk.ACL, dir string, readDir bool) (Created, error) {
	return CreateThenRead(t, t.createWrites.expect, t.cfg.Go, path, data, flags, acl, dir, readDir)
}

// Untrusted is closed once a server's certificate was refused: no retry
// can mend that.
func (t *Conn) Untrusted() <-chan struct{} { return t.untrusted }

// LastDialErr is the error of the last failed dial, nil when none failed.
func (t *Conn) LastDialErr() error {
	if p := t.dialErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Dials is the count of connections opened.
func (t *Conn) Dials() int64 { return t.dials.Load() }

// SplitWrites makes go-zookeeper's frames go out in two writes each, as a
// go-zookeeper that wrote its frames in pieces would (tests).
func (t *Conn) SplitWrites() { t.splitWrites.Store(true) }

// monotonic is Now in nanoseconds, the tap's clock.
func (t *Conn) monotonic() int64 { return int64(t.Now()) }

// alive is the tap's proof of life, passed up.
func (t *Conn) alive(sentAt int64) { t.up.Alive(time.Duration(sentAt)) }

// refusedFrame notes a frame the wire tap refused (its connection ends).
func (t *Conn) refusedFrame(err error) { t.up.RefusedFrame(err) }

// onEvent is go-zookeeper's event callback: it reports session state
// changes, with the session id of the last connect response, and hands
// node events up. It runs on go-zookeeper's goroutines and must never
// block.
func (t *Conn) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		t.up.NodeEvent(ev)
		return
	}
	t.up.SessionEvent(ev.State, t.wireSession.Load(), ev.Server)
}

// shuffle shuffles n elements with the configured source.
func (t *Conn) shuffle(n int, swap func(i, j int)) {
	if t.cfg.Shuffle != nil {
		t.cfg.Shuffle(n, swap)
		return
	}
	rand.Shuffle(n, swap)
}
