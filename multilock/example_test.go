package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
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

// Move stock between two warehouses: lock both (in whatever order they
// are named, the set takes them in one global order), read the catalog
// under its read lock, and take one of three connection leases.
func Example() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	to, _ := mutex.New(client, "/examples/multilock/warehouse-b")
	from, _ := mutex.New(client, "/examples/multilock/warehouse-a")
	catalog, _ := rwlock.New(client, "/examples/multilock/catalog")
	conns, _ := semaphore.New(client, "/examples/multilock/connections", 3)

	set, err := multilock.New(to, from, catalog.Reader(), conns)
	if err != nil {
		log.Fatal(err)
	}

	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := set.Lock(lockCtx); err != nil {
		// errors.Is(err, context.DeadlineExceeded) on timeout; nothing is held.
		var me *multilock.MemberError
		if errors.As(err, &me) {
			log.Fatalf("could not take %s: %v", me.Member, err)
		}
		log.Fatal(err)
	}
	for i, mb := range set.Members() {
		fmt.Printf("%s held, token > 0: %v\n", mb.Path(), set.Tokens()[i] > 0)
	}

	// Do the work, stopping if any member is lost.
	select {
	case <-set.Done():
		log.Fatal(set.Err()) // names the member lost
	default:
	}

	if err := set.Unlock(ctx); err != nil {
		log.Fatal(err) // every member's error, joined
	}
	fmt.Println("released all")
	// Output:
	// /examples/multilock/warehouse-b held, token > 0: true
	// /examples/multilock/warehouse-a held, token > 0: true
	// /examples/multilock/catalog held, token > 0: true
	// /examples/multilock/connections held, token > 0: true
	// released all
}

func ExampleSet_TryLock() {
	ctx := context.Background()
	a, _ := recipe.Connect(ctx, exampleServers())
	defer a.Close()
	b, _ := recipe.Connect(ctx, exampleServers())
	defer b.Close()

	holder, _ := mutex.New(a, "/examples/multilock/trylock/y")
	x, _ := mutex.New(b, "/examples/multilock/trylock/x")
	y, _ := mutex.New(b, "/examples/multilock/trylock/y")
	set, _ := multilock.New(x, y)

	_ = holder.Lock(ctx)
	err := set.TryLock(ctx)
	var me *multilock.MemberError
	fmt.Println("held elsewhere:", errors.Is(err, multilock.ErrLocked), errors.As(err, &me) && me.Index == 1)
	fmt.Println("x not kept:", x.Err() != nil)

	_ = holder.Unlock(ctx)
	fmt.Println("both free now:", set.TryLock(ctx) == nil)
	_ = set.Unlock(ctx)
	// Output:
	// held elsewhere: true true
	// x not kept: true
	// both free now: true
}
