package multilock_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Every held thing commits while it holds and answers with its own
// not-held sentinel once released; a set checks all its members in one
// transaction, which fails, naming the member, once one member's node is
// gone.
func TestCommitOnEveryHeldThing(t *testing.T) {
	srv := zktest.Shared(t)
	c1, c2 := zktest.Client(t, srv.Addr()), zktest.Client(t, srv.Addr())
	raw := zktest.Connect(t, srv.Addr())
	ctx := locktest.Ctx(t, 30*time.Second)
	base := zktest.UniquePath(t)
	state := base + "/state"
	for _, p := range []string{path.Dir(base), base} {
		if _, err := raw.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := raw.Create(state, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	m := newMutex(t, c1, base+"/m")
	rw := newRW(t, c1, base+"/rw")
	sem := check[*semaphore.Semaphore](t)(semaphore.New(c2, base+"/s", 2))
	el := check[*leader.Election](t)(leader.New(c2, base+"/l"))
	for _, tc := range []struct {
		name    string
		a       recipe.Acquirer
		notHeld error
	}{
		{"mutex", m, mutex.ErrNotHeld},
		{"rwlock writer", rw.Writer(), rwlock.ErrNotHeld},
		{"rwlock reader", rw.Reader(), rwlock.ErrNotHeld},
		{"semaphore lease", sem, semaphore.ErrNotHeld},
		{"leader term", el, leader.ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := check[recipe.Held](t)(tc.a.Take(ctx, true))
			res, err := h.Commit(ctx, recipe.SetData(state, []byte(tc.name)))
			if err != nil || len(res) != 1 || res[0].Version < 1 {
				t.Fatalf("Commit = %+v, %v", res, err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Commit(ctx, recipe.SetData(state, nil)); !errors.Is(err, tc.notHeld) || !errors.Is(err, recipe.ErrNotHeld) {
				t.Errorf("Commit after Release = %v, want %v", err, tc.notHeld)
			}
		})
	}
	if _, err := el.Commit(ctx); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("Election.Commit without a term = %v, want ErrNotLeader", err)
	}

	set := check[*multilock.Set](t)(multilock.New(m, sem, rw.Writer()))
	if _, err := set.Commit(ctx); !errors.Is(err, multilock.ErrNotHeld) {
		t.Errorf("Set.Commit before Lock = %v, want ErrNotHeld", err)
	}
	if err := set.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := c1.Stats()
	res, err := set.Commit(ctx, recipe.SetData(state, []byte("set")), recipe.Create(state+"/x", nil))
	if err != nil || len(res) != 2 || res[1].Path != state+"/x" {
		t.Fatalf("Set.Commit = %+v, %v", res, err)
	}
	if d := c1.Stats().Sub(before); d.Commits != 1 {
		t.Errorf("Set.Commit sent %d transactions, want 1", d.Commits)
	}
	_, err = set.Commit(ctx, recipe.Create(state+"/x", nil))
	var oe *recipe.OpError
	if !errors.As(err, &oe) || oe.Index != 0 || !errors.Is(err, recipe.ErrNodeExists) {
		t.Errorf("Set.Commit of an existing node = %v, want an OpError for op 0", err)
	}
	// Member 1 (the lease, on the other client) loses its node.
	leaseNode := sem.Path() + "/" + locktest.Children(t, raw, sem.Path())[0]
	if err := raw.Delete(leaseNode, -1); err != nil {
		t.Fatal(err)
	}
	_, err = set.Commit(ctx, recipe.SetData(state, []byte("late")))
	var me *multilock.MemberError
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, recipe.ErrLost) {
		t.Errorf("Set.Commit after member 1's node went = %v, want ErrLost for member 1", err)
	}
	if data, _, _ := raw.Get(state); string(data) != "set" {
		t.Errorf("state %q: a write landed after a member was lost", data)
	}
	_ = set.Unlock(ctx)
}
