package recipe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// aclSubject is one recipe's handle, as the ACL matrix drives it.
type aclSubject struct {
	acquire, try, release func(context.Context) error
	participants          func(context.Context) (int, error)
	node                  func() string
	err                   func() error
}

// aclRecipes are the recipes under the ACL matrix: their names, their own
// not-acquired sentinel and how to make a handle.
var aclRecipes = []struct {
	name        string
	notAcquired error
	handle      func(c *recipe.Client, path string) (aclSubject, error)
}{
	{"mutex", mutex.ErrNotAcquired, func(c *recipe.Client, path string) (aclSubject, error) {
		m, err := mutex.New(c, path)
		if err != nil {
			return aclSubject{}, err
		}
		return aclSubject{acquire: m.Lock, try: m.TryLock, release: m.Unlock,
			participants: count(m.Participants), node: m.Node, err: m.Err}, nil
	}},
	{"rwlock.read", rwlock.ErrNotAcquired, func(c *recipe.Client, path string) (aclSubject, error) {
		rw, err := rwlock.New(c, path)
		if err != nil {
			return aclSubject{}, err
		}
		return aclSubject{acquire: rw.RLock, try: rw.TryRLock, release: rw.RUnlock,
			participants: count(rw.Participants), node: rw.Reader().Node, err: rw.Reader().Err}, nil
	}},
	{"rwlock.write", rwlock.ErrNotAcquired, func(c *recipe.Client, path string) (aclSubject, error) {
		rw, err := rwlock.New(c, path)
		if err != nil {
			return aclSubject{}, err
		}
		return aclSubject{acquire: rw.Lock, try: rw.TryLock, release: rw.Unlock,
			participants: count(rw.Participants), node: rw.Node, err: rw.Err}, nil
	}},
	{"semaphore", semaphore.ErrNotAcquired, func(c *recipe.Client, path string) (aclSubject, error) {
		s, err := semaphore.New(c, path, 2)
		if err != nil {
			return aclSubject{}, err
		}
		var lease *semaphore.Lease
		get := func(try bool) func(context.Context) error {
			return func(ctx context.Context) (err error) {
				if try {
					lease, err = s.TryAcquire(ctx)
				} else {
					lease, err = s.Acquire(ctx)
				}
				return err
			}
		}
		return aclSubject{acquire: get(false), try: get(true),
			release:      func(ctx context.Context) error { return lease.Release(ctx) },
			participants: count(s.Participants),
			node:         func() string { return lease.Node() },
			err:          func() error { return lease.Err() }}, nil
	}},
	{"leader", leader.ErrNotElected, func(c *recipe.Client, path string) (aclSubject, error) {
		e, err := leader.New(c, path, leader.WithData([]byte("acl-test")))
		if err != nil {
			return aclSubject{}, err
		}
		return aclSubject{acquire: e.Campaign, try: e.TryCampaign, release: e.Resign,
			participants: count(e.Participants), node: e.Node, err: e.Err}, nil
	}},
}

// count turns a Participants method into a count of participants.
func count[P any](participants func(context.Context) ([]P, error)) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		ps, err := participants(ctx)
		return len(ps), err
	}
}

// TestACL: a lock directory made by a client with a digest ACL (only
// alice may do anything) keeps everyone else out, for every recipe: a
// client without credentials, with a wrong password or as another user
// cannot enqueue (the blocking and the try form fail at once with
// ErrPermission and the recipe's not-acquired sentinel), cannot list the
// queue (Participants fails with ErrPermission) and cannot delete the
// holder's node (Evict fails with ErrPermission); the holder keeps its
// hold throughout and nothing is left behind.
func TestACL(t *testing.T) {
	srv := zktest.Shared(t)
	alice := locktest.Client(t, []string{srv.Addr()},
		recipe.WithDigestAuth("alice", "secret"),
		recipe.WithACL(zk.DigestACL(zk.PermAll, "alice", "secret")...))
	strangers := []struct {
		name string
		c    *recipe.Client
	}{
		{"no credentials", locktest.Client(t, []string{srv.Addr()})},
		{"wrong password", locktest.Client(t, []string{srv.Addr()}, recipe.WithDigestAuth("alice", "guess"))},
		{"another user", locktest.Client(t, []string{srv.Addr()}, recipe.WithDigestAuth("bob", "secret"))},
	}
	raw := zktest.Connect(t, srv.Addr())
	for _, r := range aclRecipes {
		t.Run(r.name, func(t *testing.T) {
			path := openParent(t, raw) + "/lock"
			owner, err := r.handle(alice, path)
			if err != nil {
				t.Fatal(err)
			}
			ctx := locktest.Ctx(t, 30*time.Second)
			if err := owner.acquire(ctx); err != nil {
				t.Fatalf("owner: %v", err)
			}
			for _, s := range strangers {
				h, err := r.handle(s.c, path)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []struct {
					form    string
					acquire func(context.Context) error
				}{{"acquire", h.acquire}, {"try", h.try}} {
					actx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := f.acquire(actx)
					cancel()
					if !errors.Is(err, recipe.ErrPermission) || !errors.Is(err, r.notAcquired) ||
						!errors.Is(err, recipe.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: %s = %v; want ErrPermission and %v at once", s.name, f.form, err, r.notAcquired)
					}
				}
				if n, err := h.participants(ctx); !errors.Is(err, recipe.ErrPermission) {
					t.Errorf("%s: Participants = %d, %v; want ErrPermission", s.name, n, err)
				}
				lk, err := recipe.NewLock(s.c, path, recipe.LockSpec{LockName: mutex.LockName, Driver: driver.Mutex()}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Evict(ctx, owner.node()); !errors.Is(err, recipe.ErrPermission) {
					t.Errorf("%s: Evict(holder) = %v; want ErrPermission", s.name, err)
				}
			}
			if err := owner.err(); err != nil {
				t.Fatalf("the holder lost its hold: %v", err)
			}
			if n, err := owner.participants(ctx); err != nil || n != 1 {
				t.Fatalf("owner's Participants = %d, %v; want only the holder", n, err)
			}
			if err := owner.release(ctx); err != nil {
				t.Fatalf("owner's release: %v", err)
			}
		})
	}
}

// openParent creates a fresh directory (a CONTAINER node, removed by the
// server once it has had children and is empty again) that anyone may use,
// so that the protected lock directory inside it is the only node with a
// restrictive ACL: a protected /zktest would lock every other test out.
func openParent(t *testing.T, conn *zk.Conn) string {
	t.Helper()
	dir := zktest.UniquePath(t)
	for range 10 {
		_, err := conn.CreateContainer(dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
		if err == nil {
			return dir
		}
		if !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		// /zktest is missing, or was reaped as an empty container.
		if _, err := conn.Create("/zktest", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not create %s", dir)
	return ""
}

// A protected lock that accepts any directory ACL (WithAnyDirectoryACL)
// creates missing parents open, so it does not lock other clients out of
// the parent: another client can still make its own lock next to it.
// Without the option they carry the client's ACL: TestDirectoryACLParents.
func TestACLParentsStayOpen(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	parent := zktest.UniquePath(t) + "/shared"
	alice := locktest.Client(t, []string{srv.Addr()}, recipe.WithDigestAuth("alice", "secret"),
		recipe.WithACL(zk.DigestACL(zk.PermAll, "alice", "secret")...), recipe.WithAnyDirectoryACL())
	m, err := mutex.New(alice, parent+"/alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), parent+"/bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("a lock next to a protected one: %v (the parent was created protected)", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
