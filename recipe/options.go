package recipe

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/retry"
)

// defaultSessionTimeout is the session timeout a [Client] asks for unless
// [WithSessionTimeout] says otherwise.
const defaultSessionTimeout = 10 * time.Second

// Option configures a [Client].
type Option func(*config)

type config struct {
	sessionTimeout time.Duration
	lossTimeout    time.Duration
	authUser       string
	authPassword   string
	auth           bool
	acl            []zk.ACL
	logger         *slog.Logger
	retry          retry.Policy
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	dialer         zk.Dialer
	cleanupGrace   time.Duration

	tls       *tls.Config
	maxPacket int
	maxFrame  int

	tolerateSuspension bool // ride out a silence while the session may live
	anyDirACL          bool // queue in lock directories whatever their ACL grants others

	dialerSet, tracerSet, meterSet, tlsSet bool // set by an option, so nil is refused
}

func defaultConfig() config {
	return config{
		sessionTimeout: defaultSessionTimeout,
		acl:            zk.WorldACL(zk.PermAll),
		logger:         slog.New(slog.DiscardHandler),
		retry:          retry.Default(),
		cleanupGrace:   500 * time.Millisecond,
		maxPacket:      defaultMaxPacket,
		maxFrame:       DefaultMaxFrame,
	}
}

func (c *config) validate() error {
	switch {
	case c.sessionTimeout < minSessionTimeout || c.sessionTimeout > maxSessionTimeout:
		return fmt.Errorf("%w: session timeout %v out of range: the client takes %v to %v (whole milliseconds, sent as 32 bits); "+
			"the server then grants 2 to 20 of its ticks (tickTime, 2s by default: 4s to 40s), whatever is asked",
			ErrInvalidArgument, c.sessionTimeout, minSessionTimeout, maxSessionTimeout)
	case c.lossTimeout < 0:
		return fmt.Errorf("%w: loss timeout %v must not be negative", ErrInvalidArgument, c.lossTimeout)
	case c.lossTimeout >= c.sessionTimeout:
		return fmt.Errorf("%w: loss timeout %v must be shorter than the session timeout %v", ErrInvalidArgument, c.lossTimeout, c.sessionTimeout)
	case c.auth && c.authUser == "":
		return fmt.Errorf("%w: digest auth needs a user name", ErrInvalidArgument)
	case c.auth && strings.Contains(c.authUser, ":"):
		// The server splits "user:password" at the first colon: it would
		// store the user as the part before it, and the client's own
		// digest ACL would name another user than the session's.
		return fmt.Errorf("%w: digest user name %s contains ':', which ZooKeeper takes as the end of the name", ErrInvalidArgument, Quote(c.authUser))
	case len(c.acl) == 0:
		return fmt.Errorf("%w: ACL must not be empty", ErrInvalidArgument)
	case c.logger == nil:
		return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
	case c.cleanupGrace < 0:
		return fmt.Errorf("%w: cleanup grace %v must not be negative", ErrInvalidArgument, c.cleanupGrace)
	case c.dialerSet && c.dialer == nil:
		return fmt.Errorf("%w: nil dialer", ErrInvalidArgument)
	case c.tracerSet && c.tracerProvider == nil:
		return fmt.Errorf("%w: nil tracer provider", ErrInvalidArgument)
	case c.meterSet && c.meterProvider == nil:
		return fmt.Errorf("%w: nil meter provider", ErrInvalidArgument)
	case c.tlsSet && c.tls == nil:
		return fmt.Errorf("%w: nil TLS config", ErrInvalidArgument)
	case c.maxPacket < minMaxPacket:
		return fmt.Errorf("%w: max packet %d below %d bytes", ErrInvalidArgument, c.maxPacket, minMaxPacket)
	case c.maxPacket > zkSendBuffer:
		return fmt.Errorf("%w: max packet %d above the %d bytes go-zookeeper can send", ErrInvalidArgument, c.maxPacket, zkSendBuffer)
	case c.maxFrame < minMaxFrame || c.maxFrame > maxMaxFrame:
		return fmt.Errorf("%w: max frame %d out of range: %d to %d bytes", ErrInvalidArgument, c.maxFrame, minMaxFrame, maxMaxFrame)
	}
	if err := retry.Validate(c.retry); err != nil {
		return fmt.Errorf("%w: retry policy: %w", ErrInvalidArgument, err)
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.retry == nil {
		c.retry = retry.None()
	}
	return nil
}

// WithSessionTimeout sets the session timeout requested from ZooKeeper.
// The server may negotiate it into its [minSessionTimeout, maxSessionTimeout]
// range (2 to 20 ticks by default); the client uses the negotiated value.
// [Connect] refuses, with [ErrInvalidArgument], a timeout below 100ms or
// above 2^31-1 milliseconds (about 24 days), which the protocol cannot
// carry. Default: 10s.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

// WithLossTimeout sets how long the client may hear nothing from ZooKeeper
// before everything it holds is declared lost with [ErrConnectionSuspended].
// It must stay below the session timeout so that a holder is told before the
// server can expire its session and grant the lock to someone else.
// Default (0): half the negotiated session timeout.
func WithLossTimeout(d time.Duration) Option {
	return func(c *config) { c.lossTimeout = d }
}

// WithSuspensionTolerance makes holds ride out a short suspension instead
// of ending at the loss timeout: Curator's "session" policy, for services
// whose connection or process stalls briefly now and then (a long garbage
// collection, a flaky link).
//
// By default a silence past the loss timeout ends every hold with
// [ErrConnectionSuspended], even if the same session answers again a moment
// later. With this option, the silence only suspends the holds: each
// [Hold.Suspended] channel closes, and the holder must stop acting as
// holder until [Hold.Resumed] closes. The hold is kept if the same session
// answers again and the hold's node, read again, is still owned by it; it
// is lost with [ErrNodeDeleted] if the node is gone or owned by another
// session, and with [ErrSessionExpired] when the server reports the
// session expired or nothing has been heard for the whole session timeout
// (after which the server may have expired it). A hold is never lost with
// [ErrConnectionSuspended] in this mode.
//
// The price: another client may be granted the lock as soon as the server
// expires the session, which can happen while the hold is only suspended.
// Mutual exclusion then rests on the holder stopping when Suspended closes,
// and on fencing tokens ([Hold.Token]) at the resource. See
// docs/failure-model.md. Default: off (a suspension is a loss).
func WithSuspensionTolerance() Option {
	return func(c *config) { c.tolerateSuspension = true }
}

// WithDigestAuth authenticates the session with the digest scheme
// ("user:password"), also after every reconnect. A user name containing
// ':' is refused by [Connect] with [ErrInvalidArgument] (the server would
// cut the name there). The password is never printed: a [Client] prints
// its user only (see [Client.Format]). Default: no credentials.
func WithDigestAuth(user, password string) Option {
	return func(c *config) { c.auth, c.authUser, c.authPassword = true, user, password }
}

// WithACL sets the ACL of every node the client creates: lock nodes, lock
// directories and their missing parents. Combine with [WithDigestAuth] and
// zk.DigestACL to keep other credentials out of a lock. A client with an
// ACL of its own (one that does not grant everything to world:anyone)
// also checks, before it queues, that the lock directory grants DELETE,
// CREATE and ADMIN to no identity its ACL does not, and refuses it with
// [ErrDirectoryACL] otherwise: ZooKeeper checks a delete against the
// parent's ACL, so whoever may delete in the directory may delete the
// holder's node. [WithAnyDirectoryACL] turns the check off and creates
// missing parents open, as Curator does by default. Default:
// world-readable and writable (zk.WorldACL(zk.PermAll)), and no check.
func WithACL(acl ...zk.ACL) Option {
	return func(c *config) { c.acl = append([]zk.ACL(nil), acl...) }
}

// WithLogger sets the logger for connection, wait, wake-up and cleanup
// events (at debug level) and problems (at warn level). Default: silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithRetryPolicy sets the policy that retries connection-loss-class errors
// inside every operation, and paces every background loop of the client and
// its recipes (cleanup of abandoned nodes, re-arming watches,
// re-campaigning, observing), which keep its last pace, at least 100ms,
// where it would give up. The first retry of an operation after a
// connection loss does not sleep: the request waits in the client for the
// reconnect, which starts at once; the following ones sleep as the policy
// says. Default: [retry.Default]. nil means no retries.
// A policy built from invalid arguments makes [Connect] fail with
// [ErrInvalidArgument].
func WithRetryPolicy(p retry.Policy) Option {
	return func(c *config) { c.retry = p }
}

// WithTracerProvider sets the OpenTelemetry tracer provider for acquire,
// release and leadership spans. Default: the otel global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider, c.tracerSet = tp, true }
}

// WithMeterProvider sets the OpenTelemetry meter provider. Default: the
// otel global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider, c.meterSet = mp, true }
}

// WithDialer sets the function that opens TCP connections to the servers.
// Default: net.DialTimeout.
func WithDialer(d zk.Dialer) Option {
	return func(c *config) { c.dialer, c.dialerSet = d, true }
}

// WithCleanupGrace sets how long a failed or cancelled acquire waits, after
// its context ended, for the deletion of its node before it returns and
// leaves the deletion to the background. Default: 500ms.
func WithCleanupGrace(d time.Duration) Option {
	return func(c *config) { c.cleanupGrace = d }
}

// WithTLS connects to the servers over TLS (ZooKeeper's secureClientPort)
// with cfg, whose ServerName defaults to the host of each server address.
// A handshake failure (an unknown certificate authority, say) is a dial
// error: [Connect] reports it when its context ends. Default: plain TCP.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls, c.tlsSet = cfg, true }
}

// DefaultMaxFrame is the largest frame a client accepts from a server by
// default ([WithMaxFrame]): room for a listing of 100,000 children with
// protected names (about 6 MB).
const DefaultMaxFrame = 8 << 20

// ZooKeeper refuses, by closing the connection, any request larger than its
// jute.maxbuffer, 0xfffff bytes by default.
const (
	defaultMaxPacket = 0xfffff
	minMaxPacket     = 4096
)

// WithMaxPacket sets the largest request the servers accept (their
// jute.maxbuffer; default 0xfffff bytes, ZooKeeper's default, at least
// 4096, at most 1572860, the most go-zookeeper can send). Requests are
// measured as the wire carries them, before any I/O: a lock path or node
// data that would not fit is refused by the recipes' constructors, a
// [Hold.Commit] or [Lock.AcquireN] too large by the call, all with
// [ErrInvalidArgument] naming the size and the limit. Sent, such a request
// would make the server drop the connection, and with it every call of
// every recipe on the client.
func WithMaxPacket(n int) Option {
	return func(c *config) { c.maxPacket = n }
}

// WithMaxFrame sets the largest frame, in bytes, the client accepts from
// a server: a reply, a watch notification. Default [DefaultMaxFrame]
// (8 MiB), room for a listing of 100,000 lock nodes; the least accepted is
// 2 MiB (a node of ZooKeeper's default 1 MiB limit and its listing), the
// most 1 GiB. A frame announcing more ends its connection before any of
// it is read, and go-zookeeper dials again: the client never allocates
// what a server merely announces (see docs/failure-model.md, "A hostile
// server").
func WithMaxFrame(n int) Option {
	return func(c *config) { c.maxFrame = n }
}

// Bounds of WithMaxFrame.
const (
	minMaxFrame = 2 << 20
	maxMaxFrame = 1 << 30
)
