package rwlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
)

func Example() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	rw, err := rwlock.New(c, "/locks/catalog")
	if err != nil {
		log.Fatal(err)
	}

	// Readers share the lock.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rw.RLock(rctx); err != nil {
		log.Fatal(err) // errors.Is(err, context.DeadlineExceeded) after 5s
	}
	fmt.Println("reading under token", rw.RToken())
	if err := rw.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}

	// A writer is alone; its token fences the stores it writes to.
	if err := rw.Lock(rctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("writing with token", rw.Token())

	// Downgrade: keep reading what was written, letting other readers in
	// but no writer.
	if err := rw.RLock(rctx); err != nil {
		log.Fatal(err)
	}
	if err := rw.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-rw.RDone():
		log.Fatal(rw.RErr()) // the read lock was lost
	default:
	}
	if err := rw.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}
}
