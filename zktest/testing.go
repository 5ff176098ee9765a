package zktest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// DefaultSessionTimeout is the session timeout Connect asks for.
const DefaultSessionTimeout = 10 * time.Second

const (
	connectWait = 15 * time.Second // bound on waiting for a session
	closeWait   = 10 * time.Second // bound on a closed conn's goroutines ending
	eventBuffer = 1024
)

// Start starts a real standalone ZooKeeper server for the test and
// returns it; t.Cleanup stops it and removes its data. It listens on a
// free port of 127.0.0.1 (see Server.Addr), keeps its config, data and
// log in a temporary directory, and is tuned for tests (see the options
// for the defaults: no fsync, 200ms ticks, sessions from 1s, container
// and TTL checks every second, TTL nodes on). It returns once the server
// serves requests; a server takes about a second to start (see
// docs/testing.md for figures), so a package of tests usually shares one
// (Shared).
//
// ZooKeeper is found in this order: WithClassPath; ZOOKEEPER_HOME, an
// unpacked Apache ZooKeeper release (its lib/*.jar); Debian's zookeeper
// package (/usr/share/java/zookeeper.jar). Java is $JAVA_HOME/bin/java,
// else java on PATH. The kit runs java itself and writes only in its
// temporary directories, so it works from a read-only module cache.
//
// When ZKTEST_ADDR names a running server ("host:port"), Start returns
// that server instead of starting one, for machines without Java; the
// fault helpers then come from Proxy alone, and options that configure a
// server process end the test with an error.
//
// When no ZooKeeper installation is found the test is skipped with a
// message saying what to install, or fails with that message when
// ZKTEST_REQUIRED=1. Under go test -short the test is skipped.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	skipShort(t)
	s, err := startFor(newSettings(opts))
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("zktest: closing the server on %s: %v", s.Addr(), err)
		}
	})
	return s
}

// startFor returns ZKTEST_ADDR's server, or starts one with set.
func startFor(set settings) (*Server, error) {
	ext, err := externalServer(set)
	if err != nil || ext != nil {
		return ext, err
	}
	return startServer(set)
}

// skipShort skips the test under go test -short: real ZooKeeper tests do
// not run in short mode.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("zktest: real ZooKeeper tests are skipped under -short")
	}
}

// unavailable ends the test on a failure to get a server: a skip when no
// installation was found (a failure under ZKTEST_REQUIRED=1), else a
// failure.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && !required() {
		t.Skip(err)
	}
	t.Fatal(err)
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Shared returns one server shared by every test of the test binary (the
// package), started on first use with the default settings, so that a
// package of tests pays for one server start. Each test works under a
// root path of its own (UniquePath) and must not stop, freeze or
// reconfigure the shared server: tests that do start their own with
// Start. It skips or fails as Start does, and honours ZKTEST_ADDR. Call
// Main (or Run) from TestMain to stop the server when the tests end.
func Shared(t testing.TB) *Server {
	t.Helper()
	skipShort(t)
	srv, err := SharedServer()
	if err != nil {
		unavailable(t, err)
	}
	return srv
}

// SharedServer is Shared for code without a testing.TB, such as Example
// functions: it returns the shared server, starting it on first use.
func SharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = startFor(newSettings(nil))
	}
	return shared.srv, shared.err
}

// CloseShared stops the shared server, if one was started, and removes
// its directory. A later Shared starts a new one.
func CloseShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	s := shared.srv
	shared.srv, shared.err = nil, nil
	if s == nil {
		return nil
	}
	return s.Close()
}

// Proxy starts a fault-injecting proxy in front of the server (see
// Proxy) and closes it when the test ends. Clients connected to its Addr
// reach the server through it.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	p, err := NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Run runs the tests and then closes the shared server, and returns the
// exit code. It is Main without the exit, for a TestMain that checks more
// (e.g. goroutine leaks) after the servers are gone.
//
// Under -short, unless -run was given, only tests run: Example functions
// print what a live server answers, and -short runs without one.
func Run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = f.Value.Set("^Test")
		}
	}
	code := m.Run()
	if err := CloseShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Main is for TestMain: it runs the tests, closes the shared server and
// exits with the tests' code.
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Connect opens a raw go-zookeeper connection to addrs for assertions,
// with DefaultSessionTimeout, waits (bounded) until it has a session, and
// closes it when the test ends. Its log output is discarded.
func Connect(t testing.TB, addrs ...string) *zk.Conn {
	t.Helper()
	c, _ := ConnectWithEvents(t, DefaultSessionTimeout, addrs...)
	return c
}

// ConnectWithEvents is Connect with a chosen session timeout that also
// returns the connection's session events from the first StateHasSession
// on. The channel is buffered (events beyond its capacity are dropped) and
// closed once the connection has shut down.
func ConnectWithEvents(t testing.TB, sessionTimeout time.Duration, addrs ...string) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	if len(addrs) == 0 {
		t.Fatal("zktest: Connect without addresses")
	}
	conn, ec, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zktest: connect %v: %v", addrs, err)
	}
	events := make(chan zk.Event, eventBuffer)
	session := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		has := false
		for ev := range ec {
			if !has {
				if ev.Type != zk.EventSession || ev.State != zk.StateHasSession {
					continue
				}
				has = true
				close(session)
			}
			select {
			case events <- ev:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		// The event channel closes when the connection's goroutines end.
		select {
		case <-done:
		case <-time.After(closeWait):
			t.Errorf("zktest: connection to %v did not shut down within %v", addrs, closeWait)
		}
	})
	select {
	case <-session:
	case <-done:
		t.Fatalf("zktest: connection to %v closed before it had a session", addrs)
	case <-time.After(connectWait):
		t.Fatalf("zktest: no session with %v within %v", addrs, connectWait)
	}
	return conn, events
}

// nopLogger discards go-zookeeper's log output.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// UniquePath returns a znode path unique to this call,
// "/zktest/<test name>-<random hex>". The path and its parent /zktest
// may not exist.
func UniquePath(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("zktest: %v", err)
	}
	return "/zktest/" + sanitize(t.Name()) + "-" + hex.EncodeToString(b[:])
}

// sanitize keeps letters, digits, '_', '-' and '.'; anything else (such
// as the '/' of subtests) becomes '_'.
func sanitize(name string) string {
	const max = 100
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= max {
			break
		}
	}
	s := b.String()
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}
