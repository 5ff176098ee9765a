package recipe_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The outcome of each plain write whose reply was lost (the server applied
// it, the connection dropped before the reply came): the retry resolves it
// to what was applied, once.
func TestWritesAfterLostReply(t *testing.T) {
	p := zktest.Shared(t).Proxy(t)
	c := p.Client(t, recipe.WithSessionTimeout(10*time.Second))
	raw := zktest.Connect(t, zktest.Shared(t).Addr())
	ctx := locktest.Ctx(t, 60*time.Second)
	base := zktest.UniquePath(t)
	if err := c.EnsurePath(ctx, base); err != nil {
		t.Fatal(err)
	}
	node := base + "/config"
	data := func(path string) ([]byte, int32) {
		t.Helper()
		d, st, err := raw.Get(path)
		if err != nil {
			t.Fatalf("get %s: %v", path, err)
		}
		return d, st.Version
	}

	t.Run("create finds its node", func(t *testing.T) {
		p.LoseNextReply(zktest.OpCreate)
		before := c.Stats()
		if err := c.Create(ctx, node, []byte("v0")); err != nil {
			t.Fatalf("Create whose reply was lost = %v, want nil (the node it made)", err)
		}
		if d := c.Stats().Sub(before); d.Creates != 2 || d.Retries < 1 {
			t.Errorf("sent %+v; want the create and one retry", d)
		}
		if d, v := data(node); string(d) != "v0" || v != 0 {
			t.Fatalf("node %q version %d, want %q version 0", d, v, "v0")
		}
		if err := c.Create(ctx, node, []byte("v0")); !errors.Is(err, recipe.ErrNodeExists) {
			t.Fatalf("Create of an existing node, no reply lost = %v, want ErrNodeExists", err)
		}
	})

	t.Run("create finds another's node", func(t *testing.T) {
		theirs := base + "/theirs"
		if _, err := raw.Create(theirs, []byte("theirs"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		p.LoseNextReply(zktest.OpCreate)
		if err := c.Create(ctx, theirs, []byte("ours")); !errors.Is(err, recipe.ErrNodeExists) {
			t.Fatalf("Create over another's node, reply lost = %v, want ErrNodeExists", err)
		}
		if d, _ := data(theirs); string(d) != "theirs" {
			t.Fatalf("their node now holds %q", d)
		}
	})

	t.Run("versioned set", func(t *testing.T) {
		p.LoseNextReply(zktest.OpSetData)
		before := c.Stats()
		v, err := c.Set(ctx, node, []byte("v1"), 0)
		if err != nil || v != 1 {
			t.Fatalf("Set(version 0) whose reply was lost = %d, %v; want 1, nil", v, err)
		}
		if d := c.Stats().Sub(before); d.Writes != 2 || d.Reads != 1 {
			t.Errorf("sent %+v; want two writes (the second refused) and one read back", d)
		}
		if d, v := data(node); string(d) != "v1" || v != 1 {
			t.Fatalf("node %q version %d, want %q version 1 (applied once)", d, v, "v1")
		}
		if _, err := c.Set(ctx, node, []byte("stale"), 0); !errors.Is(err, recipe.ErrVersionMismatch) {
			t.Fatalf("Set against a stale version = %v, want ErrVersionMismatch", err)
		}
	})

	t.Run("set at any version", func(t *testing.T) {
		p.LoseNextReply(zktest.OpSetData)
		v, err := c.Set(ctx, node, []byte("v2"), recipe.AnyVersion)
		if err != nil || v != 3 {
			t.Fatalf("Set(AnyVersion) whose reply was lost = %d, %v; want 3 (applied twice), nil", v, err)
		}
		if d, _ := data(node); string(d) != "v2" {
			t.Fatalf("node %q, want %q", d, "v2")
		}
	})

	t.Run("versioned delete", func(t *testing.T) {
		p.LoseNextReply(zktest.OpDelete)
		before := c.Stats()
		if err := c.Delete(ctx, node, 3); err != nil {
			t.Fatalf("Delete(version 3) whose reply was lost = %v, want nil", err)
		}
		if d := c.Stats().Sub(before); d.Deletes != 2 {
			t.Errorf("sent %+v; want the delete and one retry", d)
		}
		if ok, _, err := raw.Exists(node); ok || err != nil {
			t.Fatalf("node still there (%v, %v)", ok, err)
		}
		if err := c.Delete(ctx, node, recipe.AnyVersion); !errors.Is(err, recipe.ErrNoNode) {
			t.Fatalf("Delete of a missing node, no reply lost = %v, want ErrNoNode", err)
		}
	})
}

// Writes check their input before any I/O, and a context that has ended
// sends nothing.
func TestWritesRefuseBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithMaxPacket(4096))
	ctx := locktest.Ctx(t, 30*time.Second)
	base := zktest.UniquePath(t)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	var nilCtx context.Context // refused, not dereferenced
	locktest.Settle(t, c)
	before := c.Stats()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"nil ctx", c.Create(nilCtx, base, nil), recipe.ErrInvalidArgument},
		{"relative path", c.Create(ctx, "rel", nil), recipe.ErrInvalidPath},
		{"root", c.Delete(ctx, "/", recipe.AnyVersion), recipe.ErrInvalidArgument},
		{"too large", c.Create(ctx, base, bytes.Repeat([]byte("x"), 8192)), recipe.ErrInvalidArgument},
		{"negative version", func() error { _, err := c.Set(ctx, base, nil, -2); return err }(), recipe.ErrInvalidArgument},
		{"ended ctx", c.Delete(ended, base, recipe.AnyVersion), context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("got %v, want %v", tc.err, tc.want)
			}
			if errors.Is(tc.err, recipe.ErrCommitUnknown) {
				t.Fatalf("got %v: nothing was sent, so the outcome is known", tc.err)
			}
		})
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Fatalf("refused writes made %d round trips", d.RoundTrips())
	}
}
