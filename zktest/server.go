package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	stopGrace               = 10 * time.Second
	pollInterval            = 50 * time.Millisecond
	fourLetterDialTimeout   = 2 * time.Second
	fourLetterReplyDeadline = 5 * time.Second
	pollReplyDeadline       = time.Second
	logTailLines            = 40
)

// Server is one real ZooKeeper server: a JVM of its own, listening on
// 127.0.0.1 with its config, data and log in a temporary directory, or
// the external server named by ZKTEST_ADDR. A Server of its own may be
// stopped, killed, frozen and restarted any number of times; its data
// survives until Close.
type Server struct {
	set      settings
	external string // ZKTEST_ADDR's server; "" for a process of ours
	inst     installation
	dir      string // temporary directory, removed by Close
	cfgPath  string
	logPath  string
	port     int
	// securePort is the TLS client port, 0 without WithTLS.
	securePort int
	// quorum is true for ensemble members: starting then only waits for
	// the process to answer, since serving needs a quorum of peers.
	quorum bool

	mu     sync.Mutex // serializes Restart/Stop/Kill/Freeze/Thaw/Close
	proc   *process   // nil while not running
	frozen bool       // SIGSTOPped by Freeze
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

// NewServer starts a standalone ZooKeeper server of its own, for programs
// and TestMain functions that have no testing.TB; tests use Start. It
// listens on a free port of 127.0.0.1 (or WithPort's) with a fresh
// temporary directory and returns once the server serves requests; the
// caller must Close it. ZKTEST_ADDR does not apply. Where ZooKeeper comes
// from is described at Start; without one the error wraps
// ErrNotInstalled. On a start-up failure the process is killed and the
// error carries the last lines of the server's log.
func NewServer(opts ...Option) (*Server, error) {
	return startServer(newSettings(opts))
}

// startServer is NewServer with its options applied.
func startServer(set settings) (*Server, error) {
	if err := set.check(false); err != nil {
		return nil, err
	}
	inst, err := host.locate(set.classPath)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	if set.port != 0 {
		port = set.port
	}
	s, err := newServer(set, inst, port, 0, nil)
	if err != nil {
		return nil, err
	}
	if set.tls != nil {
		if err := s.enableTLS(ports[1]); err != nil {
			_ = os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if err := s.Restart(); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// externalServer is the server ZKTEST_ADDR names, or nil. Options that
// configure a server process cannot apply to it: that is an error.
func externalServer(set settings) (*Server, error) {
	addr := strings.TrimSpace(os.Getenv(EnvAddr))
	if addr == "" {
		return nil, nil
	}
	if len(set.own) > 0 {
		return nil, fmt.Errorf("zktest: %s needs a server of its own, but %s=%s names an external one (unset it to start servers here)", set.own[0], EnvAddr, addr)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("zktest: %s=%q: %w", EnvAddr, addr, err)
	}
	return &Server{set: set, external: addr}, nil
}

// peer is one ensemble member's quorum ports.
type peer struct {
	id, peerPort, electionPort int
}

// newServer creates the server's directory and config without starting
// it. myid > 0 makes it a member of the ensemble described by peers.
func newServer(set settings, inst installation, port, myid int, peers []peer) (*Server, error) {
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	s := &Server{
		set:     set,
		inst:    inst,
		dir:     dir,
		cfgPath: filepath.Join(dir, "zoo.cfg"),
		logPath: filepath.Join(dir, "zookeeper.log"),
		port:    port,
		quorum:  myid > 0,
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("zktest: %w", err)
	}
	files := map[string]string{
		"zoo.cfg": config(set, filepath.Join(dir, "data"), port, peers),
		// The server logs through slf4j: with log4j 1.2 behind it
		// (Debian) this file, first on the class path, sends the log to
		// the console, which the kit writes to zookeeper.log.
		"log4j.properties": log4jConfig,
	}
	if myid > 0 {
		files["data/myid"] = strconv.Itoa(myid) + "\n"
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		err = os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("zktest: %w", err)
		}
	}
	return s, nil
}

const log4jConfig = `log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
`

// enableTLS writes the key store (and trust store) and adds the TLS settings to zoo.cfg:
// unknown keys of zoo.cfg become "zookeeper."-prefixed system properties,
// which is where the server reads serverCnxnFactory and ssl.* from.
func (s *Server) enableTLS(port int) error {
	ks := filepath.Join(s.dir, "tls", "keystore.pem")
	if err := writeKeyStore(ks, s.set.tls); err != nil {
		return err
	}
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	w("serverCnxnFactory", "org.apache.zookeeper.server.NettyServerCnxnFactory")
	w("secureClientPort", port)
	w("secureClientPortAddress", "127.0.0.1")
	w("ssl.keyStore.location", ks)
	w("ssl.keyStore.type", "PEM")
	if ca := s.set.tlsClientCA; ca != nil {
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
func config(set settings, dataDir string, port int, peers []peer) string {
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	w("tickTime", max(set.tickTime.Milliseconds(), 1))
	w("dataDir", dataDir)
	w("clientPort", port)
	w("clientPortAddress", "127.0.0.1")
	w("maxClientCnxns", 0)
	w("admin.enableServer", "false")
	w("4lw.commands.whitelist", "*")
	w("minSessionTimeout", set.minSession.Milliseconds())
	w("maxSessionTimeout", set.maxSession.Milliseconds())
	if set.forceSync {
		w("forceSync", "yes")
	} else {
		w("forceSync", "no")
	}
	// Transaction log files are preallocated in steps of preAllocSize KB
	// (64 MB by default): keep test data directories small.
	w("preAllocSize", 4096)
	// TTL nodes (zookeeper.extendedTypesEnabled).
	w("extendedTypesEnabled", "true")
	if len(peers) > 0 {
		// initLimit and syncLimit are in ticks: give followers a few
		// seconds to sync whatever the tick.
		w("initLimit", ticksFor(5*time.Second, set.tickTime))
		w("syncLimit", ticksFor(2*time.Second, set.tickTime))
		w("quorumListenOnAllIPs", "false")
		// Every member has its own view of the others' addresses
		// (peers.go): none may adopt another's.
		w("reconfigEnabled", "false")
		w("electionPortBindRetry", 10)
		if len(peers) == 1 {
			// A one-server ensemble still elects itself leader.
			w("standaloneEnabled", "false")
		}
		for _, p := range peers {
			w("server."+strconv.Itoa(p.id), fmt.Sprintf("127.0.0.1:%d:%d", p.peerPort, p.electionPort))
		}
	}
	for _, kv := range set.config {
		w(kv[0], kv[1])
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

// Addr returns the server's client address, "127.0.0.1:PORT" (or
// ZKTEST_ADDR's).
func (s *Server) Addr() string {
	if s.external != "" {
		return s.external
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// SecureAddr returns the server's TLS client address, "127.0.0.1:PORT",
// or "" for a server started without WithTLS.
func (s *Server) SecureAddr() string {
	if s.securePort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.securePort))
}

// Port returns the server's client port, or 0 for an external server.
func (s *Server) Port() int { return s.port }

// External reports whether the server is the one ZKTEST_ADDR names, which
// the kit cannot stop, kill or freeze.
func (s *Server) External() bool { return s.external != "" }

// Dir returns the server's temporary directory (config, data and log), or
// "" for an external server.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file, or "" for an
// external server.
func (s *Server) LogPath() string { return s.logPath }

// PID returns the process id of the running server JVM, or 0 when the
// server is not running or is external.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server process is alive (it may not serve
// yet, may be frozen, or may have lost its quorum).
func (s *Server) Running() bool {
	return s.PID() != 0
}

// Restart starts the server again on the same port with the same data
// directory, so what was written before a Stop or Kill is kept, and waits
// until it answers; a running server is stopped first (cleanly), a frozen
// one killed. A standalone server is waited for until it serves
// requests; an ensemble member only until it answers ruok, because it
// serves once a quorum has formed (see Ensemble.WaitQuorum). On failure
// the new process is killed and the error carries the log's last lines.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.stopLocked(); err != nil {
		return err
	}
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitReady(p, !s.quorum, time.Now().Add(s.set.startTimeout)); err != nil {
		s.killLocked()
		return err
	}
	return nil
}

// launch starts the process of a stopped server without waiting for it
// to answer (ensembles start their members at once).
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// usable rejects calls on an external or closed server.
func (s *Server) usable() error {
	if s.external != "" {
		return ErrExternal
	}
	if s.closed {
		return errors.New("zktest: server is closed")
	}
	return nil
}

// jvmArgs are the server JVM's options: a small heap and a JIT tuned for
// a quick start.
func (s *Server) jvmArgs() []string {
	args := []string{
		"-Xms64m", "-Xmx256m",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1",
		"-XX:-UsePerfData",
		"-Xshare:auto",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.log.dir=" + s.dir,
		"-Dzookeeper.root.logger=INFO,CONSOLE",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dznode.container.checkIntervalMs=" + strconv.FormatInt(s.set.containerCheck.Milliseconds(), 10),
	}
	args = append(args, s.set.jvmArgs...)
	cp := append([]string{s.dir}, s.inst.classPath...)
	return append(args, "-cp", strings.Join(cp, string(filepath.ListSeparator)),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath)
}

// spawn runs java with the server's class path and config: no script or
// file outside the server's own directory is needed, so the kit works
// from a read-only module cache.
func (s *Server) spawn() (*process, error) {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	fmt.Fprintf(logFile, "==== zktest: starting %s on %s at %s (ZooKeeper from %s) ====\n",
		s.cfgPath, s.Addr(), time.Now().Format(time.RFC3339Nano), s.inst.from)
	cmd := exec.Command(s.inst.java, s.jvmArgs()...)
	cmd.Dir = s.dir
	if s.set.log != nil {
		w := io.MultiWriter(logFile, s.set.log)
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("zktest: starting %s: %w", s.inst.java, err)
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
			return fmt.Errorf("zktest: ZooKeeper on %s did not %s within %v%s", s.Addr(), what, s.set.startTimeout, s.logTail())
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
	if s.external != "" {
		return ErrExternal
	}
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	if !p.exited() {
		if s.frozen {
			// A stopped JVM cannot shut down cleanly.
			s.killLocked()
			return nil
		}
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
	if s.external != "" {
		return ErrExternal
	}
	s.killLocked()
	return nil
}

func (s *Server) killLocked() {
	p := s.proc
	s.proc, s.frozen = nil, false
	if p == nil {
		return
	}
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Freeze stops the server process with SIGSTOP, as a paused or swapped
// out machine would stop, and (on Linux) returns once every thread of it
// has stopped: its connections stay open, nothing is answered,
// no session expires on it (its clock stops too) and its peers in an
// ensemble see it silent. Thaw resumes it. Restart, Stop, Kill and Close
// on a frozen server kill it.
func (s *Server) Freeze() error {
	return s.signal(syscall.SIGSTOP, true)
}

// Frozen reports whether the server is stopped by Freeze.
func (s *Server) Frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen && s.proc != nil && !s.proc.exited()
}

// Thaw resumes a server stopped by Freeze (SIGCONT). On a server that is
// not frozen it does nothing.
func (s *Server) Thaw() error {
	return s.signal(syscall.SIGCONT, false)
}

func (s *Server) signal(sig syscall.Signal, frozen bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.frozen == frozen {
		return nil
	}
	if s.proc == nil || s.proc.exited() {
		return errors.New("zktest: server is not running")
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("zktest: %v: %w", sig, err)
	}
	if frozen {
		if err := waitStopped(s.proc.cmd.Process.Pid, 5*time.Second); err != nil {
			return err
		}
	}
	s.frozen = frozen
	return nil
}

// Close stops the server and removes its temporary directory. It is
// idempotent. On an external server it does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.external != "" {
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
