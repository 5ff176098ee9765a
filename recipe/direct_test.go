package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Direct requests (the listing and the delete of a lock cycle, written on
// the connection by the caller) answer as go-zookeeper's own requests do,
// while go-zookeeper's requests run between them on the same connection.
func TestDirectRequests(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithDirectRequests(true)) // whatever ZKRECIPES_DIRECT_REQUESTS says
	raw := zktest.Connect(t, srv.Addr())
	dir := zktest.UniquePath(t)
	mkdir(t, raw, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var want []string
	for i := range 50 {
		n := fmt.Sprintf("lock-%010d", i)
		if _, err := raw.Create(dir+"/"+n, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	var names []string
	err := directly(t, func() (ok bool, err error) {
		names, ok, err = recipe.DirectChildren(ctx, c, dir)
		return ok, err
	})
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Fatalf("listing %q, want %q", names, want)
	}
	if err := directly(t, func() (bool, error) {
		_, ok, err := recipe.DirectChildren(ctx, c, dir+"/missing")
		return ok, err
	}); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("listing a missing node: %v, want ErrNoNode", err)
	}
	if err := directly(t, func() (bool, error) { return recipe.DirectDelete(ctx, c, dir) }); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("deleting a node with children: %v, want ErrNotEmpty", err)
	}

	// Eight goroutines mix direct requests with go-zookeeper's on one
	// connection: every reply reaches its own caller, and every direct
	// request goes direct (a caller waits for its turn at the connection;
	// only a connection not set up sends the engine's Children and Delete
	// through go-zookeeper).
	var wg sync.WaitGroup
	var went atomic.Int64 // direct
	list := func() ([]string, error) {
		names, ok, err := recipe.DirectChildren(ctx, c, dir)
		if ok {
			went.Add(1)
			return names, err
		}
		return recipe.Children(ctx, c, dir)
	}
	del := func(path string) error {
		if ok, err := recipe.DirectDelete(ctx, c, path); ok {
			went.Add(1)
			return err
		}
		return recipe.DeleteNode(ctx, c, path)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				own := fmt.Sprintf("%s/own-%d-%d", dir, g, i)
				if _, err := c.Conn().Create(own, []byte(own), 0, zk.WorldACL(zk.PermAll)); err != nil {
					errs <- err
					return
				}
				names, err := list()
				if err != nil || !slices.Contains(names, own[len(dir)+1:]) {
					errs <- fmt.Errorf("listing after creating %s: %d names, %v", own, len(names), err)
					return
				}
				if data, _, err := c.Conn().Get(own); err != nil || string(data) != own {
					errs <- fmt.Errorf("get %s: %q, %v", own, data, err)
					return
				}
				if err := del(own); err != nil {
					errs <- fmt.Errorf("delete %s: %v", own, err)
					return
				}
				if err := del(own); !errors.Is(err, zk.ErrNoNode) {
					errs <- fmt.Errorf("second delete of %s: %v, want ErrNoNode", own, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if names, _, err := raw.Children(dir); err != nil || len(names) != len(want) {
		t.Fatalf("after the mix: %d children, %v; want %d", len(names), err, len(want))
	}
	if went.Load() != 8*50*3 {
		t.Fatalf("%d of %d requests of the mix went direct, want all", went.Load(), 8*50*3)
	}
}

// A direct request never outlives its context, whatever the connection
// does, and one whose connection fails returns with a connection loss;
// the next one goes on the new connection.
func TestDirectRequestFaults(t *testing.T) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(6*time.Second), recipe.WithDirectRequests(true))
	dir := zktest.UniquePath(t)
	mkdir(t, zktest.Connect(t, srv.Addr()), dir)
	// list makes a direct listing.
	list := func(limit time.Duration) (direct bool, took time.Duration, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		start := time.Now()
		_, direct, err = recipe.DirectChildren(ctx, c, dir)
		return direct, time.Since(start), err
	}
	if direct, _, err := list(5 * time.Second); err != nil || !direct {
		t.Fatalf("listing: direct %v, %v", direct, err)
	}

	proxy.Partition()
	direct, took, err := list(200 * time.Millisecond)
	if !direct || !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("listing while partitioned: direct %v, %v after %v; want the context's deadline", direct, err, took)
	}
	proxy.Heal()
	directAgain := func() {
		t.Helper()
		locktest.Eventually(t, 10*time.Second, "a direct listing", func() bool {
			direct, _, err := list(time.Second)
			return direct && err == nil
		})
	}
	directAgain()

	proxy.LoseNextReply(zktest.OpGetChildren)
	if direct, took, err := list(5 * time.Second); !direct || !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("listing whose reply is lost: direct %v, %v after %v; want a connection loss", direct, err, took)
	}
	directAgain()
	proxy.Arm(zktest.DropRequest, 1, zktest.OpDelete)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := directly(t, func() (bool, error) { return recipe.DirectDelete(ctx, c, dir+"/missing") }); !errors.Is(err, zk.ErrConnectionClosed) {
		t.Fatalf("delete whose request is dropped: %v, want a connection loss", err)
	}
	directAgain()
}

// A direct create makes the node go-zookeeper's Create would (its data, the
// client's ACL, ephemeral in the client's session), returns its name and
// its zxid, the node's czxid, and the listing and directory data read
// behind it in the same write see the node.
func TestDirectCreate(t *testing.T) {
	srv := zktest.Shared(t)
	acl := []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}, {Perms: zk.PermRead, Scheme: "ip", ID: "127.0.0.1"}}
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithACL(acl...), recipe.WithDirectRequests(true))
	raw := zktest.Connect(t, srv.Addr())
	dir := zktest.UniquePath(t)
	mkdir(t, raw, dir)
	if _, err := raw.Set(dir, []byte("max=3"), -1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		var (
			node    string
			zxid    int64
			names   []string
			dirData []byte
		)
		err := directly(t, func() (ok bool, err error) {
			node, zxid, names, dirData, ok, err = recipe.DirectCreate(ctx, c, dir+"/_c_x-lock-", dir, []byte("holder"), i > 0)
			return ok, err
		})
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		data, st, err := raw.Get(node)
		if err != nil {
			t.Fatalf("create %d made %q: %v", i, node, err)
		}
		if string(data) != "holder" || st.Czxid != zxid || st.EphemeralOwner != c.SessionID() {
			t.Fatalf("node %s: data %q, czxid %#x (reply's zxid %#x), owner %#x (session %#x)",
				node, data, st.Czxid, zxid, st.EphemeralOwner, c.SessionID())
		}
		if got, _, err := raw.GetACL(node); err != nil || !slices.Equal(got, acl) {
			t.Fatalf("node's ACL %v, %v; want %v", got, err, acl)
		}
		if len(names) != i+1 || !slices.Contains(names, node[len(dir)+1:]) {
			t.Fatalf("listing behind create %d: %q lacks %s", i, names, node)
		}
		if want := map[bool]string{false: "", true: "max=3"}[i > 0]; string(dirData) != want {
			t.Fatalf("directory data behind create %d: %q, want %q", i, dirData, want)
		}
	}
	if err := directly(t, func() (bool, error) {
		_, _, _, _, ok, err := recipe.DirectCreate(ctx, c, dir+"/missing/_c_x-lock-", dir+"/missing", nil, false)
		return ok, err
	}); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("create in a missing directory: %v, want ErrNoNode", err)
	}
}

// mkdir creates /zktest and dir in it.
func mkdir(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	for _, p := range []string{"/zktest", dir} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}

// directly makes a direct request with do, on a connection set up, and
// returns its error; the test fails if the request did not go direct.
func directly(t *testing.T, do func() (ok bool, err error)) error {
	t.Helper()
	ok, err := do()
	if !ok {
		t.Fatal("the request did not go direct")
	}
	return err
}
