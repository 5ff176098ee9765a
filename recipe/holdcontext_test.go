package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A holder's request on the Client, made with the hold's context, returns
// within the loss timeout when a partition cuts the connection: the
// context ends when the loss is recorded, with the loss as its cause.
func TestHoldContextEndsCallsDuringPartition(t *testing.T) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	const session = 4 * time.Second
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(session))
	loss := session / 2 // the default loss timeout
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	h, err := newLock(t, c, path).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hctx, cancel := h.Context(context.Background())
	defer cancel()
	if _, _, err := c.Get(hctx, path); err != nil {
		t.Fatalf("Get before the partition: %v", err)
	}
	proxy.Partition()
	start := time.Now()
	// Keep asking until a request blocks on the dead connection (each
	// goes unanswered once the partition is in place).
	_, _, err = c.Get(hctx, path+"/"+h.Node())
	took := time.Since(start)
	if err == nil {
		t.Fatal("Get during the partition succeeded")
	}
	if took > loss+500*time.Millisecond {
		t.Fatalf("Get returned after %v, want within the loss timeout %v", took, loss)
	}
	cause := context.Cause(hctx)
	if !errors.Is(cause, recipe.ErrLost) || !errors.Is(cause, recipe.ErrConnectionSuspended) {
		t.Fatalf("cause %v, want ErrLost and ErrConnectionSuspended", cause)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v, want an error wrapping context.Canceled", err)
	}
	t.Logf("Get with the hold's context returned %v after the partition (loss timeout %v): %v", took.Round(time.Millisecond), loss, err)
	proxy.Heal()
}

// The context's cause is the hold's error: ErrNotHeld once released, the
// loss (ErrNodeDeleted) when another client deletes the node; a context
// asked for after the end is cancelled at once; the caller's cancel gives
// context.Canceled; the parent's end ends it.
func TestHoldContextCause(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	ctx := locktest.Ctx(t, 30*time.Second)
	l := newLock(t, c, zktest.UniquePath(t))

	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent, cancelParent := context.WithCancel(context.Background())
	fromParent, cancel1 := h.Context(parent)
	defer cancel1()
	own, cancelOwn := h.Context(context.Background())
	released, cancel2 := h.Context(context.Background())
	defer cancel2()
	cancelParent()
	<-fromParent.Done()
	cancelOwn()
	if got := context.Cause(own); got != context.Canceled {
		t.Fatalf("cause after cancel = %v, want context.Canceled", got)
	}
	if err := released.Err(); err != nil {
		t.Fatalf("context ended while held: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-released.Done()
	if got := context.Cause(released); !errors.Is(got, recipe.ErrNotHeld) {
		t.Fatalf("cause after Release = %v, want ErrNotHeld", got)
	}
	after, cancel3 := h.Context(context.Background())
	defer cancel3()
	if got := context.Cause(after); !errors.Is(got, recipe.ErrNotHeld) {
		t.Fatalf("context of a released hold: cause %v, want ErrNotHeld at once", got)
	}

	h, err = l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted, cancel4 := h.Context(context.Background())
	defer cancel4()
	// The context asks for the watch: wait until the read set it.
	locktest.Eventually(t, 5*time.Second, "the node watched", func() bool {
		return c.Stats().Reads > 0
	})
	time.Sleep(100 * time.Millisecond)
	if err := raw.Delete(l.Path()+"/"+h.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled after the node was deleted")
	}
	if got := context.Cause(deleted); !errors.Is(got, recipe.ErrLost) || !errors.Is(got, recipe.ErrNodeDeleted) {
		t.Fatalf("cause after deletion = %v, want ErrLost and ErrNodeDeleted", got)
	}
	if !errors.Is(h.Err(), recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v", h.Err())
	}
	_ = h.Release(ctx)
}

// Holds asked for their loss signal and their contexts start no
// goroutine: the client's one dispatch of node events serves them all,
// and a deletion still reaches each.
func TestHoldContextNoGoroutinePerHold(t *testing.T) {
	const n = 200
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	raw := zktest.Connect(t, srv.Addr())
	ctx := locktest.Ctx(t, 60*time.Second)
	base := zktest.UniquePath(t)
	holds := make([]*recipe.Hold, n)
	paths := make([]string, n)
	for i := range holds {
		l := newLock(t, c, fmt.Sprintf("%s/l%03d", base, i))
		h, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds[i], paths[i] = h, l.Path()+"/"+h.Node()
	}
	reads := c.Stats().Reads
	before := runtime.NumGoroutine()
	ctxs := make([]context.Context, n)
	for i, h := range holds {
		var cancel context.CancelFunc
		ctxs[i], cancel = h.Context(ctx)
		defer cancel()
		h.Done()
	}
	locktest.Eventually(t, 10*time.Second, "every hold watching its node", func() bool {
		return c.Stats().Reads-reads >= n
	})
	var grown int
	locktest.Eventually(t, 5*time.Second, "the reads' goroutines ended", func() bool {
		grown = runtime.NumGoroutine() - before
		return grown <= 5 // the dispatcher, and idle request workers
	})
	for i := range holds {
		if err := raw.Delete(paths[i], -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctxs[i].Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("hold %d: context not cancelled after its node was deleted", i)
		}
		if !errors.Is(context.Cause(ctxs[i]), recipe.ErrNodeDeleted) {
			t.Fatalf("hold %d: cause %v", i, context.Cause(ctxs[i]))
		}
	}
}
