package recipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// aliceOpts are the options of a client that protects its locks: digest
// credentials and an ACL that grants everything to alice only.
func aliceOpts(extra ...recipe.Option) []recipe.Option {
	return append([]recipe.Option{recipe.WithDigestAuth("alice", "secret"),
		recipe.WithACL(zk.DigestACL(zk.PermAll, "alice", "secret")...)}, extra...)
}

// steal is what a client without credentials does to a lock in a
// directory it may delete in: it deletes every node of the queue, then
// takes the lock itself. It reports whether it holds.
func steal(t *testing.T, ctx context.Context, raw *zk.Conn, thief *mutex.Mutex, dir string) bool {
	t.Helper()
	names, _, err := raw.Children(dir)
	if err != nil {
		return false
	}
	for _, n := range names {
		_ = raw.Delete(dir+"/"+n, -1)
	}
	return thief.TryLock(ctx) == nil
}

// TestDirectoryACLSquat: a lock directory that someone without
// credentials made first, open to all (world:anyone:cdrwa), is refused by
// a client with an ACL of its own before it creates its node, with an
// error naming the directory and the grant, matching ErrDirectoryACL,
// ErrPermission and the recipe's not-acquired sentinel. Without the check
// the holder queued there, and an unauthenticated client deleted its node
// and took the lock. The directory made again, open, after the holder's
// directory was emptied and deleted, is refused the same way by the same
// handle. A directory the holder made keeps the stranger out: the holder
// keeps its lock. WithAnyDirectoryACL accepts the open directory.
func TestDirectoryACLSquat(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 60*time.Second)
	raw := zktest.Connect(t, srv.Addr()) // no credentials
	thiefClient := locktest.Client(t, []string{srv.Addr()})
	alice := locktest.Client(t, []string{srv.Addr()}, aliceOpts()...)
	parent := openParent(t, raw)

	squatted := parent + "/squatted"
	if _, err := raw.Create(squatted, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(alice, squatted)
	must(t, err)
	thief, err := mutex.New(thiefClient, squatted)
	must(t, err)
	before := alice.Stats()
	err = m.Lock(ctx)
	if err == nil {
		if steal(t, ctx, raw, thief, squatted) {
			t.Fatalf("alice queued in the open directory %s, and a client without credentials deleted her node and took the lock (alice's Err: %v)", squatted, m.Err())
		}
		t.Fatalf("alice queued in the open directory %s", squatted)
	}
	if !errors.Is(err, recipe.ErrDirectoryACL) || !errors.Is(err, recipe.ErrPermission) || !errors.Is(err, mutex.ErrNotAcquired) ||
		!strings.Contains(err.Error(), squatted+" grants world:anyone:cdrwa") {
		t.Fatalf("Lock in an open directory = %v; want ErrDirectoryACL naming %s and world:anyone:cdrwa", err, squatted)
	}
	if d := alice.Stats().Sub(before); d.Creates != 0 {
		t.Fatalf("the refused acquire sent %d creates", d.Creates)
	}
	if names, _, err := raw.Children(squatted); err != nil || len(names) != 0 {
		t.Fatalf("nodes left in the refused directory: %v, %v", names, err)
	}
	t.Logf("refused: %v", err)

	// Accepted on purpose.
	open, err := mutex.New(locktest.Client(t, []string{srv.Addr()}, aliceOpts(recipe.WithAnyDirectoryACL())...), squatted)
	must(t, err)
	must(t, open.Lock(ctx))
	must(t, open.Unlock(ctx))

	// A directory alice makes herself: the stranger cannot steal, and
	// alice keeps her lock.
	own := parent + "/own"
	m, err = mutex.New(alice, own)
	must(t, err)
	must(t, m.Lock(ctx))
	thief, err = mutex.New(thiefClient, own)
	must(t, err)
	if steal(t, ctx, raw, thief, own) {
		t.Fatalf("a client without credentials took the lock in alice's directory")
	}
	if err := raw.Delete(own+"/"+m.Node(), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("delete of alice's node without credentials: %v, want no auth", err)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("alice lost her lock: %v", err)
	}
	must(t, m.Unlock(ctx))

	// The empty directory deleted (its parent is open) and made again,
	// open: alice's next acquire on the same handle checks it again.
	if err := raw.Delete(own, -1); err != nil {
		t.Fatalf("delete of the empty directory: %v", err)
	}
	if _, err := raw.Create(own, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); !errors.Is(err, recipe.ErrDirectoryACL) {
		if err == nil && steal(t, ctx, raw, thief, own) {
			t.Fatalf("alice queued in %s made again open, and a client without credentials took the lock", own)
		}
		t.Fatalf("Lock in %s made again open = %v; want ErrDirectoryACL", own, err)
	}
}

// The check costs two requests (the directory's ACL, and its data with a
// watch, in one round trip) on the client's first acquire in a directory;
// the acquires after it, by that handle or a new one, cost what they cost
// without the check.
func TestDirectoryACLCost(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	raw := zktest.Connect(t, srv.Addr())
	path := openParent(t, raw) + "/lock"
	// The directory, persistent (never reaped), alice's only.
	if err := raw.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(path, nil, 0, zk.DigestACL(zk.PermAll, "alice", "secret")); err != nil {
		t.Fatal(err)
	}
	cycle := func(c *recipe.Client, m *mutex.Mutex) recipe.Stats {
		before := c.Stats()
		must(t, m.Lock(ctx))
		must(t, m.Unlock(ctx))
		return c.Stats().Sub(before)
	}
	checked := locktest.Client(t, []string{srv.Addr()}, aliceOpts()...)
	unchecked := locktest.Client(t, []string{srv.Addr()}, aliceOpts(recipe.WithAnyDirectoryACL())...)
	m, err := mutex.New(checked, path)
	must(t, err)
	u, err := mutex.New(unchecked, path)
	must(t, err)
	cycle(unchecked, u) // the unchecked client's first cycle, as the checked one's second
	one := cycle(checked, m)
	two := cycle(checked, m)
	plain := cycle(unchecked, u)
	t.Logf("requests of the first acquire and release %d, the second %d, without the check %d", one.RoundTrips(), two.RoundTrips(), plain.RoundTrips())
	if d := one.RoundTrips() - two.RoundTrips(); d != 2 || one.Reads-two.Reads != 2 {
		t.Errorf("first cycle %+v, second %+v: want two reads more on the first", one, two)
	}
	if two.RoundTrips() != plain.RoundTrips() {
		t.Errorf("a checked cycle costs %d requests, an unchecked one %d", two.RoundTrips(), plain.RoundTrips())
	}
	fresh, err := mutex.New(checked, path)
	must(t, err)
	if other := cycle(checked, fresh); other.RoundTrips() != plain.RoundTrips() {
		t.Errorf("a new handle's first cycle costs %d requests, an unchecked one %d", other.RoundTrips(), plain.RoundTrips())
	}
}

// A client that checks directories creates the missing parents of its
// lock directory with its own ACL: nobody else can make the lock
// directory, open, under them after the server reaps it, nor make another
// lock there. With WithAnyDirectoryACL they stay open.
func TestDirectoryACLParents(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	stranger := locktest.Client(t, []string{srv.Addr()})
	for _, tc := range []struct {
		name string
		opts []recipe.Option
		open bool
	}{{"checked", nil, false}, {"any", []recipe.Option{recipe.WithAnyDirectoryACL()}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			parent := zktest.UniquePath(t) + "/shared"
			m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}, aliceOpts(tc.opts...)...), parent+"/alice")
			must(t, err)
			must(t, m.Lock(ctx))
			other, err := mutex.New(stranger, parent+"/bob")
			must(t, err)
			err = other.Lock(ctx)
			switch {
			case tc.open && err != nil:
				t.Fatalf("a lock next to alice's under open parents: %v", err)
			case !tc.open && !errors.Is(err, recipe.ErrPermission):
				t.Fatalf("a lock next to alice's under her parents: %v; want ErrPermission", err)
			case tc.open:
				must(t, other.Unlock(ctx))
			}
			must(t, m.Unlock(ctx))
		})
	}
}

// TestDirectoryACLSemaphoreWrite: a semaphore keeps its number of leases in
// its directory's data. A directory that lets others WRITE
// ([alice:cdrwa, world:anyone:rw]) is refused to alice's semaphore with
// ErrDirectoryACL naming the grant: otherwise an outsider sets the data to
// maxLeases=1000, and alice's clients configured for 2 fail with
// ErrMismatch while a client configured for 1000 acquires next to a holder.
// A mutex keeps today's check: the same ACL is accepted for it. In a
// directory alice's semaphore makes itself, the outsider cannot write.
func TestDirectoryACLSemaphoreWrite(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 60*time.Second)
	raw := zktest.Connect(t, srv.Addr()) // no credentials
	alice := locktest.Client(t, []string{srv.Addr()}, aliceOpts()...)
	parent := openParent(t, raw)

	writable := parent + "/writable"
	acl := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead|zk.PermWrite)...)
	if _, err := raw.Create(writable, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	s, err := semaphore.New(alice, writable, 2)
	must(t, err)
	_, err = s.Acquire(ctx)
	if !errors.Is(err, recipe.ErrDirectoryACL) || !strings.Contains(err.Error(), writable+" grants world:anyone:rw") {
		t.Fatalf("semaphore Acquire in a directory others may write = %v; want ErrDirectoryACL naming world:anyone:rw", err)
	}
	t.Logf("refused: %v", err)
	m, err := mutex.New(alice, writable)
	must(t, err)
	must(t, m.Lock(ctx))
	must(t, m.Unlock(ctx))

	own := parent + "/own-semaphore"
	s, err = semaphore.New(alice, own, 2)
	must(t, err)
	lease, err := s.Acquire(ctx)
	must(t, err)
	if _, err := raw.Set(own, []byte("maxLeases=1000"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("an outsider's set of maxLeases on alice's semaphore directory: %v, want no auth", err)
	}
	must(t, lease.Release(ctx))
}
