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

	"github.com/zkrecipes/zkrecipes/zktest"
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

func TestProxyPartition(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())
	p := newProxy(t, s.Addr())
	c, events := zktest.ConnectWithEvents(t, 3*time.Second, p.Addr())
	path := zktest.UniquePath(t)
	createParents(t, c, path)

	p.Partition()
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
	p.Heal()
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
	s2 := startServer(t)
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
	p.Partition()
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

// armKinds are the request kinds TestProxyArm injects faults into. do
// makes the i-th call of the kind under base through the proxied
// connection; applied, for the kinds that change something, reports
// whether the server applied the i-th call (read on a direct connection).
var armKinds = []struct {
	op      zktest.Op
	prepare func(t *testing.T, direct *zk.Conn, base string)
	do      func(c *zk.Conn, base string, i int) error
	applied func(direct *zk.Conn, base string, i int) (bool, error)
}{
	{
		op: zktest.OpCreate,
		do: func(c *zk.Conn, base string, i int) error {
			_, err := c.Create(fmt.Sprintf("%s/n-%d", base, i), nil, 0, openACL)
			return err
		},
		applied: func(d *zk.Conn, base string, i int) (bool, error) {
			ok, _, err := d.Exists(fmt.Sprintf("%s/n-%d", base, i))
			return ok, err
		},
	},
	{
		op: zktest.OpDelete,
		prepare: func(t *testing.T, d *zk.Conn, base string) {
			for i := 1; i <= 3; i++ {
				mustCreate(t, d, fmt.Sprintf("%s/n-%d", base, i), nil)
			}
		},
		do: func(c *zk.Conn, base string, i int) error {
			return c.Delete(fmt.Sprintf("%s/n-%d", base, i), -1)
		},
		applied: func(d *zk.Conn, base string, i int) (bool, error) {
			ok, _, err := d.Exists(fmt.Sprintf("%s/n-%d", base, i))
			return !ok, err
		},
	},
	{
		op: zktest.OpSetData,
		prepare: func(t *testing.T, d *zk.Conn, base string) {
			for i := 1; i <= 3; i++ {
				mustCreate(t, d, fmt.Sprintf("%s/n-%d", base, i), nil)
			}
		},
		do: func(c *zk.Conn, base string, i int) error {
			_, err := c.Set(fmt.Sprintf("%s/n-%d", base, i), []byte("set"), -1)
			return err
		},
		applied: func(d *zk.Conn, base string, i int) (bool, error) {
			data, _, err := d.Get(fmt.Sprintf("%s/n-%d", base, i))
			return string(data) == "set", err
		},
	},
	{
		op: zktest.OpMulti,
		do: func(c *zk.Conn, base string, i int) error {
			_, err := c.Multi(
				&zk.CreateRequest{Path: fmt.Sprintf("%s/m-%d", base, i), Acl: openACL},
				&zk.CreateRequest{Path: fmt.Sprintf("%s/m-%d-bis", base, i), Acl: openACL},
			)
			return err
		},
		applied: func(d *zk.Conn, base string, i int) (bool, error) {
			ok, _, err := d.Exists(fmt.Sprintf("%s/m-%d-bis", base, i))
			return ok, err
		},
	},
	{
		op: zktest.OpGetChildren2,
		do: func(c *zk.Conn, base string, _ int) error {
			_, _, err := c.Children(base)
			return err
		},
	},
	{
		op: zktest.OpGetData,
		do: func(c *zk.Conn, base string, _ int) error {
			_, _, err := c.Get(base)
			return err
		},
	},
	{
		op: zktest.OpExists,
		do: func(c *zk.Conn, base string, _ int) error {
			_, _, err := c.Exists(base)
			return err
		},
	},
}

// TestProxyArm loses the reply to, or drops, the second request of each
// kind: that call alone fails with a connection error, the server applied
// it (lost reply) or never saw it (dropped request), requests of other
// kinds do not count, and the rule fires once.
func TestProxyArm(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())
	for _, f := range []zktest.Fault{zktest.LoseReply, zktest.DropRequest} {
		for _, k := range armKinds {
			t.Run(strings.ReplaceAll(f.String(), " ", "_")+"/"+k.op.String(), func(t *testing.T) {
				base := zktest.UniquePath(t)
				createParents(t, direct, base)
				mustCreate(t, direct, base, nil)
				if k.prepare != nil {
					k.prepare(t, direct, base)
				}
				p := newProxy(t, s.Addr())
				// Listed twice: go-zookeeper reconnects at once.
				c := zktest.Connect(t, p.Addr(), p.Addr())
				p.Arm(f, 2, k.op)
				// A request of another kind does not count.
				other := func() error { _, _, err := c.Exists(base); return err }
				if k.op == zktest.OpExists {
					other = func() error { _, _, err := c.Get(base); return err }
				}
				for i := 1; i <= 3; i++ {
					if err := other(); err != nil {
						t.Fatalf("request of another kind before call %d: %v", i, err)
					}
					err := k.do(c, base, i)
					if i != 2 {
						if err != nil {
							t.Fatalf("call %d of %v: %v", i, k.op, err)
						}
						continue
					}
					if !errors.Is(err, zk.ErrConnectionClosed) {
						t.Fatalf("call 2 of %v under %v = %v, want %v", k.op, f, err, zk.ErrConnectionClosed)
					}
					waitSession(t, c, 10*time.Second)
				}
				if k.applied != nil {
					// The third call was applied after the second: ZooKeeper
					// orders a session's requests.
					for i, want := range []bool{true, f == zktest.LoseReply, true} {
						got, err := k.applied(direct, base, i+1)
						if err != nil {
							t.Fatal(err)
						}
						if got != want {
							t.Errorf("call %d of %v applied = %v, want %v", i+1, k.op, got, want)
						}
					}
				}
				st := p.Stats()
				want := zktest.ProxyStats{Connections: 2, Requests: 6}
				if f == zktest.LoseReply {
					want.Cuts = 1
				} else {
					want.Dropped = 1
					want.Requests--
				}
				if k.op == zktest.OpCreate || k.op == zktest.OpMulti {
					want.Creates = want.Requests - 3
				}
				if st != want {
					t.Errorf("stats = %+v, want %+v", st, want)
				}
			})
		}
	}
}

// TestProxyArmPings: pings count only when asked for.
func TestProxyArmPings(t *testing.T) {
	s := zktest.Shared(t)
	p := newProxy(t, s.Addr())
	// A 1.5s session: go-zookeeper pings every 0.5s when idle.
	c, events := zktest.ConnectWithEvents(t, 1500*time.Millisecond, p.Addr(), p.Addr())
	p.Arm(zktest.DropRequest, 1)
	time.Sleep(1200 * time.Millisecond) // two pings or more
	if st := p.Stats(); st.Dropped != 0 || st.Connections != 1 {
		t.Fatalf("stats after idle pings = %+v, want nothing dropped", st)
	}
	if _, _, err := c.Exists("/"); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("first request after Arm(DropRequest, 1) = %v, want %v", err, zk.ErrConnectionClosed)
	}
	waitState(t, events, zk.StateDisconnected, 5*time.Second)
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	p.Arm(zktest.DropRequest, 1, zktest.OpPing)
	waitState(t, events, zk.StateDisconnected, 5*time.Second)
	waitState(t, events, zk.StateHasSession, 10*time.Second)
	if st := p.Stats(); st.Dropped != 2 {
		t.Fatalf("stats = %+v, want 2 dropped (a request, a ping)", st)
	}
}

// TestProxyRecord: the proxy records each request's kind in order, on the
// connection it came by, with what it did to it.
func TestProxyRecord(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())
	base := zktest.UniquePath(t)
	createParents(t, direct, base)
	p := newProxy(t, s.Addr())
	c := zktest.Connect(t, p.Addr(), p.Addr())
	p.Record()
	mustCreate(t, c, base, nil)
	steps := []func() error{
		func() error { _, _, err := c.Get(base); return err },
		func() error { _, _, err := c.Children(base); return err },
		func() error { _, _, err := c.Exists(base); return err },
		func() error { _, err := c.Set(base, []byte("x"), -1); return err },
		func() error { _, err := c.Multi(&zk.CheckVersionRequest{Path: base, Version: -1}); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	p.Arm(zktest.LoseReply, 1, zktest.OpDelete)
	if err := c.Delete(base, -1); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("delete with its reply lost = %v", err)
	}
	waitSession(t, c, 10*time.Second)
	if _, _, err := c.Exists(base); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Recorded() {
		if r.Op == zktest.OpPing {
			continue
		}
		s := fmt.Sprintf("%d:%v", r.Conn, r.Op)
		if r.Fault != 0 {
			s += "(" + r.Fault.String() + ")"
		}
		got = append(got, s)
	}
	want := "[1:create 1:getData 1:getChildren2 1:exists 1:setData 1:multi 1:delete(lose reply) 2:exists]"
	if fmt.Sprint(got) != want {
		t.Fatalf("recorded %v\nwant     %s", got, want)
	}
	if r := p.Recorded(); len(r) != 0 {
		t.Fatalf("Recorded stops recording, yet a second call returned %v", r)
	}
}

// TestProxyPartitionOneWay black-holes one direction at a time while the
// connection stays up.
func TestProxyPartitionOneWay(t *testing.T) {
	s := zktest.Shared(t)
	direct := zktest.Connect(t, s.Addr())

	t.Run("client->server", func(t *testing.T) {
		base := zktest.UniquePath(t)
		createParents(t, direct, base)
		mustCreate(t, direct, base, nil)
		p := newProxy(t, s.Addr())
		c, events := zktest.ConnectWithEvents(t, 3*time.Second, p.Addr(), p.Addr())
		_, _, watch, err := c.GetW(base)
		if err != nil {
			t.Fatal(err)
		}
		p.PartitionOneWay(zktest.ClientToServer)
		res := make(chan error, 1)
		go func() {
			_, err := c.Create(base+"/lost", nil, 0, openACL)
			res <- err
		}()
		// The server's notifications still get through...
		if _, err := direct.Set(base, []byte("changed"), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-watch:
			if ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("watch event %+v, want a data change", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event through a client->server partition")
		}
		// ...but no request reaches the server.
		select {
		case err := <-res:
			t.Fatalf("create through a client->server partition returned: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if ok, _, err := direct.Exists(base + "/lost"); err != nil || ok {
			t.Fatalf("create reached the server: exists = %v, %v", ok, err)
		}
		// The client gives up on the silent connection by itself.
		waitState(t, events, zk.StateDisconnected, 10*time.Second)
		if err := <-res; err == nil {
			t.Fatal("create through a client->server partition succeeded")
		}
		p.Heal()
		waitSession(t, c, 15*time.Second)
		mustCreate(t, c, base+"/after", nil)
	})

	t.Run("server->client", func(t *testing.T) {
		base := zktest.UniquePath(t)
		createParents(t, direct, base)
		mustCreate(t, direct, base, nil)
		p := newProxy(t, s.Addr())
		c, events := zktest.ConnectWithEvents(t, 3*time.Second, p.Addr(), p.Addr())
		session := c.SessionID()
		p.PartitionOneWay(zktest.ServerToClient)
		res := make(chan error, 1)
		go func() {
			_, err := c.Create(base+"/applied", nil, 0, openACL)
			res <- err
		}()
		// The request reaches the server and is applied...
		deadline := time.Now().Add(5 * time.Second)
		for {
			ok, _, err := direct.Exists(base + "/applied")
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("create through a server->client partition never reached the server")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// ...but its reply never comes back.
		select {
		case err := <-res:
			t.Fatalf("create through a server->client partition returned: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		waitState(t, events, zk.StateDisconnected, 10*time.Second)
		if err := <-res; err == nil {
			t.Fatal("create through a server->client partition saw its reply")
		}
		p.Heal()
		waitSession(t, c, 15*time.Second)
		if c.SessionID() != session {
			t.Fatalf("session changed: %#x -> %#x (the server heard the client throughout)", session, c.SessionID())
		}
		if ok, _, err := c.Exists(base + "/applied"); err != nil || !ok {
			t.Fatalf("own session after the partition: exists = %v, %v", ok, err)
		}
	})

	// Raw connections: the request side decides whether the server
	// answers; the connection stays open either way.
	for _, d := range []zktest.Direction{zktest.ClientToServer, zktest.ServerToClient} {
		t.Run("raw "+d.String(), func(t *testing.T) {
			p := newProxy(t, s.Addr())
			p.PartitionOneWay(d)
			raw, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := io.WriteString(raw, "ruok"); err != nil {
				t.Fatal(err)
			}
			// The server answers and closes (server->client), or never
			// hears (client->server): either way the client sees nothing,
			// not even the close.
			_ = raw.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			var ne net.Error
			if n, err := raw.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read through a %v partition = %d, %v; want a timeout", d, n, err)
			}
			p.Heal()
			_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := raw.Read(make([]byte, 8)); err != io.EOF {
				t.Fatalf("connection after the partition healed: %v, want EOF", err)
			}
		})
	}
}
