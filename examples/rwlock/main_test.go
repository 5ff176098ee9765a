package main

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// Readers share the lock, writers have it alone, no read is torn.
func TestReadersAndWriters(t *testing.T) {
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t),
		"readers": "3", "writers": "2", "reads": "4", "writes": "2", "line-time": "5ms"} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if mostReaders.Load() < 1 {
		t.Fatal("no reader was counted inside")
	}
}
