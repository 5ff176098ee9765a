package boundedmutex_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/custom-recipe/boundedmutex"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// With one holder and one waiter ahead, a Lock allowed 2 ahead waits and a
// Lock allowed 1 ahead is refused at once, leaving no node; the queue then
// drains in order, and the library's mutex queues with the same nodes.
func TestBoundedQueue(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	client := func() *recipe.Client { return locktest.Client(t, []string{srv.Addr()}) }

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
	locktest.Queued(t, 2, holder.Participants)
	secondHeld, secondFailed := lock(2) // two ahead
	locktest.Queued(t, 3, holder.Participants)

	_, refusedFailed := lock(1) // two ahead, only one allowed
	select {
	case err := <-refusedFailed:
		if !errors.Is(err, boundedmutex.ErrQueueFull) || !errors.Is(err, recipe.ErrNotAcquired) {
			t.Fatalf("refused Lock = %v, want ErrQueueFull and recipe.ErrNotAcquired", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Lock with a full queue did not fail")
	}
	if got := len(locktest.Children(t, raw, path)); got != 3 {
		t.Fatalf("after the refusal the directory holds %d nodes, want 3", got)
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
