package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// exampleServers returns the address of the test server; in a program this
// is your ensemble, e.g. []string{"zk1:2181", "zk2:2181", "zk3:2181"}.
func exampleServers() []string {
	srv, err := zktest.SharedServer()
	if err != nil {
		log.Fatal(err)
	}
	return []string{srv.Addr()}
}

func Example() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	rw, err := rwlock.New(c, "/examples/rwlock/catalog")
	if err != nil {
		log.Fatal(err)
	}

	// Readers share the lock.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rw.RLock(rctx); err != nil {
		log.Fatal(err) // errors.Is(err, context.DeadlineExceeded) after 5s
	}
	fmt.Println("reading; read token > 0:", rw.Reader().Token() > 0)
	if err := rw.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}

	// A writer is alone; its token fences the stores it writes to.
	wctx, err := rw.Enter(rctx) // carries the write hold
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writing; write token > 0:", rw.Token() > 0)

	// Downgrade: keep reading what was written, letting other readers in
	// but no writer. The write hold's context lets the read lock in.
	if err := rw.RLock(wctx); err != nil {
		log.Fatal(err)
	}
	if err := rw.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-rw.Reader().Done():
		log.Fatal(rw.Reader().Err()) // the read lock was lost
	default:
	}
	fmt.Println("downgraded; still reading:", rw.Reader().Err() == nil)
	if err := rw.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// reading; read token > 0: true
	// writing; write token > 0: true
	// downgraded; still reading: true
	// released
}

// Readers share the lock; a writer can take it only when nobody holds it.
func ExampleRWLock_TryLock() {
	ctx := context.Background()
	a, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	reader, _ := rwlock.New(a, "/examples/rwlock/trylock")
	other, _ := rwlock.New(b, "/examples/rwlock/trylock")

	_ = reader.RLock(ctx)
	fmt.Println("second reader joins:", other.TryRLock(ctx) == nil)
	_ = other.RUnlock(ctx)
	fmt.Println("writer refused:", errors.Is(other.TryLock(ctx), rwlock.ErrLocked))

	_ = reader.RUnlock(ctx)
	fmt.Println("writer alone now:", other.TryLock(ctx) == nil)
	_ = other.Unlock(ctx)
	// Output:
	// second reader joins: true
	// writer refused: true
	// writer alone now: true
}
