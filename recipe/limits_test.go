package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A session timeout the protocol cannot carry, or too short for any
// connect to succeed, is refused by Connect before it dials, saying what
// the client takes and what the server grants.
func TestSessionTimeoutRange(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, 99 * time.Millisecond, 600 * time.Hour, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			start := time.Now()
			_, err := recipe.Connect(context.Background(), []string{"127.0.0.1:1"}, recipe.WithSessionTimeout(d))
			if !errors.Is(err, recipe.ErrInvalidArgument) {
				t.Fatalf("Connect with a session timeout of %v = %v; want ErrInvalidArgument", d, err)
			}
			for _, want := range []string{"session timeout " + d.String() + " out of range", "100ms to 596h31m23.647s", "2 to 20 of its ticks"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("refused after %v: it dialled", took)
			}
		})
	}
}

// A lock path too long for a request is refused as such, with its length
// and the limit, not as node data with a negative room.
func TestLongPathRefused(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithMaxPacket(4096))
	path := "/" + strings.Repeat("p", 4100)
	_, err := mutex.New(c, path, mutex.WithData([]byte("7 bytes")))
	if !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Fatalf("mutex.New with a path of %d bytes = %v; want ErrInvalidArgument", len(path), err)
	}
	for _, want := range []string{"lock path of 4101 bytes", "over the 4096 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "-") || strings.Contains(err.Error(), "node data") {
		t.Errorf("error %q blames the data or names a negative size", err)
	}
	// The same path with room to spare, and data too large: the data is named.
	_, err = mutex.New(c, "/short", mutex.WithData(make([]byte, 4096)))
	if !errors.Is(err, recipe.ErrInvalidArgument) || !strings.Contains(err.Error(), "node data of 4096 bytes") {
		t.Errorf("mutex.New with 4096 bytes of data = %v; want the data named", err)
	}
}

// The guarded transaction is measured as the wire carries it: the largest
// the server takes (exactly its jute.maxbuffer, 0xfffff bytes) commits,
// and one byte more is refused without I/O, naming both sizes, while the
// client's connection and hold live on. The same request one byte over,
// sent through go-zookeeper as it is, makes the server drop the
// connection: the limit is the server's, to the byte.
func TestCommitSizeBoundary(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 60*time.Second)
	c := locktest.Client(t, []string{srv.Addr()})
	dir := zktest.UniquePath(t)
	lk, err := recipe.NewLock(c, dir+"/lock", recipe.LockSpec{LockName: mutex.LockName, Driver: driver.Mutex()}, nil)
	must(t, err)
	h, err := lk.Acquire(ctx)
	must(t, err)
	own := dir + "/lock/" + h.Node()
	limit := recipe.MaxPacket(c)
	data := make([]byte, limit-recipe.CommitSize(c, own, recipe.Create(dir+"/a", nil)))
	largest := recipe.Create(dir+"/a", data)
	if got := recipe.CommitSize(c, own, largest); got != limit {
		t.Fatalf("sized %d bytes, want %d", got, limit)
	}
	if _, err := h.Commit(ctx, largest); err != nil {
		t.Fatalf("Commit of exactly %d bytes: %v", limit, err)
	}
	over := recipe.Create(dir+"/bb", data) // a path one byte longer
	before, session := c.Stats(), c.SessionID()
	_, err = h.Commit(ctx, over)
	if !errors.Is(err, recipe.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), fmt.Sprintf("a request of %d bytes, over the %d bytes", limit+1, limit)) {
		t.Fatalf("Commit of %d bytes = %v; want ErrInvalidArgument naming %d and %d", limit+1, err, limit+1, limit)
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Fatalf("the refused Commit sent %d requests", d.RoundTrips())
	}
	if _, err := h.Commit(ctx); err != nil || h.Err() != nil || c.SessionID() != session {
		t.Fatalf("after the refusal: Commit() = %v, Err = %v, session %x (was %x)", err, h.Err(), c.SessionID(), session)
	}

	// The same transaction through go-zookeeper: the server drops it.
	raw := zktest.Connect(t, srv.Addr())
	_, err = raw.Multi(&zk.CheckVersionRequest{Path: own, Version: -1},
		&zk.CreateRequest{Path: over.Path(), Data: data, Acl: zk.WorldACL(zk.PermAll)})
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("the server took a request of %d bytes: %v", limit+1, err)
	}
	t.Logf("a request of %d bytes sent as it is: %v", limit+1, err)
	must(t, h.Release(ctx))
}

// AcquireN's transaction is measured too: 100 nodes whose data fills the
// transaction as near the limit as equal nodes can (one byte more each
// would not fit) are granted, and one node more, or the 8000 and 11000
// nodes of a semaphore of 2^20 leases, are refused without I/O,
// with the size and the limit named, where the transaction used to be
// sent (the server dropped the connection at every retry) or fail with
// go-zookeeper's "zk: buffer too small".
func TestAcquireNSizeBoundary(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 60*time.Second)
	c := locktest.Client(t, []string{srv.Addr()})
	dir := zktest.UniquePath(t) + "/sem"
	leases, err := driver.Leases(1 << 20)
	must(t, err)
	spec := recipe.LockSpec{LockName: semaphore.LockName, Driver: leases}
	limit := recipe.MaxPacket(c)
	bare, err := recipe.NewLock(c, dir, spec, nil)
	must(t, err)
	const n = 100 // few nodes, with large data: the engine verifies each node against a listing of all
	lk, err := recipe.NewLock(c, dir, spec, make([]byte, (limit-recipe.AcquireNSize(bare, n))/n))
	must(t, err)
	if size := recipe.AcquireNSize(lk, n); size > limit || size+n <= limit {
		t.Fatalf("AcquireN(%d) sized %d bytes: not the fullest under %d", n, size, limit)
	}
	hs, err := lk.AcquireN(ctx, n)
	if err != nil {
		t.Fatalf("AcquireN(%d), %d bytes: %v", n, limit, err)
	}
	for _, h := range hs {
		must(t, h.Release(ctx))
	}
	before, session := c.Stats(), c.SessionID()
	for _, m := range []int{n + 1, 8000, 11000} {
		_, err = lk.AcquireN(ctx, m)
		want := fmt.Sprintf("a request of %d bytes, over the %d bytes", recipe.AcquireNSize(lk, m), limit)
		if !errors.Is(err, recipe.ErrInvalidArgument) || !errors.Is(err, recipe.ErrNotAcquired) || !strings.Contains(err.Error(), want) {
			t.Errorf("AcquireN(%d) = %v; want ErrInvalidArgument and %q", m, err, want)
		}
	}
	s, err := semaphore.New(c, zktest.UniquePath(t), 1<<20)
	must(t, err)
	for _, m := range []int{8000, 11000} {
		_, err = s.AcquireN(ctx, m)
		if !errors.Is(err, recipe.ErrInvalidArgument) || !errors.Is(err, semaphore.ErrNotAcquired) {
			t.Errorf("semaphore AcquireN(%d) = %v; want ErrInvalidArgument", m, err)
		}
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 || c.SessionID() != session {
		t.Fatalf("the refused AcquireN calls sent %d requests (session %x, was %x)", d.RoundTrips(), c.SessionID(), session)
	}
}

// Commit refuses, before any I/O, ops on the hold's own queue: deleting
// its own node (reported before as "deleted by another client"), creating
// a persistent lock-like node that would block the lock for good,
// deleting or writing another lock node. A Check of its own node passes,
// and so do a write of its own node's data (what leader.Proclaim does),
// a node of the application's next to the queue, and ops beside the lock
// directory.
func TestCommitOwnQueueRefused(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	c := locktest.Client(t, []string{srv.Addr()})
	dir := zktest.UniquePath(t) + "/lock"
	lk, err := recipe.NewLock(c, dir, recipe.LockSpec{LockName: mutex.LockName, Driver: driver.Mutex()}, nil)
	must(t, err)
	h, err := lk.Acquire(ctx)
	must(t, err)
	own := dir + "/" + h.Node()
	before := c.Stats()
	other := dir + "/_c_00000000-0000-0000-0000-000000000000-lock-0000000099"
	for _, op := range []recipe.Op{recipe.Delete(own), recipe.Create(dir+"/lock-0000000000", nil),
		recipe.CreateSequential(dir+"/lock-", nil), recipe.Create(dir+"/x-lock-0000000000", nil),
		recipe.Delete(other), recipe.SetData(other, []byte("__REVOKE__"))} {
		_, err := h.Commit(ctx, op)
		if !errors.Is(err, recipe.ErrInvalidArgument) || !strings.Contains(err.Error(), "only Check may name the queue of "+dir) {
			t.Errorf("Commit(%v) = %v; want ErrInvalidArgument naming the hold's own queue", op, err)
		}
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Fatalf("refused commits sent %d requests", d.RoundTrips())
	}
	if _, err := h.Commit(ctx, recipe.Check(own, recipe.AnyVersion), recipe.SetData(own, []byte("me")),
		recipe.Create(dir+"/state", nil), recipe.Create(dir+"-beside", nil)); err != nil {
		t.Fatalf("a check and a write of its own node, a create next to the queue and beside the directory: %v", err)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("hold: %v", err)
	}
	must(t, h.Release(ctx))
}

// Many small creates: the transaction the old estimate (path + data + 32
// bytes per op) let through at about 1.15 times the limit, which the server
// dropped with the connection. Measured, it is refused without I/O.
func TestCommitManySmallCreates(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	c := locktest.Client(t, []string{srv.Addr()})
	dir := zktest.UniquePath(t)
	lk, err := recipe.NewLock(c, dir+"/lock", recipe.LockSpec{LockName: mutex.LockName, Driver: driver.Mutex()}, nil)
	must(t, err)
	h, err := lk.Acquire(ctx)
	must(t, err)
	ops := make([]recipe.Op, 14000)
	for i := range ops {
		ops[i] = recipe.Create(fmt.Sprintf("/b/%05d", i), make([]byte, 30))
	}
	before, session := c.Stats(), c.SessionID()
	_, err = h.Commit(ctx, ops...)
	sent := c.Stats().Sub(before).RoundTrips()
	t.Logf("Commit of 14000 creates of 30 bytes: %v (requests %d, session %x -> %x)", err, sent, session, c.SessionID())
	if !errors.Is(err, recipe.ErrInvalidArgument) || sent != 0 {
		t.Fatalf("Commit of 14000 creates = %v; want ErrInvalidArgument before any I/O", err)
	}
	must(t, h.Release(ctx))
}
