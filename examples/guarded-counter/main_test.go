package main

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

func runWith(t *testing.T, evict string) {
	t.Helper()
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t),
		"workers": "3", "increments": "4", "evict": evict} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	refused.Store(0)
	if err := run(); err != nil {
		t.Fatal(err)
	}
}

// Workers with sessions of their own count exactly under the mutex.
func TestCount(t *testing.T) {
	runWith(t, "false")
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d writes refused, want none", n)
	}
}

// A holder whose node was deleted between its read and its write commits
// nothing; it counts again, and the count is still exact.
func TestEvictedHolderRefused(t *testing.T) {
	runWith(t, "true")
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d writes refused, want the evicted holder's one", n)
	}
}
