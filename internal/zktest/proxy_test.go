package zktest_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zktest"
)

func newProxy(t *testing.T, target string) *zktest.Proxy {
	t.Helper()
	p, err := zktest.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before any Connect, so it runs after the connections are
	// closed.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// waitState waits for a session event with the given state.
func waitState(t *testing.T, events <-chan zk.Event, want zk.State, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event channel closed while waiting for %v", want)
			}
			if ev.Type == zk.EventSession && ev.State == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event within %v", want, within)
		}
	}
}

// waitSession waits until the connection has a session again.
func waitSession(t *testing.T, c *zk.Conn, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no session within %v (state %v)", within, c.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyPassesTraffic(t *testing.T) {
	s := zktest.Shared(t)
	p := newProxy(t, s.Addr())
	c := zktest.Connect(t, p.Addr())
	path := zktest.UniquePath(t)
	createParents(t, c, path)
	mustCreate(t, c, path, []byte("via proxy"))
	if _, err := c.CreateContainer(path+"-c", nil, zk.FlagContainer, openACL); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Get(path); err != nil || string(got) != "via proxy" {
		t.Fatalf("get = %q, %v", got, err)
	}
	// Four-letter words pass through too.
	if r, err := zktest.FourLetter(p.Addr(), "ruok"); err != nil || r != "imok" {
		t.Fatalf("ruok via proxy = %q, %v", r, err)
	}
	st := p.Stats()
	// createParents issued one create for /zktest (maybe NodeExists).
	if st.Connections != 2 || st.Creates < 2 || st.Creates > 3 || st.Cuts != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestProxyCutAfterCreates(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())
	base := zktest.UniquePath(t)
	createParents(t, direct, base)
	mustCreate(t, direct, base, nil)

	p := newProxy(t, s.Addr())
	c := zktest.Connect(t, p.Addr())
	p.CutAfterCreates(3)
	var failed []int
	for i := 1; i <= 6; i++ {
		waitSession(t, c, 10*time.Second)
		_, err := c.Create(fmt.Sprintf("%s/n-%d", base, i), nil, 0, openACL)
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrConnectionClosed):
			failed = append(failed, i)
		default:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if fmt.Sprint(failed) != "[3 6]" {
		t.Fatalf("creates that saw a connection error = %v, want [3 6]", failed)
	}
	// The server applied every create, including the two whose reply was
	// lost. Another session may see the last one a moment after the
	// client saw its error: ZooKeeper orders requests per session only.
	cut := time.Now()
	for {
		children, _, err := direct.Children(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(children) == 6 {
			t.Logf("all 6 nodes visible to another session %v after the last cut", time.Since(cut).Round(time.Microsecond))
			break
		}
		if time.Since(cut) > 5*time.Second {
			t.Fatalf("children of %s = %v, want n-1..n-6", base, children)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Disabled: creates go through.
	p.CutAfterCreates(0)
	waitSession(t, c, 10*time.Second)
	for _, i := range failed {
		if ok, _, err := c.Exists(fmt.Sprintf("%s/n-%d", base, i)); err != nil || !ok {
			t.Fatalf("own session after reconnecting: exists n-%d = %v, %v", i, ok, err)
		}
	}
	st := p.Stats()
	if st.Creates != 6 || st.Cuts != 2 || st.Connections != 3 {
		t.Fatalf("stats = %+v, want 6 creates, 2 cuts, 3 connections", st)
	}
	for i := 7; i <= 9; i++ {
		if _, err := c.Create(fmt.Sprintf("%s/n-%d", base, i), nil, 0, openACL); err != nil {
			t.Fatalf("create %d with cutting disabled: %v", i, err)
		}
	}
}

func TestProxyBlackhole(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())
	p := newProxy(t, s.Addr())
	c, events := zktest.ConnectWithEvents(t, 3*time.Second, p.Addr())
	path := zktest.UniquePath(t)
	createParents(t, c, path)

	p.Blackhole(true)
	res := make(chan error, 1)
	go func() {
		_, err := c.Create(path, nil, 0, openACL)
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("create through a black hole completed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The client gives up on the silent connection after 2/3 of the
	// session timeout.
	waitState(t, events, zk.StateDisconnected, 10*time.Second)
	if err := <-res; err == nil {
		t.Fatal("create through a black hole succeeded")
	}
	if ok, _, err := direct.Exists(path); err != nil || ok {
		t.Fatalf("black-holed create reached the server: exists = %v, %v", ok, err)
	}

	// New connections are accepted and held, but nothing comes back.
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "ruok"); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if n, err := raw.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read through a black hole = %d, %v; want a timeout", n, err)
	}

	// Lifting the black hole closes the held connections and lets the
	// client in again (with a new session if the old one expired).
	p.Blackhole(false)
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("held connection after the black hole: %v, want EOF", err)
	}
	waitSession(t, c, 15*time.Second)
	mustCreate(t, c, path, nil)
}

func TestProxyDropAll(t *testing.T) {
	s := zktest.Shared(t)
	p := newProxy(t, s.Addr())
	c, events := zktest.ConnectWithEvents(t, 10*time.Second, p.Addr())
	session := c.SessionID()
	p.DropAll()
	waitState(t, events, zk.StateDisconnected, 5*time.Second)
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	if c.SessionID() != session {
		t.Fatalf("session changed across a dropped connection: %x -> %x", session, c.SessionID())
	}
	if _, _, err := c.Exists("/"); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Connections != 2 {
		t.Fatalf("stats = %+v, want 2 connections", st)
	}
}

func TestProxyRetarget(t *testing.T) {
	s1 := zktest.Shared(t)
	s2 := startServer(t, zktest.Options{})
	p := newProxy(t, s1.Addr())
	port := func() string {
		t.Helper()
		r, err := zktest.FourLetter(p.Addr(), "conf")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(r, "\n") {
			if v, ok := strings.CutPrefix(line, "clientPort="); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("conf via proxy has no clientPort: %q", r)
		return ""
	}
	if got, want := port(), fmt.Sprint(s1.Port()); got != want {
		t.Fatalf("proxy reaches port %s, want %s", got, want)
	}
	p.Retarget(s2.Addr())
	if got, want := port(), fmt.Sprint(s2.Port()); got != want {
		t.Fatalf("after Retarget proxy reaches port %s, want %s", got, want)
	}
}

func TestProxyCloseEndsEverything(t *testing.T) {
	s := zktest.Shared(t)
	p, err := zktest.NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// Hold a session, a raw connection and a black-holed connection open.
	c := zktest.Connect(t, p.Addr())
	if _, _, err := c.Exists("/"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("proxy Close did not return")
	}
	if err := p.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("closed proxy still accepts connections")
	}
}
