// Command jobs is a small job service on ZooKeeper. Workers, each with a
// session of its own, elect a scheduler that publishes the list of jobs;
// each worker then takes every job it finds undone under the job's own
// mutex, runs it in one of a few slots of a semaphore, and records the
// result with a guarded write, so that a job's result lands only while its
// lock is held, and once. The program exits non-zero if a job was not
// done exactly once.
//
//	go run ./examples/jobs -zk 127.0.0.1:21811 -workers 3 -jobs 6 -slots 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

var (
	servers = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path    = flag.String("path", "/examples/jobs", "ZooKeeper path of the service")
	workers = flag.Int("workers", 3, "workers, each with its own session")
	jobs    = flag.Int("jobs", 6, "jobs to schedule")
	slots   = flag.Int("slots", 2, "jobs that may run at once, across all workers")
	work    = flag.Duration("work", 50*time.Millisecond, "how long a job takes")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, *workers+1)
	var wg sync.WaitGroup
	for n := 1; n <= *workers; n++ {
		wg.Go(func() {
			if errs[n] = worker(ctx, n); errs[n] != nil {
				errs[n] = fmt.Errorf("worker %d: %w", n, errs[n])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	done, err := c.Children(ctx, *path+"/results")
	if err != nil || len(done) != *jobs {
		return fmt.Errorf("FAIL: results %q, want %d (%v)", done, *jobs, err)
	}
	fmt.Printf("ok: %d jobs, each done once\n", len(done))
	return nil
}

func worker(ctx context.Context, n int) error {
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	// Parents first, outside any guard: a guarded write does not make them.
	if err := c.EnsurePath(ctx, *path+"/results"); err != nil {
		return err
	}
	if err := schedule(ctx, c, n); err != nil {
		return err
	}
	var list []byte
	for list == nil { // until the scheduler has published
		if list, _, err = c.Get(ctx, *path+"/schedule"); err != nil && !errors.Is(err, recipe.ErrNoNode) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	pool, err := semaphore.New(c, *path+"/slots", *slots)
	if err != nil {
		return err
	}
	for _, job := range strings.Fields(string(list)) {
		if err := runJob(ctx, c, pool, n, job); err != nil {
			return fmt.Errorf("%s: %w", job, err)
		}
	}
	return nil
}

// schedule publishes the jobs if this worker is elected scheduler. The
// schedule is written under the term, so a scheduler that lost its term
// writes nothing.
func schedule(ctx context.Context, c *recipe.Client, n int) error {
	e, err := leader.New(c, *path+"/scheduler", leader.WithData(fmt.Appendf(nil, "worker %d", n)))
	if err != nil {
		return err
	}
	if err := e.TryCampaign(ctx); errors.Is(err, leader.ErrLeaderElsewhere) {
		return nil // another worker schedules
	} else if err != nil {
		return err
	}
	defer e.Resign(context.Background())
	names := make([]string, *jobs)
	for i := range names {
		names[i] = fmt.Sprintf("job-%d", i+1)
	}
	_, err = e.Commit(ctx, recipe.Create(*path+"/schedule", []byte(strings.Join(names, " "))))
	if errors.Is(err, recipe.ErrNodeExists) {
		return nil // published in an earlier term
	}
	fmt.Printf("worker %d  scheduled %d jobs (term %d)\n", n, *jobs, e.Token())
	return err
}

// runJob does job unless it is done: under the job's mutex (others wait at
// most a second for it), in a slot of the pool, its result committed only
// while the mutex is held.
func runJob(ctx context.Context, c *recipe.Client, pool *semaphore.Semaphore, n int, job string) error {
	result := *path + "/results/" + job
	m, err := mutex.New(c, *path+"/locks/"+job)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := m.Lock(lctx); errors.Is(err, context.DeadlineExceeded) {
		return nil // another worker has it
	} else if err != nil {
		return err
	}
	defer m.Unlock(context.Background())
	if done, err := c.Exists(ctx, result); done || err != nil {
		return err // done by the worker that held the lock before
	}
	lease, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.Background())
	time.Sleep(*work) // the job itself
	_, err = m.Commit(ctx, recipe.Create(result, fmt.Appendf(nil, "worker %d, token %d", n, m.Token())))
	if err == nil {
		fmt.Printf("worker %d  %s done (token %d)\n", n, job, m.Token())
	}
	return err // mutex.ErrLost: the lock was lost and nothing was written
}
