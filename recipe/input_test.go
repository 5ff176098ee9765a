package recipe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Node data too large for a ZooKeeper request is refused by every recipe's
// constructor, before any I/O; the other recipes on the client keep
// working. The limit follows WithMaxPacket.
func TestOversizedDataRefused(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	ctx := locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	held, err := mutex.New(c, path+"/held")
	must(t, err)
	must(t, held.Lock(ctx))
	// Asked for its loss signal, the hold watches its node (one read):
	// let that be done before counting.
	held.Done()
	locktest.Eventually(t, 10*time.Second, "the hold watching its node", func() bool {
		r, err := srv.FourLetter("wchp")
		return err == nil && strings.Contains(r, path+"/held/"+held.Node())
	})

	big := []byte(strings.Repeat("x", 1_200_000)) // above the default 0xfffff
	before := c.Stats()
	for name, build := range map[string]func() error{
		"mutex":     func() error { _, err := mutex.New(c, path+"/m", mutex.WithData(big)); return err },
		"rwlock":    func() error { _, err := rwlock.New(c, path+"/rw", rwlock.WithData(big)); return err },
		"semaphore": func() error { _, err := semaphore.New(c, path+"/s", 2, semaphore.WithData(big)); return err },
		"leader":    func() error { _, err := leader.New(c, path+"/l", leader.WithData(big)); return err },
	} {
		if err := build(); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s with 1.2 MB of data: %v, want ErrInvalidArgument", name, err)
		}
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Fatalf("refusing oversized data sent %d requests", d.RoundTrips())
	}
	if err := held.Err(); err != nil {
		t.Fatalf("the mutex held on the same client: %v", err)
	}
	s, err := semaphore.New(c, path+"/s2", 1, semaphore.WithData(big[:900_000]))
	must(t, err)
	l, err := s.Acquire(ctx) // just under the limit: fine
	must(t, err)
	must(t, l.Release(ctx))

	small := locktest.Client(t, []string{srv.Addr()}, recipe.WithMaxPacket(64*1024))
	if _, err := mutex.New(small, path+"/m", mutex.WithData(big[:100_000])); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("100 kB with a 64 kB limit: %v, want ErrInvalidArgument", err)
	}
}
