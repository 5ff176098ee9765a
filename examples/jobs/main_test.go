package main

import (
	"flag"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// Three workers do six jobs, each once, two at a time at most.
func TestJobs(t *testing.T) {
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t),
		"workers": "3", "jobs": "6", "slots": "2", "work": "20ms"} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
