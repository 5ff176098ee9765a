package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
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
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	m, err := mutex.New(client, "/examples/mutex/orders")
	if err != nil {
		log.Fatal(err)
	}

	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Lock(lockCtx); err != nil {
		log.Fatal(err) // errors.Is(err, context.DeadlineExceeded) on timeout
	}
	fmt.Println("holding the lock; token > 0:", m.Token() > 0)

	// Do the work, stopping if the lock is lost, and hand m.Token() to the
	// systems written to so that they can reject a stale holder.
	select {
	case <-m.Done():
		log.Fatal(m.Err())
	default:
	}

	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// holding the lock; token > 0: true
	// released
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	a, _ := recipe.Connect(ctx, exampleServers())
	defer a.Close()
	b, _ := recipe.Connect(ctx, exampleServers())
	defer b.Close()

	holder, _ := mutex.New(a, "/examples/mutex/trylock")
	other, _ := mutex.New(b, "/examples/mutex/trylock")

	_ = holder.Lock(ctx)
	err := other.TryLock(ctx)
	fmt.Println("held elsewhere:", errors.Is(err, mutex.ErrLocked))

	_ = holder.Unlock(ctx)
	fmt.Println("free now:", other.TryLock(ctx) == nil)
	_ = other.Unlock(ctx)
	// Output:
	// held elsewhere: true
	// free now: true
}

// ParticipantNodes lists the queue in one request however long it is:
// enough to count it and find who holds. Participants also reads each
// node's data, session and token, a request per node.
func ExampleMutex_ParticipantNodes() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	m, err := mutex.New(client, "/examples/mutex/queue")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	nodes, err := m.ParticipantNodes(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for i, n := range nodes {
		fmt.Printf("%d: %s holds: %v, ours: %v\n", i, n.LockName, n.Holder, n.Node == m.Node())
	}
	// Output:
	// 0: lock- holds: true, ours: true
}

// A holder that may hang (a stuck call, a deadlocked worker) bounds how
// long it can keep others waiting: after WithMaxHold's limit the library
// deletes its node, the next in line proceeds, and the holder is told.
func ExampleWithMaxHold() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	m, err := mutex.New(client, "/examples/mutex/max-hold", mutex.WithMaxHold(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	<-m.Done() // a worker that never finished: the limit ends the hold
	fmt.Println("lost:", errors.Is(m.Err(), mutex.ErrLost))
	fmt.Println("max hold exceeded:", errors.Is(m.Err(), recipe.ErrMaxHoldExceeded))
	_ = m.Unlock(ctx) // forgets the lost hold; deletes nothing
	// Output:
	// lost: true
	// max hold exceeded: true
}

// An operator (or another service) asks the holder of a revocable mutex to
// let go; the holder decides when. Curator's Revoker and revocation
// listeners speak the same protocol.
func ExampleRevoke() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	const path = "/examples/mutex/revocable"
	m, err := mutex.New(client, path, mutex.WithRevocable())
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	// Elsewhere: ask whoever holds the node to let go.
	if err := mutex.Revoke(ctx, client, path, m.Node()); err != nil {
		log.Fatal(err)
	}

	select {
	case <-m.Revoked():
		fmt.Println("asked to let go: finishing up and unlocking")
	case <-time.After(10 * time.Second):
		fmt.Println("never asked")
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// asked to let go: finishing up and unlocking
}

// With recipe.WithSuspensionTolerance, a silence past the loss timeout
// suspends the lock instead of losing it: the holder stops at Suspended and
// goes on at Resumed, if the same session answers and still owns the node.
func ExampleMutex_Suspended() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers(), recipe.WithSuspensionTolerance())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	m, err := mutex.New(client, "/examples/mutex/suspension")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	jobs := make(chan int, 3)
	for i := range 3 {
		jobs <- i
	}
	close(jobs)
	done := 0
	for job := range jobs {
		select {
		case <-m.Suspended():
			// Stop acting as holder until the suspension is over.
			select {
			case <-m.Resumed():
			case <-m.Done():
				log.Fatal(m.Err()) // lost: stop for good
			}
		case <-m.Done():
			log.Fatal(m.Err())
		default:
		}
		_ = job // do the job, fenced with m.Token()
		done++
	}
	fmt.Println("jobs done:", done)
	// Output:
	// jobs done: 3
}
