package recipe_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The reads and EnsurePath on a real server: results, errors in the
// engine's vocabulary, and the client's ACL on what EnsurePath makes.
func TestReadCalls(t *testing.T) {
	srv := zktest.Shared(t)
	acl := zk.DigestACL(zk.PermAll, "reader", "secret")
	c := zktest.Client(t, srv.Addr(), recipe.WithDigestAuth("reader", "secret"), recipe.WithACL(acl...))
	ctx := locktest.Ctx(t, 30*time.Second)
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.AddAuth("digest", []byte("reader:secret")); err != nil {
		t.Fatal(err)
	}
	// The test's own directory is open to the other tests on the server.
	top := zktest.UniquePath(t)
	if _, err := raw.Create(parentDir(top), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := raw.Create(top, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	base := top + "/base"

	if _, _, err := c.Get(ctx, base); !errors.Is(err, recipe.ErrNoNode) || !strings.Contains(err.Error(), base) {
		t.Errorf("Get of a missing node = %v, want ErrNoNode naming the path", err)
	}
	if ok, err := c.Exists(ctx, base); ok || err != nil {
		t.Errorf("Exists of a missing node = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.Children(ctx, base); !errors.Is(err, recipe.ErrNoNode) {
		t.Errorf("Children of a missing node = %v, want ErrNoNode", err)
	}

	deep := base + "/a/b/c"
	if err := c.EnsurePath(ctx, deep); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsurePath(ctx, deep); err != nil {
		t.Errorf("EnsurePath of an existing path = %v, want nil", err)
	}
	for _, p := range []string{base, base + "/a", base + "/a/b", deep} {
		got, st, err := raw.GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, acl) || st.EphemeralOwner != 0 {
			t.Errorf("%s: ACL %v, owner %#x; want the client's ACL %v on a persistent node", p, got, st.EphemeralOwner, acl)
		}
	}

	if _, err := raw.Set(deep, []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	data, version, err := c.Get(ctx, deep)
	if err != nil || string(data) != "v1" || version != 1 {
		t.Errorf("Get = %q, version %d, %v; want \"v1\", version 1", data, version, err)
	}
	if ok, err := c.Exists(ctx, deep); !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true, nil", ok, err)
	}
	for _, name := range []string{"z", "m", "a2"} {
		if _, err := raw.Create(base+"/a/"+name, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := c.Children(ctx, base+"/a"); err != nil || !slices.Equal(names, []string{"a2", "b", "m", "z"}) {
		t.Errorf("Children = %q, %v; want [a2 b m z] (sorted)", names, err)
	}
	if names, err := c.Children(ctx, "/"); err != nil || !slices.Contains(names, "zookeeper") {
		t.Errorf("Children of the root = %q, %v", names, err)
	}
}

// Bad input fails before any I/O, a closed client with ErrClosed, an
// ended context with its error.
func TestReadRefusals(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr())
	ctx := locktest.Ctx(t, 30*time.Second)
	before := c.Stats()
	var nilCtx context.Context
	for name, err := range map[string]error{
		"Get nil ctx":          second(c.Get(nilCtx, "/x")),
		"Get relative":         second(c.Get(ctx, "x")),
		"Exists trailing":      pick(c.Exists(ctx, "/x/")),
		"Children empty":       pick(c.Children(ctx, "")),
		"EnsurePath nil ctx":   c.EnsurePath(nilCtx, "/x"),
		"EnsurePath dot-dot":   c.EnsurePath(ctx, "/x/../y"),
		"EnsurePath reserved":  c.EnsurePath(ctx, "/zookeeper/x"),
		"Children nil context": pick(c.Children(nilCtx, "/")),
	} {
		if !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Errorf("bad input sent requests: %+v", d)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.Get(ended, "/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with an ended context = %v, want context.Canceled", err)
	}
	c.Close()
	if err := c.EnsurePath(ctx, "/x"); !errors.Is(err, recipe.ErrClosed) {
		t.Errorf("EnsurePath on a closed client = %v, want ErrClosed", err)
	}
}

// A read whose connection drops is retried under the client's policy.
func TestReadRetriesConnectionLoss(t *testing.T) {
	p := zktest.Shared(t).Proxy(t)
	c := p.Client(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	if err := c.EnsurePath(ctx, path); err != nil {
		t.Fatal(err)
	}
	p.DropNextRequest(zktest.OpGetData)
	if _, version, err := c.Get(ctx, path); err != nil || version != 0 {
		t.Errorf("Get across a dropped request = version %d, %v; want 0, nil", version, err)
	}
	p.LoseNextReply(zktest.OpCreate)
	if err := c.EnsurePath(ctx, path+"/child"); err != nil {
		t.Errorf("EnsurePath whose create reply was lost = %v, want nil", err)
	}
	if ok, err := c.Exists(ctx, path+"/child"); !ok || err != nil {
		t.Errorf("Exists after it = %v, %v", ok, err)
	}
	if c.Stats().Retries == 0 {
		t.Error("no retry counted")
	}
}

// A guarded create under a missing parent names the first missing parent
// and points to EnsurePath; once the parent is made, the same Commit
// applies.
func TestCommitNamesMissingParent(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr())
	ctx, h, _, base := commitSetup(t, c)
	result := base + "/missing/parent/result"
	_, err := h.Commit(ctx, recipe.SetData(base, []byte("x")), recipe.Create(result, []byte("r")))
	var oe *recipe.OpError
	if !errors.As(err, &oe) || oe.Index != 1 || !errors.Is(err, recipe.ErrNoNode) {
		t.Fatalf("Commit under a missing parent = %v, want an OpError of op 1 wrapping ErrNoNode", err)
	}
	t.Logf("the error: %v", err)
	for _, want := range []string{"parent " + base + "/missing does not exist", "EnsurePath"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := h.Err(); err != nil {
		t.Fatalf("the hold ended: %v", err)
	}
	if err := c.EnsurePath(ctx, base+"/missing/parent"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Commit(ctx, recipe.SetData(base, []byte("x")), recipe.Create(result, []byte("r"))); err != nil {
		t.Fatalf("Commit once the parent exists: %v", err)
	}
	// Other ops that find no node say nothing of parents.
	_, err = h.Commit(ctx, recipe.SetData(base+"/nothing", nil))
	if !errors.Is(err, recipe.ErrNoNode) || strings.Contains(err.Error(), "EnsurePath") {
		t.Errorf("SetData of a missing node = %v, want ErrNoNode without a word on parents", err)
	}
}

func parentDir(p string) string { return p[:strings.LastIndexByte(p, '/')] }

func second[A, B any](_ A, _ B, err error) error { return err }

func pick[A any](_ A, err error) error { return err }
