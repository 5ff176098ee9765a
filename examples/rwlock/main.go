// Command rwlock shows readers and writers sharing one zkrecipes read/write
// lock, each with a ZooKeeper session of its own as separate processes would
// have: readers read a document together, line by line; a writer rewrites
// every line alone, stamped with its fencing token. It exits non-zero if a
// writer ever shared the lock or a reader saw a half-written document.
//
//	go run ./examples/rwlock -zk 127.0.0.1:21811 -readers 3 -writers 1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
)

var (
	servers = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path    = flag.String("path", "/examples/rwlock", "ZooKeeper path of the lock")
	readers = flag.Int("readers", 3, "readers, each with its own session")
	writers = flag.Int("writers", 1, "writers, each with its own session")
	reads   = flag.Int("reads", 6, "reads per reader")
	writes  = flag.Int("writes", 3, "writes per writer")
	pace    = flag.Duration("line-time", 20*time.Millisecond, "time to read or write one of the document's 5 lines")
)

// The document: 5 lines, each a version; two versions in one read: torn.
var (
	doc                 [5]atomic.Pointer[string]
	inReaders, inWriter atomic.Int32 // who is inside now
	mostReaders         atomic.Int32
	start               time.Time
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
	fmt.Printf("rwlock: %d readers x %d reads, %d writers x %d writes, lock %s on %s\n", *readers, *reads, *writers, *writes, *path, *servers)
	for i := range doc {
		doc[i].Store(new("v0 by nobody"))
	}
	start = time.Now()
	errs := make([]error, *readers+*writers)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			if errs[i] = visit(ctx, i >= *readers, i+1); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("ok: up to %d readers read together, every writer was alone, no read saw a half-written document\n", mostReaders.Load())
	return nil
}

// visit takes the lock, reads or writes the document, and unlocks, -reads
// or -writes times.
func visit(ctx context.Context, writer bool, n int) error {
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	who, turns, pause := fmt.Sprintf("reader %d", n), *reads, time.Duration(0)
	if writer {
		who, turns, pause = fmt.Sprintf("writer %d", n-*readers), *writes, 3**pace // the readers start first
	}
	rw, err := rwlock.New(c, *path, rwlock.WithData(fmt.Appendf(nil, "%s pid %d", who, os.Getpid())))
	if err != nil {
		return err
	}
	for turn := 1; turn <= turns; turn++ {
		time.Sleep(pause)
		say := func(f string, a ...any) {
			fmt.Printf("+%.3fs  %s  %s\n", time.Since(start).Seconds(), who, fmt.Sprintf(f, a...))
		}
		if !writer {
			if err := rw.RLock(ctx); err != nil {
				return err
			}
			n := inReaders.Add(1)
			mostReaders.Store(max(mostReaders.Load(), n)) // only an approximation of the most readers inside
			if inWriter.Load() > 0 {
				return fmt.Errorf("%s: a writer is inside with readers", who)
			}
			var seen []string
			for i := range doc {
				if closed(rw.Reader().Done()) { // lost: session expired or suspended too long
					return fmt.Errorf("%s: read lock lost: %w", who, rw.Reader().Err())
				}
				seen = append(seen, *doc[i].Load())
				time.Sleep(*pace)
			}
			inReaders.Add(-1)
			if seen[0] != seen[len(seen)-1] {
				return fmt.Errorf("%s: half-written document: %q", who, seen)
			}
			say("read  %s  (readers inside: %d)", seen[0], n)
			if err := rw.RUnlock(ctx); err != nil {
				return err
			}
			continue
		}

		say("wants to write")
		if err := rw.Lock(ctx); err != nil {
			return err
		}
		if inWriter.Add(1) > 1 || inReaders.Load() > 0 {
			return fmt.Errorf("%s: someone is inside with the writer", who)
		}
		version := fmt.Sprintf("v%d by %s token=%#x", turn, who, rw.Token()) // storage can fence by the token
		for i := range doc {
			if closed(rw.Done()) { // lost: stop writing
				return fmt.Errorf("%s: write lock lost: %w", who, rw.Err())
			}
			doc[i].Store(&version)
			time.Sleep(*pace)
		}
		inWriter.Add(-1)
		say("wrote %s", version)
		if err := rw.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
