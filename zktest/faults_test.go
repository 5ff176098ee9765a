package zktest_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tests of this file show, for each fault the proxy injects, what a
// client sees and how fast. They assert outcomes only; the times they log
// (go test -v -run TestFault ./zktest/) depend on the machine, and their
// bounds only keep a broken test from hanging.

// hangBound bounds every wait of these tests.
const hangBound = 30 * time.Second

// faultProxy starts a proxy to srv, closed when the test ends (after the
// clients connected through it, which are closed first).
func faultProxy(t *testing.T, srv *zktest.Server) *zktest.Proxy {
	t.Helper()
	p, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// testCtx returns a context ended after d or when the test ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockedMutex returns a mutex on lockPath, locked through c.
func lockedMutex(t *testing.T, c *recipe.Client, lockPath string) *mutex.Mutex {
	t.Helper()
	m, err := mutex.New(c, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(testCtx(t, hangBound)); err != nil {
		t.Fatalf("lock %s: %v", lockPath, err)
	}
	return m
}

// waitLost waits until m's hold ends and returns how long after start it
// was seen.
func waitLost(t *testing.T, m *mutex.Mutex, start time.Time) time.Duration {
	t.Helper()
	select {
	case <-m.Done():
		return time.Since(start)
	case <-time.After(hangBound):
		t.Fatalf("mutex holder not told of the loss within %v", hangBound)
		return 0
	}
}

// lockInBackground starts locking m and returns a channel that receives
// the time the lock was granted (the zero time if Lock failed).
func lockInBackground(t *testing.T, m *mutex.Mutex) <-chan time.Time {
	t.Helper()
	ctx := testCtx(t, hangBound)
	granted := make(chan time.Time, 1)
	go func() {
		if err := m.Lock(ctx); err != nil {
			t.Errorf("second client: lock: %v", err)
			granted <- time.Time{}
			return
		}
		granted <- time.Now()
	}()
	return granted
}

// ensureParents creates the ancestors of p that do not exist.
func ensureParents(t *testing.T, c *zk.Conn, p string) {
	t.Helper()
	var dirs []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if _, err := c.Create(d, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", d, err)
		}
	}
}

// exists reports whether p exists, read on c.
func exists(t *testing.T, c *zk.Conn, p string) bool {
	t.Helper()
	ok, _, err := c.Exists(p)
	if err != nil {
		t.Fatalf("exists %s: %v", p, err)
	}
	return ok
}

// Partition: a mutex holder behind the proxy hears nothing, is told it
// lost the lock once its loss timeout passes (before the server expires
// its session), and a client on the server takes the lock once the
// session expired.
func TestFaultPartition(t *testing.T) {
	srv := zktest.Shared(t)
	lockPath := zktest.UniquePath(t)
	p := faultProxy(t, srv)
	const session = 2 * time.Second
	holder := lockedMutex(t, p.Client(t, recipe.WithSessionTimeout(session)), lockPath)
	next, err := mutex.New(zktest.Client(t, srv.Addr()), lockPath)
	if err != nil {
		t.Fatal(err)
	}
	granted := lockInBackground(t, next)
	time.Sleep(100 * time.Millisecond) // the second client queues

	start := time.Now()
	p.Partition()
	lost := waitLost(t, holder, start)
	if err := holder.Err(); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("holder's Err = %v, want recipe.ErrLost", err)
	}
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(hangBound):
		t.Fatalf("second client not granted the lock within %v of the partition", hangBound)
	}
	if at.IsZero() {
		t.FailNow()
	}
	if took := at.Sub(start); took < lost {
		t.Fatalf("second client granted %v after the partition, before the holder was told (%v)", took, lost)
	}
	t.Logf("Partition: holder's Done fired %v after the partition (session %v, loss timeout %v): %v; the second client on the server was granted the lock %v after it",
		lost.Round(time.Millisecond), session, session/2, holder.Err(), at.Sub(start).Round(time.Millisecond))
	p.Heal()
	if err := next.Unlock(testCtx(t, hangBound)); err != nil {
		t.Fatal(err)
	}
}

// Heal: after a partition shorter than the session timeout, the client
// reconnects with the same session and locks again.
func TestFaultHeal(t *testing.T) {
	srv := zktest.Shared(t)
	lockPath := zktest.UniquePath(t)
	p := faultProxy(t, srv)
	const session = 6 * time.Second
	c := p.Client(t, recipe.WithSessionTimeout(session))
	id := c.SessionID()
	m := lockedMutex(t, c, lockPath)

	start := time.Now()
	p.Partition()
	// Past the loss timeout (half the session timeout) the holder is told
	// it may have lost the lock; the server keeps the session a while
	// longer.
	lost := waitLost(t, m, start)
	if err := m.Err(); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("Err = %v, want recipe.ErrLost", err)
	}
	healed := time.Now()
	p.Heal()
	if err := m.Unlock(testCtx(t, hangBound)); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("Unlock of the lost lock = %v, want recipe.ErrLost", err)
	}
	if err := m.Lock(testCtx(t, hangBound)); err != nil {
		t.Fatalf("lock after Heal: %v", err)
	}
	relocked := time.Since(healed)
	if got := c.SessionID(); got != id {
		t.Fatalf("session after Heal = %#x, want %#x (kept)", got, id)
	}
	t.Logf("Heal: partition of %v (session %v, holder told after %v): locked again %v after Heal, same session %#x",
		healed.Sub(start).Round(time.Millisecond), session, lost.Round(time.Millisecond), relocked.Round(time.Millisecond), id)
	if err := m.Unlock(testCtx(t, hangBound)); err != nil {
		t.Fatal(err)
	}
}

// PartitionOneWay: with only the client's traffic black-holed the server
// expires the session (it hears no pings); with only the server's, the
// server keeps the session (it hears the pings) while the client hears
// nothing. Either way the holder is told it lost the lock.
func TestFaultPartitionOneWay(t *testing.T) {
	srv := zktest.Shared(t)
	direct := zktest.Connect(t, srv.Addr())
	const session = 3 * time.Second
	for _, d := range []zktest.Direction{zktest.ClientToServer, zktest.ServerToClient} {
		t.Run(d.String(), func(t *testing.T) {
			lockPath := zktest.UniquePath(t)
			p := faultProxy(t, srv)
			c := p.Client(t, recipe.WithSessionTimeout(session))
			id := c.SessionID()
			m := lockedMutex(t, c, lockPath)
			node := lockPath + "/" + m.Node()

			start := time.Now()
			p.PartitionOneWay(d)
			lost := waitLost(t, m, start)
			lostErr := m.Err()
			if !errors.Is(lostErr, recipe.ErrLost) {
				t.Fatalf("Err = %v, want recipe.ErrLost", lostErr)
			}
			switch d {
			case zktest.ClientToServer:
				// The server expires the session: the node goes.
				for exists(t, direct, node) {
					if time.Since(start) > hangBound {
						t.Fatalf("lock node still there %v after the partition", hangBound)
					}
					time.Sleep(20 * time.Millisecond)
				}
				gone := time.Since(start)
				healed := time.Now()
				p.Heal()
				_ = m.Unlock(testCtx(t, hangBound))
				if err := m.Lock(testCtx(t, hangBound)); err != nil {
					t.Fatalf("lock after Heal: %v", err)
				}
				if c.SessionID() == id {
					t.Fatalf("session %#x kept although the server expired it", id)
				}
				t.Logf("PartitionOneWay(%v): holder told after %v: %v; session expired on the server (node gone) after %v; after Heal, locked again on a new session in %v",
					d, lost.Round(time.Millisecond), lostErr, gone.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
			case zktest.ServerToClient:
				// The server hears the pings: the session outlives a
				// whole session timeout of silence from the server.
				time.Sleep(session + time.Second - time.Since(start))
				healed := time.Now()
				p.Heal()
				_ = m.Unlock(testCtx(t, hangBound))
				if err := m.Lock(testCtx(t, hangBound)); err != nil {
					t.Fatalf("lock after Heal: %v", err)
				}
				if got := c.SessionID(); got != id {
					t.Fatalf("session after Heal = %#x, want %#x (the server heard the client throughout)", got, id)
				}
				t.Logf("PartitionOneWay(%v): holder told after %v: %v; healed after %v, then locked again on the same session in %v",
					d, lost.Round(time.Millisecond), lostErr, healed.Sub(start).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
			}
			if err := m.Unlock(testCtx(t, hangBound)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// DropAll: the client reconnects at once with the same session; a lock
// held across the drop is kept.
func TestFaultDropAll(t *testing.T) {
	srv := zktest.Shared(t)
	lockPath := zktest.UniquePath(t)
	p := faultProxy(t, srv)
	c := p.Client(t, recipe.WithSessionTimeout(4*time.Second))
	id := c.SessionID()
	m := lockedMutex(t, c, lockPath)

	start := time.Now()
	p.DropAll()
	ctx := testCtx(t, hangBound)
	var took time.Duration
	for {
		if _, err := m.Participants(ctx); err == nil && p.Stats().Connections >= 2 {
			took = time.Since(start)
			break
		} else if ctx.Err() != nil {
			t.Fatalf("no answer through the proxy within %v of DropAll", hangBound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("lock lost across DropAll: %v", err)
	}
	if got := c.SessionID(); got != id {
		t.Fatalf("session after DropAll = %#x, want %#x", got, id)
	}
	t.Logf("DropAll: the client answered again on a new connection %v after the drop, same session, lock held", took.Round(time.Millisecond))
	if err := m.Unlock(testCtx(t, hangBound)); err != nil {
		t.Fatal(err)
	}
}

// LoseNextReply: the server applies the create, the client's call fails
// with a connection error, and after reconnecting (same session) the
// client finds the node there.
func TestFaultLoseNextReply(t *testing.T) {
	srv := zktest.Shared(t)
	direct := zktest.Connect(t, srv.Addr())
	p := faultProxy(t, srv)
	c := zktest.Connect(t, p.Addr())
	id := c.SessionID()
	node := zktest.UniquePath(t)
	ensureParents(t, c, node)

	p.LoseNextReply(zktest.OpCreate)
	start := time.Now()
	_, err := c.Create(node, []byte("lost reply"), 0, zk.WorldACL(zk.PermAll))
	failed := time.Since(start)
	if !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("create with its reply lost = %v, want zk.ErrConnectionClosed", err)
	}
	if !exists(t, direct, node) {
		t.Fatal("the server did not apply the create whose reply was lost")
	}
	if !exists(t, c, node) { // waits for the reconnection
		t.Fatal("the client does not see its own create after reconnecting")
	}
	back := time.Since(start)
	if c.SessionID() != id {
		t.Fatalf("session changed: %#x -> %#x", id, c.SessionID())
	}
	if st := p.Stats(); st.Cuts != 1 {
		t.Fatalf("stats = %+v, want 1 cut", st)
	}
	t.Logf("LoseNextReply(create): the call failed with %q %v after it was made; the node was there, and the client answered again (same session) %v after the call",
		err, failed.Round(time.Millisecond), back.Round(time.Millisecond))
}

// DropNextRequest: the server never sees the create, the client's call
// fails with a connection error, and after reconnecting (same session)
// the create succeeds when made again.
func TestFaultDropNextRequest(t *testing.T) {
	srv := zktest.Shared(t)
	direct := zktest.Connect(t, srv.Addr())
	p := faultProxy(t, srv)
	c := zktest.Connect(t, p.Addr())
	id := c.SessionID()
	node := zktest.UniquePath(t)
	ensureParents(t, c, node)

	p.DropNextRequest(zktest.OpCreate)
	start := time.Now()
	_, err := c.Create(node, nil, 0, zk.WorldACL(zk.PermAll))
	failed := time.Since(start)
	if !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("dropped create = %v, want zk.ErrConnectionClosed", err)
	}
	// The connection was cut before the request went: nothing to wait for.
	if exists(t, direct, node) {
		t.Fatal("the server applied a dropped create")
	}
	if _, err := c.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create again after the drop: %v", err)
	}
	back := time.Since(start)
	if c.SessionID() != id {
		t.Fatalf("session changed: %#x -> %#x", id, c.SessionID())
	}
	if st := p.Stats(); st.Dropped != 1 {
		t.Fatalf("stats = %+v, want 1 dropped", st)
	}
	t.Logf("DropNextRequest(create): the call failed with %q %v after it was made; the server never saw it; the create made again succeeded (same session) %v after the first call",
		err, failed.Round(time.Millisecond), back.Round(time.Millisecond))
}

// ExpireSessions: the server expires the sessions of the proxy's clients
// now: a raw connection sees zk.StateExpired and its ephemeral node is
// gone; a mutex holder is told it lost the lock with
// recipe.ErrSessionExpired; both well before any session timeout.
func TestFaultExpireSessions(t *testing.T) {
	srv := zktest.Shared(t)
	direct := zktest.Connect(t, srv.Addr())

	t.Run("raw", func(t *testing.T) {
		p := faultProxy(t, srv)
		c, events := zktest.ConnectWithEvents(t, zktest.DefaultSessionTimeout, p.Addr())
		id := c.SessionID()
		node := zktest.UniquePath(t)
		ensureParents(t, c, node)
		if _, err := c.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if got := p.Sessions(); !slices.Equal(got, []int64{id}) {
			t.Fatalf("Sessions = %#x, want [%#x]", got, id)
		}
		start := time.Now()
		n, err := p.ExpireSessions()
		if err != nil || n != 1 {
			t.Fatalf("ExpireSessions = %d, %v; want 1, nil", n, err)
		}
		returned := time.Since(start)
		if exists(t, direct, node) {
			t.Fatal("ephemeral node still there after ExpireSessions returned")
		}
		waitState(t, events, zk.StateExpired, hangBound)
		expired := time.Since(start)
		t.Logf("ExpireSessions (raw conn): returned after %v; the ephemeral node was gone then; zk.StateExpired %v after the call (session timeout %v)",
			returned.Round(time.Millisecond), expired.Round(time.Millisecond), zktest.DefaultSessionTimeout)
		// go-zookeeper then opens a new session by itself.
		waitSession(t, c, hangBound)
		if c.SessionID() == id {
			t.Fatalf("session %#x still in use", id)
		}
	})

	t.Run("mutex", func(t *testing.T) {
		p := faultProxy(t, srv)
		c := p.Client(t)
		m := lockedMutex(t, c, zktest.UniquePath(t))
		start := time.Now()
		if n, err := p.ExpireSessions(); err != nil || n != 1 {
			t.Fatalf("ExpireSessions = %d, %v; want 1, nil", n, err)
		}
		lost := waitLost(t, m, start)
		if err := m.Err(); !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrSessionExpired) {
			t.Fatalf("Err = %v, want recipe.ErrLost and recipe.ErrSessionExpired", err)
		}
		t.Logf("ExpireSessions (mutex holder): Done fired %v after the call, %v (session timeout %v)",
			lost.Round(time.Millisecond), m.Err(), c.SessionTimeout())
	})

	t.Run("during a partition", func(t *testing.T) {
		p := faultProxy(t, srv)
		c := p.Client(t)
		m := lockedMutex(t, c, zktest.UniquePath(t))
		p.Partition()
		start := time.Now()
		if n, err := p.ExpireSessions(); err != nil || n != 1 {
			t.Fatalf("ExpireSessions during a partition = %d, %v; want 1, nil", n, err)
		}
		// The client's connection, held by the partition, still names
		// the session; the server answers that it expired: it counts.
		if n, err := p.ExpireSessions(); err != nil || n != 1 {
			t.Fatalf("ExpireSessions again = %d, %v; want 1 (already expired), nil", n, err)
		}
		select {
		case <-m.Done():
			t.Fatalf("holder told during the partition: %v", m.Err())
		default:
		}
		healed := time.Now()
		p.Heal()
		lost := waitLost(t, m, healed)
		if err := m.Err(); !errors.Is(err, recipe.ErrSessionExpired) {
			t.Fatalf("Err = %v, want recipe.ErrSessionExpired", err)
		}
		t.Logf("ExpireSessions during a partition: returned after %v; the holder learnt it %v after Heal: %v",
			healed.Sub(start).Round(time.Millisecond), lost.Round(time.Millisecond), m.Err())
	})

	t.Run("none", func(t *testing.T) {
		p := faultProxy(t, srv)
		if n, err := p.ExpireSessions(); err != nil || n != 0 {
			t.Fatalf("ExpireSessions without clients = %d, %v; want 0, nil", n, err)
		}
	})
}
