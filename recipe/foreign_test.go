package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// kazooPrefix is the name kazoo gives its lock nodes before the lock name:
// a UUID as 32 hex digits.
func kazooPrefix() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }

// foreignChild is a child another library leaves in a lock directory,
// made over a raw connection of its own; make returns its name.
type foreignChild struct {
	name string
	make func(t *testing.T, conn *zk.Conn, dir string) string
}

var foreignChildren = []foreignChild{
	{"kazoo-rlock", sequential(func() string { return kazooPrefix() + "__rlock__" })}, // kazoo's ReadLock
	{"unknown-sequential", sequential(func() string { return "member-" })},            // some other recipe's
	{"curator-leases", persistent("leases")},                                          // Curator's InterProcessSemaphoreV2
	{"curator-locks", persistent("locks")},
	{"kazoo-semaphore-lease", func(t *testing.T, conn *zk.Conn, dir string) string { return persistent(kazooPrefix())(t, conn, dir) }}, // kazoo's Semaphore
}

// kazooLock is kazoo's Lock, WriteLock and Election node: a contender of
// the mutex, refused by every other recipe.
var kazooLock = foreignChild{"kazoo-lock", sequential(func() string { return kazooPrefix() + "__lock__" })}

// sequential makes an ephemeral sequential child named prefix().
func sequential(prefix func() string) func(t *testing.T, conn *zk.Conn, dir string) string {
	return func(t *testing.T, conn *zk.Conn, dir string) string {
		t.Helper()
		ensureDir(t, conn, dir)
		p, err := conn.Create(dir+"/"+prefix(), []byte("foreign"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatalf("create in %s: %v", dir, err)
		}
		return p[len(dir)+1:]
	}
}

// persistent makes a persistent child named name.
func persistent(name string) func(t *testing.T, conn *zk.Conn, dir string) string {
	return func(t *testing.T, conn *zk.Conn, dir string) string {
		t.Helper()
		ensureDir(t, conn, dir)
		if _, err := conn.Create(dir+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s/%s: %v", dir, name, err)
		}
		t.Cleanup(func() { _ = conn.Delete(dir+"/"+name, -1) })
		return name
	}
}

// ensureDir creates dir and its parents as persistent nodes.
func ensureDir(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		_, err := conn.Create(dir[:i], nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", dir[:i], err)
		}
	}
}

// exclusive names, for each recipe of the matrix, the lock name of a node
// that makes its acquire wait (a write for a reader).
var exclusive = map[string]string{
	"mutex": "lock-", "rwlock.write": "write-", "rwlock.read": "write-",
	"semaphore": "lease-", "leader": "latch-", "handle": "lock-",
}

// checkRefused checks that err is a refusal because of node: recipe's
// ErrMismatch, the engine's and the recipe's not-acquired sentinels, and
// the node's name.
func checkRefused(t *testing.T, what string, err error, h handle, node string) {
	t.Helper()
	if !errors.Is(err, recipe.ErrMismatch) || !errors.Is(err, recipe.ErrNotAcquired) || !errors.Is(err, h.sentinels[0]) {
		t.Fatalf("%s = %v, want recipe.ErrMismatch, recipe.ErrNotAcquired and %v", what, err, h.sentinels[0])
	}
	if !strings.Contains(err.Error(), node) {
		t.Errorf("%s = %v: does not name %s", what, err, node)
	}
}

// A lock directory holding a node no recipe of ours can order (kazoo's,
// an unknown sequential name, Curator's or kazoo's semaphore layout) makes every
// acquire fail with ErrMismatch naming it, whether the node came before
// our node or after it, and nothing of ours is left behind.
func TestForeignNodesRefused(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, name := range []string{"mutex", "rwlock.read", "rwlock.write", "semaphore", "leader", "handle"} {
		children := foreignChildren
		if name != "mutex" {
			children = append(slices.Clip(children), kazooLock)
		}
		for _, fc := range children {
			t.Run(name+"/"+fc.name+"/before", func(t *testing.T) {
				path := zktest.UniquePath(t)
				node := fc.make(t, raw, path)
				h := kinds[name](t, locktest.Client(t, []string{srv.Addr()}), path)
				ctx := locktest.Ctx(t, 30*time.Second)
				checkRefused(t, "acquire", h.acquire(ctx), h, node)
				checkRefused(t, "try", h.try(ctx), h, node)
				if left := locktest.Children(t, raw, path); !slices.Equal(left, []string{node}) {
					t.Errorf("directory holds %v, want only %s", left, node)
				}
			})
			t.Run(name+"/"+fc.name+"/after", func(t *testing.T) {
				// Two nodes of ours ahead, then our waiter; the foreign
				// node comes after the waiter's, and the waiter sees it
				// when it lists again after the second node goes.
				path := zktest.UniquePath(t)
				ahead := sequential(func() string { return "_c_" + uuid.NewString() + "-" + exclusive[name] })
				first, second := ahead(t, raw, path), ahead(t, raw, path)
				h := kinds[name](t, locktest.Client(t, []string{srv.Addr()}), path)
				ctx := locktest.Ctx(t, 30*time.Second)
				done := make(chan error, 1)
				go func() { done <- h.acquire(ctx) }()
				locktest.Eventually(t, 10*time.Second, "the waiter's node", func() bool {
					return len(locktest.Children(t, raw, path)) == 3
				})
				time.Sleep(50 * time.Millisecond) // the waiter has listed and watches
				node := fc.make(t, raw, path)
				if err := raw.Delete(path+"/"+second, -1); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					checkRefused(t, "acquire", err, h, node)
				case <-time.After(20 * time.Second):
					t.Fatal("the waiter neither refused nor returned")
				}
				want := []string{first, node}
				slices.Sort(want)
				locktest.Eventually(t, 5*time.Second, fmt.Sprintf("only %v left", want), func() bool {
					return slices.Equal(locktest.Children(t, raw, path), want)
				})
			})
		}
	}
}

// Nodes of our own kinds created after ours keep the old rule: the
// newcomer is ours, sees our node and backs off, so the earlier acquire
// goes on. Children that are not lock nodes are left alone.
func TestOwnKindsAfterOursAndUnrelatedChildren(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	persistent("config")(t, raw, path)
	persistent("shard-123456789")(t, raw, path)
	ahead := sequential(func() string { return "_c_" + uuid.NewString() + "-lock-" })
	first, second := ahead(t, raw, path), ahead(t, raw, path)
	m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
	must(t, err)
	ctx := locktest.Ctx(t, 30*time.Second)
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	locktest.Queued(t, 3, m.Participants)
	time.Sleep(50 * time.Millisecond) // the waiter has listed and watches
	latch := sequential(func() string { return "_c_" + uuid.NewString() + "-latch-" })(t, raw, path)
	must(t, raw.Delete(path+"/"+second, -1)) // the waiter lists again and sees the latch node
	select {
	case err := <-done:
		t.Fatalf("Lock returned while %s holds: %v", first, err)
	case <-time.After(300 * time.Millisecond):
	}
	must(t, raw.Delete(path+"/"+first, -1))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Lock still waits after the nodes ahead went")
	}
	must(t, raw.Delete(path+"/"+latch, -1))
	must(t, m.Unlock(ctx))
}

// kazoo's Lock nodes ("<hex>__lock__<sequence>") and ours form one queue,
// ordered by sequence number: a kazoo holder makes TryLock fail with
// ErrLocked and Lock wait; Participants lists it; a kazoo node behind ours
// waits.
func TestKazooLockNodesQueueWithMutex(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	kazoo := kazooLock.make(t, raw, path)
	m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path, mutex.WithData([]byte("go")))
	must(t, err)
	ctx := locktest.Ctx(t, 30*time.Second)
	if err := m.TryLock(ctx); !errors.Is(err, mutex.ErrLocked) || !errors.Is(err, recipe.ErrWouldBlock) {
		t.Fatalf("TryLock while kazoo holds = %v, want mutex.ErrLocked", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	locktest.Queued(t, 2, m.Participants)
	later := kazooLock.make(t, raw, path) // behind our waiter
	ps, err := m.Participants(ctx)
	must(t, err)
	got := make([]string, len(ps))
	for i, p := range ps {
		got[i] = fmt.Sprintf("%s %s %v", p.Data, p.LockName, p.Holder)
	}
	if want := []string{"foreign __lock__ true", "go lock- false", "foreign __lock__ false"}; !slices.Equal(got, want) {
		t.Errorf("Participants = %q, want %q", got, want)
	}
	if ps[0].Node != kazoo || ps[2].Node != later || ps[0].Sequence >= ps[1].Sequence || ps[1].Sequence >= ps[2].Sequence {
		t.Errorf("Participants %+v: want %s, ours, %s by sequence", ps, kazoo, later)
	}
	select {
	case err := <-done:
		t.Fatalf("Lock returned while kazoo holds: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	must(t, raw.Delete(path+"/"+kazoo, -1))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Lock still waits after kazoo's node went")
	}
	must(t, m.Unlock(context.Background()))
}
