//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command semaphore shows a pool of worker processes bounded by one
// zkrecipes semaphore: however many workers there are, at most -leases of
// them work at once.
//
// The parent process starts -workers copies of itself. Each worker opens its
// own ZooKeeper session and, -rounds times, takes a lease (with a timeout),
// works for a random time between -work-min and -work-max, and releases the
// lease. Workers tell the parent when each piece of work began and ended;
// the parent prints a line per lease and, at the end, computes from those
// times how many workers were ever busy at once. It exits non-zero if that
// exceeds -leases or a worker failed.
//
//	go run ./examples/semaphore -zk 127.0.0.1:21811 -workers 6 -leases 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/demo"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

var (
	cfg          = demo.Flags("semaphore", "/zkrecipes-demo/pool")
	workers      = flag.Int("workers", 6, "number of worker processes")
	leases       = flag.Int("leases", 2, "number of leases: how many workers may work at once")
	rounds       = flag.Int("rounds", 4, "pieces of work per worker, one lease each")
	workMin      = flag.Duration("work-min", 100*time.Millisecond, "shortest piece of work")
	workMax      = flag.Duration("work-max", 300*time.Millisecond, "longest piece of work")
	leaseTimeout = flag.Duration("lease-timeout", 30*time.Second, "how long a worker waits for a lease before giving up")
)

func main() {
	demo.Main(cfg, func() error {
		if *workers < 1 || *leases < 1 || *rounds < 1 || *workMin < 0 || *workMax < *workMin || *leaseTimeout <= 0 {
			return errors.New("need -workers, -leases, -rounds >= 1, 0 <= -work-min <= -work-max, -lease-timeout > 0")
		}
		return nil
	}, worker, parent)
}

// worker takes a lease, works under it and releases it, -rounds times.
func worker(ctx context.Context, _ string, n int, log *slog.Logger) int {
	parent := demo.ToParent()
	defer parent.Close()
	c, err := demo.Connect(ctx, cfg, recipe.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot connect", err)
	}
	defer c.Close()
	s, err := semaphore.New(c, cfg.Path, *leases,
		semaphore.WithData(fmt.Appendf(nil, "semaphore example worker %d pid %d", n, os.Getpid())))
	if err != nil {
		return demo.Fail(ctx, log, "cannot create the semaphore", err)
	}
	if err := parent.Ready(); err != nil { // every worker connected: contend
		return demo.Fail(ctx, log, "no start signal from the parent", err)
	}

	for range *rounds {
		lctx, cancel := context.WithTimeout(ctx, *leaseTimeout)
		begin := time.Now()
		lease, err := s.Acquire(lctx)
		cancel()
		waited := time.Since(begin)
		if errors.Is(err, semaphore.ErrMaxLeasesMismatch) {
			return demo.Fail(ctx, log, "the path was set up with another -leases; use another -path, or wait until "+
				"ZooKeeper removes the empty path (a container node) after the last run", err)
		} else if err != nil {
			return demo.Fail(ctx, log, "cannot take a lease", err)
		}
		a := demo.Acquired{Start: time.Now().UnixNano(), Token: lease.Token(), Waited: waited}
		if p, err := s.Participants(ctx); err == nil {
			a.Busy = min(len(p), *leases)
			a.Waiting = len(p) - a.Busy
		}
		parent.Send("acquired", a)

		// Work, but stop at once if the lease is lost.
		r := demo.Released{Interval: demo.Interval{Start: a.Start}, Token: a.Token}
		t := time.NewTimer(*workMin + rand.N(*workMax-*workMin+1))
		select {
		case <-t.C:
		case <-lease.Done():
			r.Lost = lease.Err().Error()
			log.Error("lease lost while working", "err", lease.Err())
		case <-ctx.Done():
		}
		t.Stop()
		r.End = time.Now().UnixNano()
		parent.Send("released", r)

		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = lease.Release(rctx)
		cancel()
		if err != nil && r.Lost == "" {
			log.Error("release", "err", err)
		}
		if ctx.Err() != nil {
			return 130
		}
		if r.Lost != "" {
			return 1
		}
	}
	return 0
}

// parent starts the workers, prints a line per lease and checks that no
// more than -leases workers were ever busy at once.
func parent(ctx context.Context, log *slog.Logger) int {
	fmt.Printf("semaphore: %d worker processes x %d pieces of work, %d leases at %s on %s\n",
		*workers, *rounds, *leases, cfg.Path, cfg.ZK)
	ws, err := demo.SpawnN(ctx, "worker", *workers)
	pool := &demo.Leases{Max: *leases}
	if err == nil {
		err = demo.Run(ctx, ws, func() { fmt.Println("all workers connected; go") }, pool.Handle)
	}
	if err != nil {
		return demo.Fail(ctx, log, "the workers did not all start", err)
	}
	return pool.Summarize(ws, *rounds)
}
