package boundedmutex_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/custom-recipe/boundedmutex"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// With one holder and one waiter ahead, a Lock allowed 2 ahead waits and a
// Lock allowed 1 ahead is refused at once, leaving no node; the queue then
// drains in order, and the library's mutex queues with the same nodes.
func TestBoundedQueue(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func() *recipe.Client {
		c, err := recipe.Connect(ctx, []string{srv.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	holder, err := mutex.New(client(), path) // the library's own mutex
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lock := func(maxAhead int) (<-chan *recipe.Hold, <-chan error) {
		m, err := boundedmutex.New(client(), path, maxAhead, nil)
		if err != nil {
			t.Fatal(err)
		}
		held, failed := make(chan *recipe.Hold, 1), make(chan error, 1)
		go func() {
			h, err := m.Lock(ctx)
			if err != nil {
				failed <- err
				return
			}
			held <- h
		}()
		return held, failed
	}
	firstHeld, firstFailed := lock(1) // one ahead: the holder
	queued(t, holder, 2)
	secondHeld, secondFailed := lock(2) // two ahead
	queued(t, holder, 3)

	_, refusedFailed := lock(1) // two ahead, only one allowed
	select {
	case err := <-refusedFailed:
		if !errors.Is(err, boundedmutex.ErrQueueFull) || !errors.Is(err, recipe.ErrNotAcquired) {
			t.Fatalf("refused Lock = %v, want ErrQueueFull and recipe.ErrNotAcquired", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Lock with a full queue did not fail")
	}
	if names, _, err := raw.Children(path); err != nil || len(names) != 3 {
		t.Fatalf("after the refusal the directory holds %q (%v), want 3 nodes", names, err)
	}

	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		held   <-chan *recipe.Hold
		failed <-chan error
	}{{firstHeld, firstFailed}, {secondHeld, secondFailed}} {
		select {
		case h := <-w.held:
			if h.Token() == 0 {
				t.Fatalf("waiter %d holds with no token", i)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case err := <-w.failed:
			t.Fatalf("waiter %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d never held", i)
		}
	}
}

// queued waits until n nodes are in line at m's path.
func queued(t *testing.T, m *mutex.Mutex, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ps, err := m.Participants(context.Background()); err == nil && len(ps) == n {
			return
		}
	}
	t.Fatalf("%d nodes never queued", n)
}

// The recipe is built from the public surface alone: it imports no
// internal package of the library, so it would compile in another module.
func TestNoInternalImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`,
		"github.com/zkrecipes/zkrecipes/examples/custom-recipe/boundedmutex").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/zkrecipes/zkrecipes/") && strings.Contains(dep, "/internal/") {
			t.Errorf("boundedmutex imports %s", dep)
		}
	}
}
