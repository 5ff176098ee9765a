package simzk_test

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
	"github.com/zkrecipes/zkrecipes/recipe/internal/simzk"
)

// rawConnect dials the World from a new host and sends a connect request.
func rawConnect(t *testing.T, w *simzk.World, req jute.ConnectRequest) (jute.ConnectResponse, []byte, error) {
	t.Helper()
	c, err := w.NewHost("raw").Dial("tcp", "simzk:2181", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, at := jute.BeginFrame(nil)
	if _, err := c.Write(jute.EndFrame(req.Append(b), at)); err != nil {
		t.Fatal(err)
	}
	body, err := jute.ReadFrame(c, nil, jute.MaxBuffer)
	if err != nil {
		return jute.ConnectResponse{}, nil, err
	}
	var resp jute.ConnectResponse
	r := jute.NewReader(body)
	resp.Read(r)
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	// What follows the response: nothing, then the end or a deadline.
	c.SetReadDeadline(time.Now().Add(time.Second))
	rest, err := io.ReadAll(c)
	return resp, rest, err
}

func TestConnectResponses(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		resp, _, err := rawConnect(t, w, jute.ConnectRequest{Timeout: 4000})
		if resp.SessionID == 0 || resp.Timeout != 4000 || len(resp.Passwd) != 16 {
			t.Errorf("new session: %+v", resp)
		}
		if err == nil {
			t.Error("the server closed a connection with a live session")
		}
		// Resumed, with the password; refused without it.
		again, _, _ := rawConnect(t, w, jute.ConnectRequest{SessionID: resp.SessionID, Passwd: resp.Passwd, Timeout: 4000})
		if again.SessionID != resp.SessionID {
			t.Errorf("resumed: %+v", again)
		}
		wrong, _, _ := rawConnect(t, w, jute.ConnectRequest{SessionID: resp.SessionID, Passwd: make([]byte, 16)})
		if wrong.SessionID != 0 {
			t.Errorf("a wrong password resumed the session: %+v", wrong)
		}
		// An expired session: session id 0, then the server closes the
		// connection (go-zookeeper leaves it open otherwise).
		w.Expire(resp.SessionID)
		exp, rest, err := rawConnect(t, w, jute.ConnectRequest{SessionID: resp.SessionID, Passwd: resp.Passwd})
		if exp.SessionID != 0 || exp.Timeout != 0 || len(rest) != 0 || err != nil {
			t.Errorf("expired: %+v, then %x and %v; want the end of the stream", exp, rest, err)
		}
	})
}

func TestRestartKeepsState(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		a, ra := client(w)
		must(a.Create("/e", nil, zk.FlagEphemeral, acl))
		sid := a.SessionID()
		w.Restart(time.Second) // shorter than the session: it lives
		time.Sleep(2 * time.Second)
		awaitSession(a, ra)
		if a.SessionID() != sid || w.Snapshot()["/e"].EphemeralOwner != sid {
			t.Errorf("session %#x after the restart, node %+v; want %#x kept", a.SessionID(), w.Snapshot()["/e"], sid)
		}
		if slices.Contains(states(ra), zk.StateExpired) {
			t.Errorf("events %v", states(ra))
		}
	})
}

func TestOneWayPartitions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up, down bool
	}{{"requests held", true, false}, {"replies held", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			sim(t, func(t *testing.T, w *simzk.World) {
				a, _, ah := clientOn(w)
				start := time.Now()
				ah.Partition(300*time.Millisecond, tc.up, tc.down)
				if _, err := a.Create("/n", nil, 0, acl); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != 300*time.Millisecond {
					t.Errorf("the reply came after %v, want the partition's 300ms", got)
				}
			})
		})
	}
}

func TestFramesInPieces(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		a, ra, ah := clientOn(w)
		ah.Pieces(5, time.Minute)
		for i := range 20 {
			must(a.Create("/n-", []byte("some data"), zk.FlagSequence, acl))
			if names, _ := must2(a.Children("/")); len(names) != i+2 {
				t.Fatalf("%d children", len(names))
			}
		}
		if slices.Contains(states(ra), zk.StateDisconnected) {
			t.Errorf("events %v", states(ra))
		}
		if v := w.Violations(); len(v) > 0 {
			t.Errorf("violations %v", v)
		}
	})
}

func TestViolations(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		resp, _, _ := rawConnect(t, w, jute.ConnectRequest{Timeout: 4000})
		c, err := w.NewHost("raw").Dial("tcp", "simzk:2181", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, at := jute.BeginFrame(nil)
		req := jute.ConnectRequest{SessionID: resp.SessionID, Passwd: resp.Passwd}
		b = jute.EndFrame(req.Append(b), at)
		b, at = jute.BeginFrame(b)
		b = jute.RequestHeader{Xid: 1, Op: jute.OpGetData}.Append(b)
		b = jute.EndFrame(append(b, 0, 0, 0, 9, '/'), at) // a path cut short
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.ReadAll(c)
		if v := w.Violations(); len(v) != 1 {
			t.Errorf("violations %q, want the cut request", v)
		}
	})
}

// A request that arrives on a connection whose session has moved to
// another is not served (the server is done with that connection).
func TestRequestAfterSessionMoved(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		resp, _, _ := rawConnect(t, w, jute.ConnectRequest{Timeout: 4000})
		h := w.NewHost("raw")
		old, err := h.Dial("tcp", "simzk:2181", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		b, at := jute.BeginFrame(nil)
		req := jute.ConnectRequest{SessionID: resp.SessionID, Passwd: resp.Passwd}
		old.Write(jute.EndFrame(req.Append(b), at))
		if _, err := jute.ReadFrame(old, nil, jute.MaxBuffer); err != nil {
			t.Fatal(err)
		}
		// The session moves to a new connection, while the old one
		// still has a request coming, held up by a partition.
		h.Partition(time.Second, true, false)
		b, at = jute.BeginFrame(nil)
		b = jute.RequestHeader{Xid: 1, Op: jute.OpGetData}.Append(b)
		old.Write(jute.EndFrame(jute.PathWatch{Path: "/", Watch: true}.Append(b), at))
		if again, _, _ := rawConnect(t, w, req); again.SessionID != resp.SessionID {
			t.Fatalf("resumed: %+v", again)
		}
		time.Sleep(2 * time.Second)
		if v := w.Violations(); len(v) > 0 {
			t.Errorf("violations %q", v)
		}
	})
}

func TestLaggingFollowerRefusesReconnect(t *testing.T) {
	sim(t, func(t *testing.T, w *simzk.World) {
		h := w.NewHost("client")
		r := &recorder{}
		c, _, err := zk.Connect([]string{"s1:2181", "s2:2181"}, timeout,
			zk.WithDialer(h.Dial), zk.WithHostProvider(&simzk.HostProvider{}),
			zk.WithEventCallback(r.add), zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		awaitSession(c, r)
		first, other := h.Address(), "s1:2181" // go-zookeeper shuffles the servers
		if first == other {
			other = "s2:2181"
		}
		sid := c.SessionID()
		time.Sleep(time.Second)
		must(c.Create("/n", nil, 0, acl))
		w.Lag(other, 500*time.Millisecond, time.Minute) // it has not applied the create
		h.Drop()
		time.Sleep(5 * time.Second)
		awaitSession(c, r)
		opened, _ := h.Dials()
		if c.SessionID() != sid || h.Address() != first || opened != 3 || w.LagRefusals() != 1 {
			t.Errorf("session %#x on %s after %d connections, %d refused; want %#x on %s after 3 (the first, %s refusing, the first)",
				c.SessionID(), h.Address(), opened, w.LagRefusals(), sid, first, other)
		}
	})
}
