//go:build unix

// Command mutex-counter: separate processes take turns at one zkrecipes
// mutex to add one to a counter kept in a file (store.go), which refuses a
// write whose fencing token is lower than the last one it took.
//
// Without -worker, the program starts -workers copies of itself (-worker N)
// and checks the count when they end. With -stall N, worker N stops itself
// while it holds the mutex; the parent resumes it once its session has
// expired, and its late write is refused.
//
//	go run ./examples/mutex-counter -zk 127.0.0.1:21811 -workers 4 -increments 25
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	servers    = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path       = flag.String("path", "/examples/mutex-counter", "ZooKeeper path of the mutex")
	file       = flag.String("file", "", "counter file, overwritten (default: a temporary file)")
	workers    = flag.Int("workers", 4, "worker processes")
	increments = flag.Int("increments", 25, "increments per worker")
	session    = flag.Duration("session-timeout", 3*time.Second, "ZooKeeper session timeout of each worker")
	stall      = flag.Int("stall", 0, "worker `N` stops while it holds the mutex, until its session expires (0: none)")
	worker     = flag.Int("worker", 0, "run as worker `N` (the parent sets it)")
)

func main() {
	flag.Parse()
	if *worker == 0 {
		os.Exit(parent())
	}
	log.SetPrefix(fmt.Sprintf("worker %d: ", *worker))
	ctx := context.Background()
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","), recipe.WithSessionTimeout(*session))
	check(err)
	defer c.Close()
	m, err := mutex.New(c, *path, mutex.WithData(fmt.Appendf(nil, "worker %d pid %d", *worker, os.Getpid())))
	check(err)
	for done := 0; done < *increments; {
		begin := time.Now()
		check(m.Lock(ctx))
		waited, token := time.Since(begin), m.Token()
		count, err := read(*file, token, *worker)
		check(err)
		time.Sleep(5 * time.Millisecond) // work: a broken lock would lose updates here
		select {
		case <-m.Done(): // lost meanwhile (session expired, connection suspended): write nothing
			log.Printf("mutex lost before writing, increment again: %v", m.Err())
			_ = m.Unlock(ctx) // ends the lost hold
			continue
		default:
		}
		if *worker == *stall && done == *increments/2 { // a pause between check and write (GC, VM)
			fmt.Printf("worker %d  token=%#x  read counter %d, stalls before writing\n", *worker, token, count)
			for begin := time.Now(); time.Since(begin) < 2**session; { // until the parent resumes it
				check(syscall.Kill(os.Getpid(), syscall.SIGSTOP))
			}
		}
		if err := write(*file, entry{count + 1, token, *worker}); errors.Is(err, errFenced) {
			select { // give the client a moment to notice the loss, to show it
			case <-m.Done():
			case <-time.After(3 * time.Second):
			}
			fmt.Printf("worker %d  token=%#x  write REFUSED: %v; mutex: %v\n", *worker, token, err, m.Err())
			os.Exit(3)
		} else {
			check(err)
		}
		fmt.Printf("worker %d  token=%#x  waited %6.1fms  counter %d -> %d\n",
			*worker, token, float64(waited.Microseconds())/1000, count, count+1)
		done++
		if err := m.Unlock(ctx); err != nil {
			log.Printf("unlock: %v", err) // mutex.ErrLost: lost after the write
		}
	}
}

// parent starts the workers, relays their output and checks the count.
func parent() int {
	if *file == "" {
		*file = filepath.Join(os.TempDir(), fmt.Sprintf("mutex-counter-%d.txt", os.Getpid()))
		defer os.Remove(*file)
	}
	check(os.WriteFile(*file, nil, 0o644)) // empty: the counter is 0
	fmt.Printf("mutex-counter: %d worker processes x %d increments, mutex %s on %s\n", *workers, *increments, *path, *servers)
	var cmds []*exec.Cmd
	var relays sync.WaitGroup
	for n := 1; n <= *workers; n++ {
		cmd := exec.Command(os.Args[0], append(os.Args[1:], "-worker", fmt.Sprint(n), "-file", *file)...)
		out, err := cmd.StdoutPipe()
		check(err)
		cmd.Stderr = os.Stderr
		check(cmd.Start())
		cmds = append(cmds, cmd)
		relays.Go(func() { relay(out, cmd.Process) })
	}
	relays.Wait() // every worker has closed its output
	entries, err := load(*file, false)
	check(err)
	writes, final := make([]int, *workers+1), entry{}
	for _, e := range entries {
		writes[e.worker]++
		final = e
	}
	fmt.Println("\nsummary")
	ok := final.count == int64(len(entries)) // each accepted write added exactly one
	for i, cmd := range cmds {
		n, note, code := i+1, "", 0
		if cmd.Wait() != nil {
			code = cmd.ProcessState.ExitCode()
		}
		if code == 3 && n == *stall {
			note = "  FENCED: its write after the stall was refused"
		} else if code != 0 || writes[n] != *increments {
			note, ok = fmt.Sprintf("  FAILED (exit status %d)", code), false
		}
		fmt.Printf("  worker %d  %3d writes%s\n", n, writes[n], note)
	}
	fmt.Printf("  final count %d, %d writes accepted, last token %#x\n", final.count, len(entries), final.token)
	if !ok {
		fmt.Println("FAIL: an update was lost or a worker failed")
		return 1
	}
	fmt.Println("ok: no update was lost")
	return 0
}

// relay copies a worker's output to ours. A worker that stalls has stopped
// itself (SIGSTOP): relay resumes it once its session has expired, and
// again every half second until it has ended, in case its stop came late.
func relay(out io.Reader, p *os.Process) {
	ended := make(chan struct{})
	defer close(ended)
	for sc := bufio.NewScanner(out); sc.Scan(); {
		fmt.Println(sc.Text())
		if strings.HasSuffix(sc.Text(), "stalls before writing") {
			d := 2**session + time.Second
			fmt.Printf("parent    resumes worker pid %d in %v, once its session has expired\n", p.Pid, d)
			go func() {
				for t := time.After(d); ; t = time.After(500 * time.Millisecond) {
					select {
					case <-t:
						_ = p.Signal(syscall.SIGCONT)
					case <-ended:
						return
					}
				}
			}()
		}
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
