package recipe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The reply to AcquireN's transaction is lost again and again: the nodes
// are found by their UUIDs, never created twice, and all are released.
func TestAcquireNLostReply(t *testing.T) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	c := locktest.Client(t, []string{proxy.Addr(), proxy.Addr()}, recipe.WithSessionTimeout(10*time.Second))
	path := zktest.UniquePath(t)
	leases, err := driver.Leases(3)
	if err != nil {
		t.Fatal(err)
	}
	l, err := recipe.NewLock(c, path, recipe.LockSpec{Recipe: "test", LockName: "lease-", Driver: leases}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Create the directories first, so that every cut below hits the
	// transaction rather than a directory's create.
	hs, err := l.AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		_ = h.Release(ctx)
	}
	proxy.CutAfterCreates(2)
	for i := range 10 {
		hs, err := l.AcquireN(ctx, 3)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		names, _, err := raw.Children(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 3 {
			t.Fatalf("round %d: directory holds %v, want exactly our 3 nodes", i, names)
		}
		for _, h := range hs {
			if err := h.Release(ctx); err != nil {
				t.Fatalf("round %d: release: %v", i, err)
			}
		}
	}
	if st := proxy.Stats(); st.Cuts == 0 {
		t.Fatalf("no transaction reply was lost (%+v)", st)
	}
	if got := c.Stats().Recovered; got == 0 {
		t.Fatal("no node was recovered by its UUID")
	}
	locktest.Eventually(t, 10*time.Second, "directory empty", func() bool {
		names, _, err := raw.Children(path)
		return err != nil || len(names) == 0 || !strings.HasPrefix(names[0], "_c_")
	})
}
