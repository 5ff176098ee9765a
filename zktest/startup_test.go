package zktest_test

import (
	"errors"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// The start-up benchmarks time how long a test waits for its servers
// (docs/testing.md quotes them). Stopping them is not timed.
//
//	go test -run '^$' -bench Startup -benchtime 1x -count 5 ./zktest/

func BenchmarkStartupServer(b *testing.B) {
	for range b.N {
		srv, err := zktest.NewServer()
		skipOrFail(b, err)
		b.StopTimer()
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkStartupEnsemble3(b *testing.B) {
	for range b.N {
		ens, err := zktest.NewEnsemble(3)
		skipOrFail(b, err)
		b.StopTimer()
		if err := ens.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func skipOrFail(b *testing.B, err error) {
	b.Helper()
	if errors.Is(err, zktest.ErrNotInstalled) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
}
