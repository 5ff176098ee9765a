// Command semaphore shows a pool of workers bounded by one zkrecipes
// semaphore: however many workers there are, at most -leases of them work
// at once, first come, first served.
//
// Each worker has a ZooKeeper session of its own, as separate processes
// would (start the program several times with the same -path to see
// processes share the pool). -rounds times, a worker takes a lease, works
// for a random time, stopping at once if the lease is lost (Done), and
// releases it. The program counts the workers busy at once and exits
// non-zero if that ever exceeds -leases.
//
//	go run ./examples/semaphore -zk 127.0.0.1:21811 -workers 6 -leases 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

var (
	servers = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path    = flag.String("path", "/examples/semaphore", "ZooKeeper path of the semaphore")
	workers = flag.Int("workers", 6, "workers, each with its own session")
	leases  = flag.Int("leases", 2, "leases: how many workers may work at once")
	rounds  = flag.Int("rounds", 4, "pieces of work per worker, one lease each")
	maxWork = flag.Duration("work", 300*time.Millisecond, "longest piece of work")
)

var busy, mostBusy atomic.Int64 // workers holding a lease now, and at most

func main() {
	flag.Parse()
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Printf("semaphore: %d workers x %d pieces of work, %d leases at %s on %s\n", *workers, *rounds, *leases, *path, *servers)
	errs := make([]error, *workers+1)
	var wg sync.WaitGroup
	for n := 1; n <= *workers; n++ {
		wg.Go(func() {
			if errs[n] = worker(ctx, n); errs[n] != nil {
				errs[n] = fmt.Errorf("worker %d: %w", n, errs[n])
				cancel() // stop the others
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if most := mostBusy.Load(); most > int64(*leases) {
		return fmt.Errorf("FAIL: %d workers were busy at once, %d allowed", most, *leases)
	}
	fmt.Printf("ok: %d pieces of work, never more than %d at once\n", *workers**rounds, mostBusy.Load())
	return nil
}

func worker(ctx context.Context, n int) error {
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := semaphore.New(c, *path, *leases, semaphore.WithData(fmt.Appendf(nil, "worker %d pid %d", n, os.Getpid())))
	if err != nil {
		return err
	}
	for range *rounds {
		begin := time.Now()
		lease, err := s.Acquire(ctx)
		if errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			return fmt.Errorf("%w (the path was set up with another -leases: use another -path)", err)
		} else if err != nil {
			return err
		}
		now := busy.Add(1) // counted inside the lease: from after Acquire to before Release
		for most := mostBusy.Load(); now > most && !mostBusy.CompareAndSwap(most, now); most = mostBusy.Load() {
		}
		waiting := -1
		if ps, err := s.Participants(ctx); err == nil {
			waiting = max(len(ps)-*leases, 0)
		}
		fmt.Printf("worker %d  lease token=%#x  %d/%d busy  %d waiting  waited %v\n",
			n, lease.Token(), now, *leases, waiting, time.Since(begin).Round(time.Millisecond))

		// The work. A real worker would send lease.Token() with every write
		// it makes, so that storage can refuse it once the lease is lost.
		select {
		case <-time.After(rand.N(*maxWork) + 1):
		case <-lease.Done(): // lost: session expired, or the connection suspended too long
			busy.Add(-1)
			return fmt.Errorf("lease lost while working: %w", lease.Err())
		}
		busy.Add(-1)
		if err := lease.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}
