package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// At most three processes talk to the database at once, whichever hosts
// they run on.
func Example() {
	ctx := context.Background()
	c, err := recipe.Connect(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := semaphore.New(c, "/pools/db-connections", 3)
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
	defer lease.Release(context.Background())

	select {
	case <-lease.Done():
		log.Fatal("lease lost before the work started: ", lease.Err())
	default:
	}
	fmt.Printf("working with lease %s, fencing token %d\n", lease.Node(), lease.Token())
}

// TryAcquire returns at once when every lease is taken.
func ExampleSemaphore_TryAcquire() {
	var s *semaphore.Semaphore // from semaphore.New
	lease, err := s.TryAcquire(context.Background())
	switch {
	case errors.Is(err, semaphore.ErrNoLease):
		fmt.Println("busy, try later")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lease.Release(context.Background())
	// ... work ...
}

// AcquireN takes several leases at once, all or none.
func ExampleSemaphore_AcquireN() {
	var s *semaphore.Semaphore // from semaphore.New(c, path, 4)
	leases, err := s.AcquireN(context.Background(), 3)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, l := range leases {
			l.Release(context.Background())
		}
	}()
	// ... a job that needs three slots ...
}
