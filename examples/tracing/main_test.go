package main

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// The second client times out behind the first, then waits and acquires.
func TestTracing(t *testing.T) {
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t), "hold": "50ms"} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
