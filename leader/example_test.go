package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
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

	e, err := leader.New(client, "/examples/leader/campaign", leader.WithData([]byte("worker-1")))
	if err != nil {
		log.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.Campaign(cctx); err != nil {
		log.Fatal(err) // errors.Is(err, context.DeadlineExceeded) on timeout
	}
	fmt.Println("leading; token > 0:", e.Token() > 0)

	// Anyone can ask who leads.
	info, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", string(info.Data))

	// Work while leading, stopping if leadership is lost; pass e.Token()
	// to the systems written to.
	select {
	case <-e.Done():
		log.Fatal(e.Err())
	default:
	}

	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = e.Leader(ctx)
	fmt.Println("no leader now:", errors.Is(err, leader.ErrNoLeader))
	// Output:
	// leading; token > 0: true
	// leader: worker-1
	// no leader now: true
}

func ExampleElection_Run() {
	client, err := recipe.Connect(context.Background(), exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	e, err := leader.New(client, "/examples/leader/run", leader.WithData([]byte("worker-1")))
	if err != nil {
		log.Fatal(err)
	}

	// A service runs until it is told to stop; here it stops itself.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	err = e.Run(ctx, func(ctx context.Context) error {
		fmt.Println("leading as", e.ID())
		// The leader's work goes here, until ctx is cancelled: when
		// leadership is lost, when the service stops, or on Resign.
		stop()
		<-ctx.Done()
		fmt.Println("term over:", context.Cause(ctx))
		return nil
	})
	fmt.Println("Run returned:", err)
	// Output:
	// leading as worker-1
	// term over: context canceled
	// Run returned: context canceled
}

func ExampleElection_Observe() {
	ctx := context.Background()
	const path = "/examples/leader/observe"
	connect := func() *recipe.Client {
		c, err := recipe.Connect(ctx, exampleServers())
		if err != nil {
			log.Fatal(err)
		}
		return c
	}
	a, b, o := connect(), connect(), connect()
	defer a.Close()
	defer b.Close()
	defer o.Close()
	alpha, _ := leader.New(a, path, leader.WithData([]byte("alpha")))
	beta, _ := leader.New(b, path, leader.WithData([]byte("beta")))
	watcher, _ := leader.New(o, path) // takes no part

	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes, err := watcher.Observe(octx)
	if err != nil {
		panic(err)
	}

	if err := alpha.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", string((<-changes).Data))

	elected := make(chan error)
	go func() { elected <- beta.Campaign(ctx) }()
	for p, _ := watcher.Participants(ctx); len(p) < 2; p, _ = watcher.Participants(ctx) {
		time.Sleep(10 * time.Millisecond) // until beta is in line
	}
	if err := alpha.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-elected; err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", string((<-changes).Data))
	_ = beta.Resign(ctx)
	// Output:
	// leader: alpha
	// leader: beta
}

func ExampleElection_Proclaim() {
	ctx := context.Background()
	const path = "/examples/leader/proclaim"
	a, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	o, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close()
	e, _ := leader.New(a, path, leader.WithData([]byte("worker-1")))
	watcher, _ := leader.New(o, path) // takes no part

	changes, err := watcher.Observe(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", string((<-changes).Data))

	// The leader tells everyone where it serves: one write, which lands
	// only while this term lasts.
	if err := e.Proclaim(ctx, []byte("worker-1 at 10.0.0.7:8080")); err != nil {
		log.Fatal(err) // errors.Is(err, leader.ErrLost) once the term is lost
	}
	fmt.Println("leader:", string((<-changes).Data))
	_ = e.Resign(ctx)
	// Output:
	// leader: worker-1
	// leader: worker-1 at 10.0.0.7:8080
}
