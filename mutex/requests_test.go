package mutex_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The requests a lock cycle sends, from the clients' own counters (exact,
// not timed). Uncontended: create, list, delete. Contended by 8 sessions:
// at most 5 on average, 3 of them reads, as go-zookeeper's zk.Lock (which
// has no loss signal) spends: create, list, a watch on the predecessor,
// one listing after the wake-up, delete.
func TestRequestsPerCycle(t *testing.T) {
	srv := zktest.Shared(t)
	ctx := locktest.Ctx(t, 2*time.Minute)
	t.Run("uncontended", func(t *testing.T) {
		c := locktest.Client(t, []string{srv.Addr()})
		m, err := mutex.New(c, zktest.UniquePath(t))
		if err != nil {
			t.Fatal(err)
		}
		const cycles = 50
		if err := cycle(ctx, m); err != nil { // creates the directory
			t.Fatal(err)
		}
		before := c.Stats()
		for range cycles {
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		d := c.Stats().Sub(before)
		if d.Creates != cycles || d.Lists != cycles || d.Deletes != cycles || d.Reads != 0 || d.Retries != 0 {
			t.Fatalf("%d cycles sent %+v; want exactly one create, list and delete each", cycles, d)
		}
	})
	t.Run("contended", func(t *testing.T) {
		const sessions, cycles = 8, 40
		path := zktest.UniquePath(t)
		clients := make([]*recipe.Client, sessions)
		for i := range clients {
			clients[i] = locktest.Client(t, []string{srv.Addr()})
		}
		total := func() (s recipe.Stats) {
			for _, c := range clients {
				st := c.Stats()
				s.Creates, s.Deletes = s.Creates+st.Creates, s.Deletes+st.Deletes
				s.Lists, s.Reads, s.Retries = s.Lists+st.Lists, s.Reads+st.Reads, s.Retries+st.Retries
			}
			return s
		}
		warm, err := mutex.New(clients[0], path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cycle(ctx, warm); err != nil { // creates the directory
			t.Fatal(err)
		}
		before := total()
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for _, c := range clients {
			m, err := mutex.New(c, path)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for range cycles {
					if err := cycle(ctx, m); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		d := total().Sub(before)
		n := float64(sessions * cycles)
		perCycle, reads := float64(d.RoundTrips())/n, float64(d.Lists+d.Reads)/n
		t.Logf("%d contended cycles: %.3f requests, %.3f reads per cycle (%+v)", sessions*cycles, perCycle, reads, d)
		if d.Retries != 0 || perCycle > 5.0 || reads > 3.0 {
			t.Fatalf("%.3f requests and %.3f reads per contended cycle; want at most 5 and 3", perCycle, reads)
		}
	})
}

func cycle(ctx context.Context, m *mutex.Mutex) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(ctx)
}
