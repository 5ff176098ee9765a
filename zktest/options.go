package zktest

import (
	"crypto/tls"
	"fmt"
	"io"
	"time"
)

// An Option configures a server or an ensemble started by Start, NewServer,
// StartEnsemble or NewEnsemble. Each option states its default.
type Option func(*settings)

// settings is what the options set; the zero value means "the default".
type settings struct {
	tickTime       time.Duration
	minSession     time.Duration
	maxSession     time.Duration
	forceSync      bool
	containerCheck time.Duration
	startTimeout   time.Duration
	port           int
	tls            *tls.Certificate
	tlsClientCA    *CA
	log            io.Writer
	config         [][2]string
	jvmArgs        []string
	classPath      string
	// own lists the options that need a server process of our own: they
	// cannot apply to an external server named by ZKTEST_ADDR.
	own []string
}

const (
	defaultTickTime       = 200 * time.Millisecond
	defaultMinSession     = time.Second
	defaultMaxSession     = 60 * time.Second
	defaultContainerCheck = time.Second
	defaultStartTimeout   = 30 * time.Second
)

// WithTickTime sets ZooKeeper's basic time unit (tickTime). Default 200ms:
// the server checks session expiry once per tick, so a short tick makes
// expiry prompt.
func WithTickTime(d time.Duration) Option {
	return func(s *settings) { s.tickTime = d; s.own = append(s.own, "WithTickTime") }
}

// WithSessionTimeouts sets the smallest and largest session timeouts the
// server grants (minSessionTimeout, maxSessionTimeout). Default 1s and
// 60s, so tests can use sessions of a second.
func WithSessionTimeouts(min, max time.Duration) Option {
	return func(s *settings) {
		s.minSession, s.maxSession = min, max
		s.own = append(s.own, "WithSessionTimeouts")
	}
}

// WithForceSync makes the server fsync its transaction log before it
// acknowledges a write (forceSync=yes), as production servers do. Default
// off: tests run faster, and only a machine crash could tell the
// difference. Benchmarks turn it on to measure realistic write latency.
func WithForceSync(on bool) Option {
	return func(s *settings) { s.forceSync = on; s.own = append(s.own, "WithForceSync") }
}

// WithContainerCheckInterval sets how often the server deletes empty
// container nodes and expired TTL nodes (znode.container.checkIntervalMs).
// Default 1s (ZooKeeper's own default is a minute).
func WithContainerCheckInterval(d time.Duration) Option {
	return func(s *settings) {
		s.containerCheck = d
		s.own = append(s.own, "WithContainerCheckInterval")
	}
}

// WithStartTimeout bounds how long starting a server (or an ensemble's
// quorum) may take. Default 30s.
func WithStartTimeout(d time.Duration) Option {
	return func(s *settings) { s.startTimeout = d }
}

// WithPort makes a standalone server listen on this client port of
// 127.0.0.1 instead of a free one. Default: a free port. Ensembles pick
// their own ports.
func WithPort(port int) Option {
	return func(s *settings) { s.port = port; s.own = append(s.own, "WithPort") }
}

// WithTLS makes a standalone server also serve TLS clients, with this
// certificate, on a second loopback port (see Server.SecureAddr). The
// plain port keeps serving. Clients are not asked for certificates unless
// WithTLSClientCA is given too. Make a certificate with NewCA and
// CA.Issue. Default: no TLS.
func WithTLS(cert tls.Certificate) Option {
	return func(s *settings) { s.tls = &cert; s.own = append(s.own, "WithTLS") }
}

// WithTLSClientCA, with WithTLS, makes the server require on its TLS port
// a client certificate issued by ca. Default: none required.
func WithTLSClientCA(ca *CA) Option {
	return func(s *settings) { s.tlsClientCA = ca; s.own = append(s.own, "WithTLSClientCA") }
}

// WithConfig adds a line key=value to the server's zoo.cfg, after the
// kit's own settings, which it overrides. ZooKeeper turns keys it does not
// know into "zookeeper."-prefixed system properties, so most server
// switches can be set this way (for example WithConfig("snapCount",
// "1000")). TTL nodes (zookeeper.extendedTypesEnabled) are already on.
func WithConfig(key, value string) Option {
	return func(s *settings) {
		s.config = append(s.config, [2]string{key, value})
		s.own = append(s.own, "WithConfig")
	}
}

// WithJVMArgs adds arguments to the server's java command line, before the
// class path: system properties (-Dname=value) or heap settings. Default:
// a small heap and a fast-starting JIT.
func WithJVMArgs(args ...string) Option {
	return func(s *settings) {
		s.jvmArgs = append(s.jvmArgs, args...)
		s.own = append(s.own, "WithJVMArgs")
	}
}

// WithClassPath runs the server from this Java class path (entries
// separated by ':'), which must hold ZooKeeper's jar and its dependencies.
// Default: found as Start's documentation describes (ZOOKEEPER_HOME, then
// Debian's zookeeper package).
func WithClassPath(cp string) Option {
	return func(s *settings) { s.classPath = cp; s.own = append(s.own, "WithClassPath") }
}

// WithLog also sends the server's output to w. The output always goes to
// a log file in the server's directory (Server.LogPath), whose last lines
// are part of any start-up error. w must stay usable until the server is
// stopped. Default: the log file only.
func WithLog(w io.Writer) Option {
	return func(s *settings) { s.log = w }
}

// newSettings applies opts over the defaults.
func newSettings(opts []Option) settings {
	var s settings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if s.tickTime <= 0 {
		s.tickTime = defaultTickTime
	}
	if s.minSession <= 0 {
		s.minSession = defaultMinSession
	}
	if s.maxSession <= 0 {
		s.maxSession = defaultMaxSession
	}
	if s.maxSession < s.minSession {
		s.maxSession = s.minSession
	}
	if s.containerCheck <= 0 {
		s.containerCheck = defaultContainerCheck
	}
	if s.startTimeout <= 0 {
		s.startTimeout = defaultStartTimeout
	}
	return s
}

// check rejects settings that cannot describe the server asked for.
func (s settings) check(ensemble bool) error {
	switch {
	case s.port < 0 || s.port > 65535:
		return fmt.Errorf("zktest: WithPort(%d): not a TCP port", s.port)
	case ensemble && s.port != 0:
		return fmt.Errorf("zktest: WithPort: an ensemble picks its own ports")
	case ensemble && s.tls != nil:
		return fmt.Errorf("zktest: WithTLS: standalone servers only")
	case s.tlsClientCA != nil && s.tls == nil:
		return fmt.Errorf("zktest: WithTLSClientCA without WithTLS")
	}
	return nil
}
