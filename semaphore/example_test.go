package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
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

// At most three processes talk to the database at once, whichever hosts
// they run on.
func Example() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := semaphore.New(c, "/examples/semaphore/db-connections", 3)
	if err != nil {
		log.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := s.Acquire(actx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Fatal("all three leases stayed busy for 5s")
	}
	if err != nil {
		log.Fatal(err)
	}

	select {
	case <-lease.Done():
		log.Fatal("lease lost before the work started: ", lease.Err())
	default:
	}
	// Work, passing lease.Token() to the systems written to.
	fmt.Println("working with one of", s.MaxLeases(), "leases; token > 0:", lease.Token() > 0)

	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", errors.Is(lease.Err(), semaphore.ErrNotHeld))
	// Output:
	// working with one of 3 leases; token > 0: true
	// released: true
}

// TryAcquire returns at once when every lease is taken.
func ExampleSemaphore_TryAcquire() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := semaphore.New(c, "/examples/semaphore/try", 1)
	if err != nil {
		log.Fatal(err)
	}

	first, err := s.TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.TryAcquire(ctx)
	switch {
	case errors.Is(err, semaphore.ErrNoLease):
		fmt.Println("busy, try later")
	case err != nil:
		log.Fatal(err)
	}
	_ = first.Release(ctx)
	// Output:
	// busy, try later
}

// AcquireN takes several leases at once, all or none.
func ExampleSemaphore_AcquireN() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := semaphore.New(c, "/examples/semaphore/acquire-n", 4)
	if err != nil {
		log.Fatal(err)
	}

	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leases, err := s.AcquireN(actx, 3) // a job that needs three slots
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leases held:", len(leases))
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// leases held: 3
}
