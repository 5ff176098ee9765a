// Package shared shows a package of tests sharing one ZooKeeper server:
// TestMain starts none, the first zktest.Shared starts it, zktest.Main
// stops it after the last test, and each test works under a path of its
// own (zktest.UniquePath).
package shared

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// TestLocks is 20 tests, each with its own client and lock path, on the
// one shared server.
func TestLocks(t *testing.T) {
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			srv := zktest.Shared(t)
			client := zktest.Client(t, srv.Addr())
			m, err := mutex.New(client, zktest.UniquePath(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
