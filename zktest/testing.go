package zktest

import (
	"crypto/rand"
	"encoding/hex"
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

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Shared returns the test binary's shared standalone server, starting it
// on first use. Tests that need a server of their own (to stop, kill or
// configure it) use StartServer instead.
//
// Under -short it skips the test: real ZooKeeper tests do not run in short
// mode. If ZooKeeper is not installed the test fails (rather than being
// skipped) with a message telling to run `scripts/zk.sh install` or
// `make test`. Use Main in TestMain so the server is stopped at the end.
func Shared(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("zktest: real ZooKeeper tests skipped under -short")
	}
	srv, err := SharedServer()
	if err != nil {
		t.Fatalf("zktest: shared server: %v", err)
	}
	return srv
}

// SharedServer is Shared for code without a testing.TB, such as Example
// functions: it returns the shared server, starting it on first use.
func SharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		if err := Installed(); err != nil {
			shared.err = err
		} else {
			shared.srv, shared.err = StartServer(Options{})
		}
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
