//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command mutex-counter shows operating-system processes contending for one
// zkrecipes mutex.
//
// The parent process starts -workers copies of itself. Each worker opens its
// own ZooKeeper session and, -increments times, takes the mutex, reads a
// counter from a shared file, works a little (so that a broken lock would
// lose updates), writes the counter plus one, and unlocks. Every write
// carries the worker's fencing token, and the file refuses a token older
// than the last one written. The parent then checks that no update was
// lost. With -stall N the parent stops worker N while it holds the mutex,
// until its session expires and the mutex passes on: its late write is
// refused.
//
//	go run ./examples/mutex-counter -zk 127.0.0.1:21811 -workers 4 -increments 25
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/demo"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	cfg         = demo.Flags("mutex", "/zkrecipes-demo/counter")
	file        = flag.String("file", "", "counter file shared by the workers, overwritten (default: a temporary file)")
	workers     = flag.Int("workers", 4, "number of worker processes")
	increments  = flag.Int("increments", 25, "increments per worker")
	work        = flag.Duration("work", 5*time.Millisecond, "time each worker spends between reading and writing the counter")
	lockTimeout = flag.Duration("lock-timeout", 30*time.Second, "how long a worker waits for the mutex before giving up")
	stall       = flag.Int("stall", 0, "stop worker `N` while it holds the mutex until its session expires, to show fencing (0: never)")
)

func main() {
	demo.Main(cfg, func() error {
		if *workers < 1 || *increments < 1 || *work < 0 || *lockTimeout <= 0 || *stall < 0 || *stall > *workers {
			return errors.New("need -workers, -increments >= 1, -work >= 0, -lock-timeout > 0, 0 <= -stall <= -workers")
		}
		return nil
	}, worker, parent)
}

// worker takes the mutex -increments times and, holding it, adds one to
// the counter.
func worker(ctx context.Context, _ string, n int, log *slog.Logger) int {
	parent := demo.ToParent()
	var rep demo.CounterReport
	defer func() { parent.Send("result", rep); parent.Close() }()
	c, err := demo.Connect(ctx, cfg, recipe.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot connect", err)
	}
	defer c.Close()
	m, err := mutex.New(c, cfg.Path, mutex.WithData(fmt.Appendf(nil, "mutex-counter worker %d pid %d", n, os.Getpid())))
	if err != nil {
		return demo.Fail(ctx, log, "cannot create the mutex", err)
	}
	counter := demo.Counter{Path: *file}
	if err := parent.Ready(); err != nil { // every worker connected: contend
		return demo.Fail(ctx, log, "no start signal from the parent", err)
	}
	for done := 0; done < *increments; {
		lctx, cancel := context.WithTimeout(ctx, *lockTimeout)
		begin := time.Now()
		err := m.Lock(lctx)
		cancel()
		waited := time.Since(begin)
		if err != nil {
			return demo.Fail(ctx, log, "cannot take the mutex", err)
		}
		rep.Waits.Add(waited)
		token := m.Token()

		// Critical section: read, work, write with the token.
		cur, err := counter.Read()
		if err != nil {
			return demo.Fail(ctx, log, "cannot read the counter", err)
		}
		time.Sleep(*work)
		if demo.Closed(m.Done()) { // lost while working: write nothing, do this increment again
			log.Error("mutex lost before writing; retrying the increment", "err", m.Err())
			rep.Lost++
			unlock(m) // ends the lost hold
			continue
		}
		if n == *stall && done == (*increments-1)/2 {
			fmt.Printf("worker %d  holds %s  token=0x%x  waited %s  read counter %d, stalls before writing\n",
				n, cfg.Path, token, demo.Ms(waited), cur.Value)
			if err := parent.Pause(2*c.SessionTimeout()+time.Second, "while it holds the mutex; its session expires"); err != nil {
				return demo.Fail(ctx, log, "no resume signal from the parent", err)
			}
			// Nothing here notices that the mutex was lost meanwhile. The fence does.
		}
		prev, err := counter.Write(cur.Value+1, token)
		if fe, ok := errors.AsType[*demo.FencedError](err); ok {
			select { // give the client a moment to notice the loss, to show it
			case <-m.Done():
			case <-time.After(3 * time.Second):
			}
			log.Error("write refused: a later lock holder has written since this worker took the mutex",
				"own_token", fmt.Sprintf("0x%x", token), "file_token", fmt.Sprintf("0x%x", fe.File.Token),
				"file_counter", fe.File.Value, "mutex", m.Err())
			rep.Fenced = true
			return demo.ExitFenced
		} else if err != nil {
			return demo.Fail(ctx, log, "cannot write the counter", err)
		}
		rep.Writes++
		done++
		fmt.Printf("worker %d  holds %s  token=0x%x  waited %s  counter %d -> %d\n",
			n, cfg.Path, token, demo.Ms(waited), prev.Value, cur.Value+1)
		if err := unlock(m); err != nil {
			if errors.Is(err, mutex.ErrLost) {
				rep.Lost++
			}
			log.Error("unlock", "err", err)
		}
	}
	return 0
}

func unlock(m *mutex.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Unlock(ctx)
}

// parent starts the workers and checks the count.
func parent(ctx context.Context, log *slog.Logger) int {
	remove, err := demo.TempFile(file, "zkrecipes-demo-counter-*.txt")
	if err != nil {
		return demo.Fail(ctx, log, "cannot create the counter file", err)
	}
	defer remove()
	counter := demo.Counter{Path: *file}
	if err := counter.Init(); err != nil {
		return demo.Fail(ctx, log, "cannot initialise the counter file", err)
	}
	fmt.Printf("mutex-counter: %d worker processes x %d increments, mutex %s on %s\n", *workers, *increments, cfg.Path, cfg.ZK)
	fmt.Printf("counter file %s\n", *file)
	ws, err := demo.SpawnN(ctx, "worker", *workers, "-file", *file)
	if err == nil {
		err = demo.Run(ctx, ws, nil, nil)
	}
	if err != nil {
		return demo.Fail(ctx, log, "the workers did not all start", err)
	}
	return counter.Summarize(ws, *increments, *stall)
}
