package zktest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a server; zero values pick the defaults.
type Options struct {
	// TickTime is ZooKeeper's basic time unit (tickTime). Default 200ms.
	// Session expiry is checked once per tick, so a small tick makes
	// expiry prompt.
	TickTime time.Duration
	// MinSessionTimeout is the smallest session timeout the server grants
	// (minSessionTimeout). Default 1s, so tests can use 1s sessions.
	MinSessionTimeout time.Duration
	// MaxSessionTimeout is the largest session timeout the server grants
	// (maxSessionTimeout). Default 60s.
	MaxSessionTimeout time.Duration
	// ForceSync makes the server fsync its transaction log before
	// acknowledging a write (forceSync=yes). Default false for fast tests;
	// benchmarks set it to measure realistic write latency.
	ForceSync bool
	// ContainerCheckInterval is how often the server deletes empty
	// container nodes and expired TTL nodes
	// (-Dznode.container.checkIntervalMs). Default 1s.
	ContainerCheckInterval time.Duration
	// StartTimeout bounds how long starting waits for the server to serve.
	// Default 30s.
	StartTimeout time.Duration
	// TLS, if set, makes the server also serve TLS clients on a second
	// loopback port (see Server.SecureAddr) with this certificate: it is
	// started with Netty (NettyServerCnxnFactory), a secureClientPort, and
	// the certificate as a PEM key store (ssl.keyStore.type=PEM). Clients
	// are not asked for certificates (ssl.clientAuth=none) unless
	// TLSClientCA is set. The plain port
	// keeps serving, so the four-letter words keep working. Standalone
	// servers only (StartServer). Make one with NewCA and CA.Issue.
	TLS *tls.Certificate
	// TLSClientCA, with TLS, makes the server require a client certificate
	// issued by this CA on its TLS port (ssl.clientAuth=need, the CA as a
	// PEM trust store).
	TLSClientCA *CA
	// Log, if set, also receives the server's output. The output always
	// goes to a log file in the server's directory too (see LogPath), whose
	// tail is included in start-up errors. Log must stay usable until the
	// server is stopped.
	Log io.Writer
}

const (
	defaultTickTime         = 200 * time.Millisecond
	defaultMinSession       = time.Second
	defaultMaxSession       = 60 * time.Second
	defaultContainerCheck   = time.Second
	defaultStartTimeout     = 30 * time.Second
	stopGrace               = 10 * time.Second
	pollInterval            = 50 * time.Millisecond
	fourLetterDialTimeout   = 2 * time.Second
	fourLetterReplyDeadline = 5 * time.Second
	pollReplyDeadline       = time.Second
	logTailLines            = 40
)

func (o Options) withDefaults() Options {
	if o.TickTime <= 0 {
		o.TickTime = defaultTickTime
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = defaultMinSession
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = defaultMaxSession
	}
	if o.MaxSessionTimeout < o.MinSessionTimeout {
		o.MaxSessionTimeout = o.MinSessionTimeout
	}
	if o.ContainerCheckInterval <= 0 {
		o.ContainerCheckInterval = defaultContainerCheck
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	return o
}

// Server is one real ZooKeeper server process (a JVM started through
// scripts/zk.sh run) listening on 127.0.0.1, with its own temporary
// directory holding its config, data and log. A Server may be stopped and
// started again any number of times; its data survives until Close.
type Server struct {
	opts    Options
	dir     string // temporary directory, removed by Close
	cfgPath string
	logPath string
	port    int
	// securePort is the TLS client port, 0 without Options.TLS.
	securePort int
	// quorum is true for ensemble members: Start then only waits for the
	// process to answer, since serving needs a quorum of peers.
	quorum bool

	mu     sync.Mutex // serializes Start/Stop/Kill/Close
	proc   *process   // nil while not running
	closed bool
}

// process is one run of the server's JVM.
type process struct {
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed once the process has exited
	err     error         // cmd.Wait's result, set before done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartServer starts a standalone ZooKeeper server on a free loopback port
// with a fresh temporary data directory, and waits until it serves
// requests. On failure the process is killed and the error includes the
// tail of the server log.
func StartServer(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s, err := newServer(opts, ports[0], 0, nil)
	if err != nil {
		return nil, err
	}
	if opts.TLS != nil {
		if err := s.enableTLS(ports[1]); err != nil {
			_ = os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if err := s.Start(); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// peer is one ensemble member's quorum ports.
type peer struct {
	id, peerPort, electionPort int
}

// newServer creates the server's directory and config without starting
// it. myid > 0 makes it a member of the ensemble described by peers.
func newServer(opts Options, port, myid int, peers []peer) (*Server, error) {
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	s := &Server{
		opts:    opts,
		dir:     dir,
		cfgPath: filepath.Join(dir, "zoo.cfg"),
		logPath: filepath.Join(dir, "zookeeper.log"),
		port:    port,
		quorum:  myid > 0,
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("zktest: %w", err)
	}
	if myid > 0 {
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(myid)+"\n"), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("zktest: %w", err)
		}
	}
	if err := os.WriteFile(s.cfgPath, []byte(config(opts, dataDir, port, peers)), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("zktest: %w", err)
	}
	return s, nil
}

// enableTLS writes the key store (and trust store) and adds the TLS settings to zoo.cfg:
// unknown keys of zoo.cfg become "zookeeper."-prefixed system properties,
// which is where the server reads serverCnxnFactory and ssl.* from.
func (s *Server) enableTLS(port int) error {
	ks := filepath.Join(s.dir, "tls", "keystore.pem")
	if err := writeKeyStore(ks, s.opts.TLS); err != nil {
		return err
	}
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	w("serverCnxnFactory", "org.apache.zookeeper.server.NettyServerCnxnFactory")
	w("secureClientPort", port)
	w("secureClientPortAddress", "127.0.0.1")
	w("ssl.keyStore.location", ks)
	w("ssl.keyStore.type", "PEM")
	if ca := s.opts.TLSClientCA; ca != nil {
		ts := filepath.Join(s.dir, "tls", "truststore.pem")
		if err := os.WriteFile(ts, ca.PEM(), 0o600); err != nil {
			return fmt.Errorf("zktest: %w", err)
		}
		w("ssl.trustStore.location", ts)
		w("ssl.trustStore.type", "PEM")
		w("ssl.clientAuth", "need")
	} else {
		w("ssl.clientAuth", "none")
	}
	f, err := os.OpenFile(s.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(b.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	s.securePort = port
	return nil
}

// config renders zoo.cfg.
func config(opts Options, dataDir string, port int, peers []peer) string {
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	tick := opts.TickTime.Milliseconds()
	if tick < 1 {
		tick = 1
	}
	w("tickTime", tick)
	w("dataDir", dataDir)
	w("clientPort", port)
	w("clientPortAddress", "127.0.0.1")
	w("maxClientCnxns", 0)
	w("admin.enableServer", "false")
	w("4lw.commands.whitelist", "*")
	w("minSessionTimeout", opts.MinSessionTimeout.Milliseconds())
	w("maxSessionTimeout", opts.MaxSessionTimeout.Milliseconds())
	if opts.ForceSync {
		w("forceSync", "yes")
	} else {
		w("forceSync", "no")
	}
	// Transaction log files are preallocated in steps of preAllocSize KB
	// (64 MB by default): keep test data directories small.
	w("preAllocSize", 4096)
	if len(peers) > 0 {
		// initLimit and syncLimit are in ticks: give followers a few
		// seconds to sync whatever the tick.
		w("initLimit", ticksFor(5*time.Second, opts.TickTime))
		w("syncLimit", ticksFor(2*time.Second, opts.TickTime))
		w("quorumListenOnAllIPs", "false")
		w("electionPortBindRetry", 10)
		if len(peers) == 1 {
			// A one-server ensemble still elects itself leader.
			w("standaloneEnabled", "false")
		}
		for _, p := range peers {
			w("server."+strconv.Itoa(p.id), fmt.Sprintf("127.0.0.1:%d:%d", p.peerPort, p.electionPort))
		}
	}
	return b.String()
}

func ticksFor(d, tick time.Duration) int {
	n := int((d + tick - 1) / tick)
	if n < 2 {
		n = 2
	}
	return n
}

// Addr returns the server's client address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// SecureAddr returns the server's TLS client address, "127.0.0.1:PORT",
// or "" for a server started without Options.TLS.
func (s *Server) SecureAddr() string {
	if s.securePort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.securePort))
}

// Port returns the server's client port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary directory (config, data and log).
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return s.logPath }

// PID returns the process id of the running server JVM, or 0 when the
// server is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server process is alive (it may not serve
// yet, or may have lost its quorum).
func (s *Server) Running() bool {
	return s.PID() != 0
}

// Start starts the server again on the same port with the same data
// directory, so data written before a Stop or Kill is kept, and waits
// until it answers. A standalone server is waited for until it serves
// requests; an ensemble member only until it answers ruok, because it
// serves once a quorum has formed (see Ensemble.WaitQuorum). Start on a
// running server does nothing.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("zktest: server is closed")
	}
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	s.reap()
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitReady(p, !s.quorum, time.Now().Add(s.opts.StartTimeout)); err != nil {
		s.killLocked()
		return err
	}
	return nil
}

// start launches the process without waiting for it to answer.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("zktest: server is closed")
	}
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	s.reap()
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// spawn execs `scripts/zk.sh run CONFIG DIR`; the script execs java, so
// the child's pid is the JVM's.
func (s *Server) spawn() (*process, error) {
	script, err := ScriptPath()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	fmt.Fprintf(logFile, "==== zktest: starting %s on %s at %s ====\n", s.cfgPath, s.Addr(), time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("bash", script, "run", s.cfgPath, s.dir)
	cmd.Env = append(os.Environ(),
		"ZK_CONTAINER_CHECK_MS="+strconv.FormatInt(s.opts.ContainerCheckInterval.Milliseconds(), 10),
	)
	// Whatever the script or the JVM prints ends up in the log file: the
	// script appends the server log to DIR/zookeeper.log itself, or writes
	// it to stdout when asked to so that it can also reach opts.Log.
	if s.opts.Log != nil {
		cmd.Env = append(cmd.Env, "ZK_LOG_STDOUT=1")
		w := io.MultiWriter(logFile, s.opts.Log)
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("zktest: starting %s: %w", script, err)
	}
	p := &process{cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = p.logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls until the server answers ruok (and, with serving, until
// srvr reports a mode, i.e. it serves requests).
func (s *Server) waitReady(p *process, serving bool, deadline time.Time) error {
	for {
		select {
		case <-p.done:
			return fmt.Errorf("zktest: ZooKeeper on %s exited during start-up (%v)%s", s.Addr(), p.err, s.logTail())
		default:
		}
		if s.answers(serving) {
			return nil
		}
		if time.Now().After(deadline) {
			what := "answer ruok"
			if serving {
				what = "serve requests"
			}
			return fmt.Errorf("zktest: ZooKeeper on %s did not %s within %v%s", s.Addr(), what, s.opts.StartTimeout, s.logTail())
		}
		time.Sleep(pollInterval)
	}
}

// answers reports whether the server answers ruok and, with serving,
// whether srvr reports a mode.
func (s *Server) answers(serving bool) bool {
	if r, err := fourLetter(s.Addr(), "ruok", pollReplyDeadline); err != nil || r != "imok" {
		return false
	}
	if !serving {
		return true
	}
	r, _ := fourLetter(s.Addr(), "srvr", pollReplyDeadline)
	return strings.Contains(r, "Mode: ")
}

// mode returns the Mode reported by srvr ("standalone", "leader",
// "follower", ...), or "" if the server does not serve.
func (s *Server) mode() string {
	r, _ := fourLetter(s.Addr(), "srvr", pollReplyDeadline)
	for _, line := range strings.Split(r, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// logTail returns the last lines of the server log, formatted for an
// error message.
func (s *Server) logTail() string {
	t := tailFile(s.logPath, logTailLines)
	if t == "" {
		return " (server log " + s.logPath + " is empty)"
	}
	return "\n--- last lines of " + s.logPath + " ---\n" + t
}

func tailFile(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(buf, off)
	buf = bytes.TrimRight(buf[:n], "\n")
	parts := bytes.Split(buf, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// Stop shuts the server down: SIGTERM, then SIGKILL if it has not exited
// after a grace period. It waits for the process to exit and keeps the
// data. Stop on a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	s.proc = nil
	return nil
}

// Kill kills the server process with SIGKILL at once (death without a
// clean shutdown) and waits for it to exit. The data written so far is
// kept. Kill on a stopped server does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	return nil
}

func (s *Server) killLocked() {
	p := s.proc
	if p == nil {
		return
	}
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	s.proc = nil
}

// reap forgets a process that exited on its own.
func (s *Server) reap() {
	if s.proc != nil && s.proc.exited() {
		s.proc = nil
	}
}

// Close stops the server and removes its temporary directory. It is
// idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.stopLocked()
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = fmt.Errorf("zktest: %w", rerr)
	}
	return err
}

// FourLetter sends a four-letter-word command (e.g. "ruok", "srvr", "mntr",
// "cons", "wchc") to the server and returns its reply.
func (s *Server) FourLetter(cmd string) (string, error) {
	return FourLetter(s.Addr(), cmd)
}

// FourLetter sends a four-letter-word command to the ZooKeeper server at
// addr and returns its reply.
func FourLetter(addr, cmd string) (string, error) {
	return fourLetter(addr, cmd, fourLetterReplyDeadline)
}

// fourLetter sends cmd and reads the reply until the server closes the
// connection or, for ruok, until "imok" has arrived: a server that is
// still starting may answer ruok without closing the connection. On a
// timeout it returns what arrived with the error.
func fourLetter(addr, cmd string, deadline time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, fourLetterDialTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(deadline)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	if cmd == "ruok" {
		b := make([]byte, 4)
		n, err := io.ReadFull(c, b)
		return string(b[:n]), err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// freePorts returns n distinct free loopback TCP ports. The listeners are
// all open at once, so the ports differ; they are closed before returning,
// so another process could take one in between, which is unlikely.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("zktest: picking a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ScriptPath returns the path of scripts/zk.sh: $ZKRECIPES_ZK_SH if set,
// else the repository's copy found next to this package's source, else
// the first scripts/zk.sh found walking up from the working directory.
func ScriptPath() (string, error) {
	if p := os.Getenv("ZKRECIPES_ZK_SH"); p != "" {
		return p, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "scripts", "zk.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, "scripts", "zk.sh")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("zktest: scripts/zk.sh not found (set ZKRECIPES_ZK_SH)")
}

// Installed reports whether ZooKeeper and java are available: nil if so,
// else an error telling how to install them.
func Installed() error {
	jar := os.Getenv("ZK_JAR")
	if jar == "" {
		jar = "/usr/share/java/zookeeper.jar"
	}
	if _, err := os.Stat(jar); err != nil {
		return fmt.Errorf("zktest: ZooKeeper is not installed (%s missing): run `scripts/zk.sh install` or `make test`", jar)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New("zktest: java is not installed: run `scripts/zk.sh install` or `make test`")
	}
	return nil
}
