package main

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// Workers with sessions of their own share two leases; no more than two
// ever work at once.
func TestPool(t *testing.T) {
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t),
		"workers": "4", "leases": "2", "rounds": "3", "work": "100ms"} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if most := mostBusy.Load(); most < 1 || most > 2 {
		t.Fatalf("%d workers busy at once, want 1 or 2", most)
	}
}
