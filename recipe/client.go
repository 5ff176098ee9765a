package recipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/recipe/internal/transport"
)

const instrumentationName = "github.com/zkrecipes/zkrecipes"

// Client is a ZooKeeper session shared by any number of recipes. It adds to
// go-zookeeper what locks need: contexts on every call, epochs of trust in
// the session, and loss detection (session expiry, and silence long enough
// that the server may expire the session).
//
// A Client is safe for concurrent use. Close it when done: closing ends the
// session, so the server deletes every node the client still holds.
type Client struct {
	zk     zkSeam          // everything the engine learns from ZooKeeper
	live   *transport.Conn // the transport behind zk in production, nil behind a fake
	hooks  *testHooks
	cfg    config
	log    *slog.Logger
	tracer trace.Tracer
	ins    instruments

	lastHeard     atomic.Int64 // when a server was last known alive, on the seam's clock (nanos)
	stats         stats
	workers       workers         // run go-zookeeper's requests (workers.go)
	watches       nodeWatches     // the dispatch of node events to watching holds (dispatch.go)
	listings      listings        // listings of lock directories shared by the client's waiters (listings.go)
	dirACLs       dirACLs         // the lock directories whose ACL was checked (diracl.go)
	lifetime      context.Context // cancelled by Close
	cancelLife    context.CancelFunc
	closeOnce     sync.Once
	connectedOnce sync.Once
	connected     chan struct{} // closed when the first session is established

	mu        sync.Mutex
	closed    bool
	cur       *epoch
	trust     chan struct{} // closed and replaced whenever a session is trusted anew (trustedLocked)
	rewatch   chan struct{} // closed and replaced whenever the server answered go-zookeeper's watches set again (rewatched)
	isConn    bool
	wg        sync.WaitGroup // every goroutine the client starts
	lastState zk.State
}

// Connect opens a session with the ZooKeeper servers ("host:port" each) and
// returns when it is established, or with an error when ctx ends first (the
// half-open connection is then closed). Bad input is refused before any I/O.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	return connect(ctx, servers, nil, opts)
}

// connect is Connect with the settings of tests (none: nil).
func connect(ctx context.Context, servers []string, hooks *testHooks, opts []Option) (*Client, error) {
	cfg, err := connectConfig(ctx, servers, opts)
	if err != nil {
		return nil, err
	}
	c := newClient(cfg)
	c.hooks = hooks
	tcfg := transport.Config{
		SessionTimeout: cfg.sessionTimeout,
		Dialer:         cfg.dialer,
		TLS:            cfg.tls,
		MaxFrame:       cfg.maxFrame,
		Logger:         c.log,
		Backoff:        c.Backoff,
		Shuffle:        c.shuffle,
		Go:             c.spawn,
	}
	if hooks != nil {
		tcfg.BufferSize = hooks.bufferSize
	}
	live := transport.New(tcfg, clientUp{c})
	c.zk, c.live = live, live
	if err := live.Connect(servers); err != nil {
		live.Close()
		return nil, fmt.Errorf("recipe: connect: %w", err)
	}
	c.goroutine(c.watchdog)
	if err := c.awaitSession(ctx, servers); err != nil {
		c.Close()
		return nil, err
	}
	c.warnGranted()
	return c, nil
}

// connectConfig checks Connect's input and applies the options.
func connectConfig(ctx context.Context, servers []string, opts []Option) (config, error) {
	cfg := defaultConfig()
	if ctx == nil {
		return cfg, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if len(servers) == 0 {
		return cfg, fmt.Errorf("%w: no servers", ErrInvalidArgument)
	}
	for _, s := range servers {
		if err := checkServer(s); err != nil {
			return cfg, err
		}
	}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		o(&cfg)
	}
	return cfg, cfg.validate()
}

// newClient returns a client with no seam yet: the caller attaches one
// (c.zk) before any request.
func newClient(cfg config) *Client {
	c := &Client{
		cfg:       cfg,
		log:       cfg.logger,
		tracer:    cfg.tracerProvider.Tracer(instrumentationName),
		connected: make(chan struct{}),
		trust:     make(chan struct{}),
	}
	var err error
	if c.ins, err = instrumentsFor(cfg.meterProvider); err != nil {
		c.log.Warn("some metric instruments could not be created", "err", err)
	}
	c.lifetime, c.cancelLife = context.WithCancel(context.Background())
	return c
}

// refusedFrame notes a frame the wire tap refused (its connection ends).
func (c *Client) refusedFrame(err error) {
	c.stats.refusedFrames.Add(1)
	c.log.Warn("refused a frame from the server; reconnecting", "err", err)
}

// awaitSession waits until the first session is established and
// authenticates it, or says why it was not.
func (c *Client) awaitSession(ctx context.Context, servers []string) error {
	select {
	case <-c.connected:
	case <-c.live.Untrusted():
		return fmt.Errorf("recipe: connect to %v: %w", servers, c.live.LastDialErr())
	case <-ctx.Done():
		if err := c.live.LastDialErr(); err != nil {
			return fmt.Errorf("recipe: connect to %v: %w (last dial: %w)", servers, ctx.Err(), err)
		}
		if c.live.Dials() > 0 {
			return fmt.Errorf("recipe: connect to %v: %w (connections were accepted but no server completed the ZooKeeper handshake: a TLS port without WithTLS?)", servers, ctx.Err())
		}
		return fmt.Errorf("recipe: connect to %v: %w", servers, ctx.Err())
	}
	if !c.cfg.auth {
		return nil
	}
	err := c.call(ctx, func() error {
		return c.zk.AddAuth("digest", []byte(c.cfg.authUser+":"+c.cfg.authPassword))
	})
	if err != nil {
		return fmt.Errorf("recipe: digest auth: %w", err)
	}
	return nil
}

// Close ends the session (the server deletes every ephemeral node it owns),
// tells every holder it lost ownership with [ErrClosed], and waits for the
// client's goroutines to end. It is safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.endEpochLocked(c.cur, ErrClosed)
		c.mu.Unlock()
		c.closeWorkers()
		c.cancelLife()
		if c.zk != nil {
			c.zk.Close()
		}
		c.wg.Wait()
	})
	return nil
}

// SessionID returns the current session id, 0 while there is none.
func (c *Client) SessionID() int64 {
	if c.isClosed() {
		return 0
	}
	if e := c.currentEpoch(); e != nil {
		return e.session
	}
	return c.zk.SessionID()
}

// SessionTimeout returns the session timeout the server granted (the
// requested one until the first connection).
func (c *Client) SessionTimeout() time.Duration {
	if c.zk == nil {
		return c.cfg.sessionTimeout
	}
	return c.zk.SessionTimeout()
}

// lossTimeout is how long the client may hear nothing before holders are
// told they lost ownership.
func (c *Client) lossTimeout() time.Duration {
	if c.cfg.lossTimeout > 0 {
		return c.cfg.lossTimeout
	}
	return c.SessionTimeout() / 2
}

// currentEpoch returns the epoch that is in force, or nil when there is
// none (not connected yet, the last one ended, or it is suspended).
func (c *Client) currentEpoch() *epoch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur.ended() || c.cur.susp.began {
		return nil
	}
	return c.cur
}

// isClosed reports whether Close has been called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// sessionEvent applies a connection or session state change that the seam
// reports for session sid: a new session begins an epoch, an expiry ends
// the current one. It must never block.
func (c *Client) sessionEvent(state zk.State, sid int64, server string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.lastState = state
	switch state {
	case zk.StateHasSession:
		c.isConn = true
		c.heard()
		if c.cur != nil && !c.cur.ended() && c.cur.session != sid {
			c.endEpochLocked(c.cur, ErrSessionExpired)
		}
		if c.cur == nil || c.cur.ended() {
			c.cur = c.newEpoch(sid)
			c.trustedLocked()
			c.log.Debug("zookeeper session established", "session", fmt.Sprintf("0x%x", sid), "server", server)
		} else {
			c.log.Debug("zookeeper reconnected", "session", fmt.Sprintf("0x%x", sid), "server", server)
		}
		c.connectedOnce.Do(func() { close(c.connected) })
	case zk.StateExpired:
		c.isConn = false
		c.endEpochLocked(c.cur, ErrSessionExpired)
		c.log.Warn("zookeeper session expired")
	case zk.StateDisconnected:
		if c.isConn {
			c.log.Debug("zookeeper disconnected", "server", server)
		}
		c.isConn = false
	case zk.StateConnecting, zk.StateConnected:
		// Transitional; the watchdog judges silence by the clock.
	}
	c.mu.Unlock()
}

// endEpochLocked ends e (if live) with reason err. c.mu must be held.
func (c *Client) endEpochLocked(e *epoch, err error) {
	if e == nil || e.ended() {
		return
	}
	e.err = err
	e.end()
	c.rewatchLocked() // waiters wait on rewatch for both (see rewatchLocked)
	c.stats.epochsEnded.Add(1)
	if !errors.Is(err, ErrClosed) {
		c.log.Warn("zookeeper session no longer trusted; holders are told they lost ownership",
			"session", fmt.Sprintf("0x%x", e.session), "reason", err)
	}
}

// goroutine runs fn on a goroutine of the client's, which Close waits for;
// once Close has begun it starts nothing and reports false.
func (c *Client) goroutine(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// mapClosed turns go-zookeeper's errors after Close into ErrClosed. An
// error it already turned is left as it is.
func (c *Client) mapClosed(err error) error {
	if err != nil && !errors.Is(err, ErrClosed) &&
		(errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrConnectionClosed)) && c.isClosed() {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// checkServer refuses a server address that cannot be dialled, before any
// I/O: "host:port" (port 1-65535), or a bare host (port 2181).
func checkServer(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: server address %q: %s", ErrInvalidArgument, s, why)
	}
	if s == "" {
		return bad("empty")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.ContainsAny(s, ":[]/ ") {
			return bad("want host:port")
		}
		return nil // a bare host: go-zookeeper adds the default port
	}
	if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
		return bad("want host:port with a port from 1 to 65535")
	}
	return nil
}

// Stats returns the client's counters so far (see [Stats]).
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// Logger returns the client's logger ([WithLogger]; silent by default),
// for recipes that log under the client's settings.
func (c *Client) Logger() *slog.Logger { return c.log }

// Conn returns the client's go-zookeeper connection, for requests the
// recipes do not make: they share the client's session, and with it its
// ephemeral nodes and its expiry. Do not close it (Close the client), and
// do not rely on it across a session expiry without checking SessionID.
func (c *Client) Conn() *zk.Conn {
	if c.live == nil {
		return nil
	}
	return c.live.ZK()
}

// Tracer returns the client's tracer ([WithTracerProvider]; the global
// provider's by default), for recipes' own spans.
func (c *Client) Tracer() trace.Tracer { return c.tracer }
