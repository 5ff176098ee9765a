//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command rwlock shows operating-system processes sharing one zkrecipes
// read/write lock: readers read a shared file together, a writer rewrites it
// alone.
//
// The parent process starts -readers reader processes and -writers writer
// processes, all copies of itself, each with its own ZooKeeper session.
// A reader, -reads times, takes the read lock, reads the file slowly, and
// unlocks. A writer, -writes times, takes the write lock, rewrites the file
// slowly with the next version, and unlocks. Every process prints what it
// does, with the time since the start and who was inside with it; the
// parent checks at the end that no writer ever shared the lock and that no
// reader saw a half-written file.
//
//	go run ./examples/rwlock -zk 127.0.0.1:21811
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
	"github.com/zkrecipes/zkrecipes/rwlock"
)

var (
	cfg         = demo.Flags("read/write lock", "/zkrecipes-demo/rwlock")
	file        = flag.String("file", "", "data file shared by the processes, overwritten (default: a temporary file)")
	readers     = flag.Int("readers", 3, "number of reader processes")
	writers     = flag.Int("writers", 1, "number of writer processes")
	reads       = flag.Int("reads", 8, "reads per reader")
	writes      = flag.Int("writes", 4, "writes per writer")
	readTime    = flag.Duration("read-time", 150*time.Millisecond, "time a reader takes to read the file")
	writeTime   = flag.Duration("write-time", 100*time.Millisecond, "time a writer takes to rewrite the file")
	lockTimeout = flag.Duration("lock-timeout", 30*time.Second, "how long a process waits for the lock before giving up")
	curator     = flag.Bool("curator", false, "name the nodes like Curator's InterProcessReadWriteLock (__READ__, __WRIT__)")
)

func main() {
	demo.Main(cfg, func() error {
		if *readers < 0 || *writers < 0 || *readers+*writers == 0 || *reads < 1 || *writes < 1 ||
			*readTime < 0 || *writeTime < 0 || *lockTimeout <= 0 {
			return errors.New("need a process, -reads, -writes >= 1, -read-time, -write-time >= 0, -lock-timeout > 0")
		}
		return nil
	}, visitor, parent)
}

// visitor is a reader or a writer: it takes its lock, takes a turn in the
// critical section, and releases the lock, -reads or -writes times.
func visitor(ctx context.Context, role string, n int, log *slog.Logger) int {
	parent := demo.ToParent()
	var rep demo.RWReport
	defer func() { parent.Send("result", rep); parent.Close() }()
	c, err := demo.Connect(ctx, cfg, recipe.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot connect", err)
	}
	defer c.Close()
	opts := []rwlock.Option{rwlock.WithData(fmt.Appendf(nil, "rwlock demo %s %d pid %d", role, n, os.Getpid()))}
	if *curator {
		opts = append(opts, rwlock.WithCuratorNames())
	}
	rw, err := rwlock.New(c, cfg.Path, opts...)
	if err != nil {
		return demo.Fail(ctx, log, "cannot create the lock", err)
	}
	room := demo.RoomAt(*file)
	say := func(format string, args ...any) {
		fmt.Printf("%7s  %s %d  %s\n", fmt.Sprintf("+%.3fs", demo.Elapsed().Seconds()), role, n, fmt.Sprintf(format, args...))
	}
	if err := parent.Ready(); err != nil { // every process connected: start together
		return demo.Fail(ctx, log, "no start signal from the parent", err)
	}

	writer, turns, work := role == "writer", *reads, *readTime
	if writer {
		turns, work = *writes, *writeTime
		time.Sleep(*readTime / 2) // let the readers get going first
	}
	for rep.Done < turns {
		lctx, cancel := context.WithTimeout(ctx, *lockTimeout)
		begin := time.Now()
		if writer {
			say("wants to write")
			err = rw.Lock(lctx)
		} else {
			err = rw.RLock(lctx)
		}
		cancel()
		waited := time.Since(begin)
		if err != nil {
			return demo.Fail(ctx, log, "cannot take the lock", err)
		}
		rep.Waits.Add(waited)

		// Critical section: a writer rewrites the file with its fencing
		// token, stopping if it loses the lock; a reader reads it.
		lost := rw.RDone()
		if writer {
			lost = rw.Done()
		}
		what, who, err := room.Visit(writer, work, rw.Token(), lost, &rep)
		switch {
		case errors.Is(err, demo.ErrStopped):
			log.Error("lock lost during the critical section; doing it again", "err", errors.Join(rw.Err(), rw.RErr()))
		case err != nil:
			return demo.Fail(ctx, log, "cannot use the file", err)
		default:
			say("%s  waited %s  %s", what, demo.Ms(waited), who)
		}

		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if writer {
			err = rw.Unlock(uctx)
		} else {
			err = rw.RUnlock(uctx)
		}
		cancel()
		if err != nil {
			log.Error("unlock", "err", err)
		}
		time.Sleep(rand.N(max(*readTime, *writeTime) + 1)) // think a little before the next turn
	}
	return 0
}

// parent starts the readers and writers and checks what they saw.
func parent(ctx context.Context, log *slog.Logger) int {
	remove, err := demo.TempFile(file, "zkrecipes-demo-rwlock-*.txt")
	if err != nil {
		return demo.Fail(ctx, log, "cannot create the data file", err)
	}
	defer remove()
	room := demo.RoomAt(*file)
	defer os.Remove(room.Presence.Path)
	if err := room.Init(); err != nil {
		return demo.Fail(ctx, log, "cannot initialise the data files", err)
	}
	fmt.Printf("rwlock demo: %d %s x %d reads, %d %s x %d writes, lock %s on %s\n",
		*readers, demo.Plural(*readers, "reader"), *reads, *writers, demo.Plural(*writers, "writer"), *writes, cfg.Path, cfg.ZK)
	fmt.Printf("data file %s\n\n", *file)
	begin := time.Now()
	rs, err := demo.SpawnN(ctx, "reader", *readers, "-file", *file)
	if err != nil {
		return demo.Fail(ctx, log, "cannot start the readers", err)
	}
	ws, err := demo.SpawnN(ctx, "writer", *writers, "-file", *file)
	if err == nil {
		err = demo.Run(ctx, append(rs, ws...), nil, nil)
	}
	if err != nil {
		return demo.Fail(ctx, log, "the processes did not all start", err)
	}
	return demo.SummarizeRW(append(rs, ws...), time.Since(begin))
}
