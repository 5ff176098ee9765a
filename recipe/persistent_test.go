package recipe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A persistent node with a lock name ahead in the queue (made by hand, or
// by a program that is not a lock) is no holder: nothing will delete it.
// A waiter finds it by the read that would watch it, in the round trip
// after the listing, and fails at once with ErrMismatch naming the node,
// where it used to wait until its deadline. Participants marks it.
func TestPersistentLockNode(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	c := locktest.Client(t, []string{srv.Addr()})
	for _, name := range []string{"lock-0000000000", "x-lock-0000000000"} {
		t.Run(name, func(t *testing.T) {
			dir := zktest.UniquePath(t)
			mkdirs(t, raw, dir)
			if _, err := raw.Create(dir+"/"+name, []byte("by hand"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			m, err := mutex.New(c, dir)
			must(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err = m.Lock(ctx)
			took := time.Since(start)
			if !errors.Is(err, recipe.ErrMismatch) || !errors.Is(err, mutex.ErrNotAcquired) ||
				!strings.Contains(err.Error(), dir+"/"+name+" is a persistent node") || took > 5*time.Second {
				t.Fatalf("Lock behind a persistent %s = %v after %v; want ErrMismatch naming it at once", name, err, took)
			}
			t.Logf("refused after %v: %v", took, err)
			ps, err := m.Participants(ctx)
			must(t, err)
			if len(ps) != 1 || !ps[0].Persistent || ps[0].Node != name {
				t.Fatalf("Participants = %+v; want %s marked persistent", ps, name)
			}
			if names := locktest.Children(t, raw, dir); len(names) != 1 {
				t.Fatalf("left behind: %v", names)
			}
		})
	}
}

// A semaphore directory with no data (made by hand): the first client to
// find it records its number of leases, with a set conditional on the
// version it read, and a client with another number then fails with
// ErrMaxLeasesMismatch, where a 1-lease and a 2-lease client used to hold
// side by side. Two clients racing on a fresh empty directory: one records
// its number, the other is refused.
func TestSemaphoreEmptyDirectory(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	ctx := locktest.Ctx(t, 30*time.Second)
	c1 := locktest.Client(t, []string{srv.Addr()})
	c2 := locktest.Client(t, []string{srv.Addr()})

	dir := zktest.UniquePath(t) + "/pool"
	mkdirs(t, raw, dir) // no data
	one, err := semaphore.New(c1, dir, 1)
	must(t, err)
	two, err := semaphore.New(c2, dir, 2)
	must(t, err)
	l1, err := one.Acquire(ctx)
	must(t, err)
	if data, _, err := raw.Get(dir); err != nil || string(data) != "maxLeases=1" {
		t.Fatalf("directory data %q, %v; want maxLeases=1 recorded", data, err)
	}
	l2, err := two.Acquire(ctx)
	if err == nil {
		t.Fatalf("a 1-lease and a 2-lease semaphore both hold at %s (%s, %s)", dir, l1.Node(), l2.Node())
	}
	if !errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
		t.Fatalf("the 2-lease client: %v; want ErrMaxLeasesMismatch", err)
	}
	must(t, l1.Release(ctx))

	for round := range 5 {
		dir := zktest.UniquePath(t) + "/race" + string(rune('a'+round))
		mkdirs(t, raw, dir)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*recipe.Client{c1, c2} {
			s, err := semaphore.New(c, dir, i+1)
			must(t, err)
			wg.Go(func() {
				l, err := s.Acquire(ctx)
				errs[i] = err
				if err == nil {
					time.Sleep(100 * time.Millisecond) // both would hold together
					_ = l.Release(ctx)
				}
			})
		}
		wg.Wait()
		data, _, _ := raw.Get(dir)
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				if want := "maxLeases=" + string(rune('1'+i)); string(data) != want {
					t.Errorf("round %d: client %d held, the directory records %q", round, i+1, data)
				}
			case !errors.Is(err, semaphore.ErrMaxLeasesMismatch):
				t.Errorf("round %d: client %d: %v", round, i+1, err)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d clients held (%v); want exactly one", round, ok, errs)
		}
	}
}

// mkdirs creates path and its missing parents, persistent and without
// data.
func mkdirs(t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := conn.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}
