// Command guarded-counter shows guarded writes: workers, each with a
// ZooKeeper session of its own, increment a counter kept in a znode under
// one mutex and write it with Commit, in one transaction with a check of
// the holder's lock node, so that the write lands only while the lock is
// held. With -evict, worker 1's lock node is deleted after it read the
// counter and before it writes (as "zklock rm", or the expiry of a paused
// holder's session, would): another worker counts on, worker 1's late write
// is refused, and it counts again under a new hold. The program exits
// non-zero if the final count differs from the increments made.
//
//	go run ./examples/guarded-counter -zk 127.0.0.1:21811 -workers 3 -evict
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	servers    = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path       = flag.String("path", "/examples/guarded-counter", "ZooKeeper path of the mutex; the counter is the node path+\"-counter\"")
	workers    = flag.Int("workers", 3, "workers, each with its own session")
	increments = flag.Int("increments", 5, "increments per worker")
	evict      = flag.Bool("evict", false, "delete worker 1's lock node between its read and its write, halfway through")

	refused atomic.Int64 // late writes refused because the hold had ended
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
	operator, err := recipe.Connect(ctx, strings.Split(*servers, ",")) // stands in for an operator's tools
	if err != nil {
		return err
	}
	defer operator.Close()
	counter := *path + "-counter" // state next to the lock's directory, not in it
	fmt.Printf("guarded-counter: %d workers x %d increments, mutex %s, counter %s\n", *workers, *increments, *path, counter)
	errs := make([]error, *workers+1)
	var wg sync.WaitGroup
	for n := 1; n <= *workers; n++ {
		wg.Go(func() {
			if errs[n] = worker(ctx, n, counter, operator); errs[n] != nil {
				errs[n] = fmt.Errorf("worker %d: %w", n, errs[n])
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	data, _, err := operator.Conn().Get(counter)
	final, want := count(data), *workers**increments
	fmt.Printf("final count %d of %d increments; late writes refused: %d\n", final, want, refused.Load())
	if err != nil || final != want {
		return fmt.Errorf("FAIL: count %d, want %d (%v)", final, want, err)
	}
	fmt.Println("ok: no write landed outside its hold")
	return operator.Conn().Delete(counter, -1) // leave nothing behind
}

// count reads the counter's data: "<count> token=<token> worker=<n>".
func count(data []byte) int {
	first, _, _ := bytes.Cut(data, []byte(" "))
	n, _ := strconv.Atoi(string(first))
	return n
}

func worker(ctx context.Context, n int, counter string, operator *recipe.Client) error {
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := mutex.New(c, *path, mutex.WithData(fmt.Appendf(nil, "worker %d", n)))
	if err != nil {
		return err
	}
	evictAt := -1 // the increment before whose write worker 1's node is deleted
	if *evict && n == 1 {
		evictAt = *increments / 2
	}
	for done, made := 0, false; done < *increments; {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		if !made { // the first holder makes the counter; the others find it
			if _, err := m.Commit(ctx, recipe.Create(counter, []byte("0"))); err != nil && !errors.Is(err, recipe.ErrNodeExists) {
				return err
			}
			made = true
		}
		data, version, err := c.Get(ctx, counter)
		if err != nil {
			return err
		}
		value := count(data)
		if done == evictAt {
			evictAt = -1
			if err := operator.Conn().Delete(*path+"/"+m.Node(), -1); err != nil {
				return err
			}
			fmt.Printf("worker %d  token=%#x  read %d; its lock node is deleted before it writes\n", n, m.Token(), value)
		}
		// The write says who made it, and expects the version it read.
		update := fmt.Appendf(nil, "%d token=%#x worker=%d", value+1, m.Token(), n)
		_, err = m.Commit(ctx, recipe.SetDataVersion(counter, update, version))
		applied := err == nil
		if errors.Is(err, recipe.ErrCommitUnknown) { // the reply was lost: did it land? (if not, count again)
			applied, err = readBack(ctx, c, counter, update)
		}
		switch {
		case applied:
			done++
			fmt.Printf("worker %d  token=%#x  counter %d -> %d\n", n, m.Token(), value, value+1)
		case errors.Is(err, mutex.ErrLost):
			refused.Add(1)
			fmt.Printf("worker %d  token=%#x  write REFUSED, nothing applied: %v\n", n, m.Token(), err)
		case err != nil:
			return err // a version mismatch would mean a write outside the lock
		}
		_ = m.Unlock(ctx) // after a loss, forgets the lost hold and deletes nothing
	}
	return nil
}

// readBack tells whether an update whose reply was lost was applied: the
// counter holds it (its token names this hold) or not. Sync first, so that
// the server read from has caught up, whether or not the hold is still in
// force.
func readBack(ctx context.Context, c *recipe.Client, counter string, update []byte) (bool, error) {
	if _, err := c.Conn().Sync(counter); err != nil {
		return false, err
	}
	data, _, err := c.Get(ctx, counter)
	return bytes.Equal(data, update), err
}
