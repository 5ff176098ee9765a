// Command gopeer runs one cycling scenario of the benchmark runner
// (internal/bench) with this module's recipes, in a process of its own,
// and reports to the runner with the line protocol of the other peers
// (peers/README.md):
//
//	peer: "ready"        sessions open and warmed up
//	run:  "go"           start measuring
//	peer: {...}          one line of JSON: the result
//	run:  EOF on stdin   close the sessions and exit
//
// The runner's -baseline REV copies this file into a copy of the module at
// REV and builds it there, so that each round measures the recipes at REV
// next to the current ones. It therefore uses only API that every revision
// since the recipes' first release has: recipe.Connect,
// recipe.WithSessionTimeout, mutex.New, semaphore.New, rwlock.New and their
// Lock/Unlock, Acquire/Release and RLock/RUnlock. Each cycle is the one the
// runner's own scenarios run (internal/bench/scenarios.go): Lock+Unlock of
// a mutex, Acquire+Release of a lease of a -leases semaphore, and a read
// (with probability -reads) or a write of a read/write lock, with the
// same random sequence per session as the runner's.
//
// A run whose cycles stall (none completes for -stall-ms) prints its result
// with status "stalled" at once and exits without closing its sessions.
//
//	gopeer -zk 127.0.0.1:2181 -path /x -scenario mutex -sessions 8
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// options are the peer's flags.
type options struct {
	zk, path, scenario string
	sessions, leases   int
	reads              float64
	sessionTimeout     time.Duration
	stall              time.Duration
	warmup, duration   time.Duration
	connectTimeout     time.Duration // bounds the wait for each session
}

// scenarios this peer runs.
var scenarios = []string{"mutex", "semaphore", "rwlock"}

// parseArgs parses and checks the flags the runner passes.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	var sessionMs, stallMs, warmupMs, durationMs int64
	fs := flag.NewFlagSet("gopeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.zk, "zk", "", "server `host:port`")
	fs.StringVar(&o.path, "path", "", "lock path")
	fs.StringVar(&o.scenario, "scenario", "", "scenario: "+strings.Join(scenarios, ", "))
	fs.IntVar(&o.sessions, "sessions", 1, "participants, one session each")
	fs.IntVar(&o.leases, "leases", 3, "leases of the semaphore")
	fs.Float64Var(&o.reads, "reads", 0.9, "share of reads of the rwlock")
	fs.Int64Var(&sessionMs, "session-timeout-ms", 10000, "session timeout")
	fs.Int64Var(&stallMs, "stall-ms", 5000, "no cycle completing for this long ends the run as stalled")
	fs.Int64Var(&warmupMs, "warmup-ms", 500, "unmeasured cycling before ready")
	fs.Int64Var(&durationMs, "duration-ms", 2000, "measured time")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.sessionTimeout = time.Duration(sessionMs) * time.Millisecond
	o.stall = time.Duration(stallMs) * time.Millisecond
	o.warmup = time.Duration(warmupMs) * time.Millisecond
	o.duration = time.Duration(durationMs) * time.Millisecond
	o.connectTimeout = connectTimeout
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.zk == "":
		return o, errors.New("-zk is required")
	case !strings.HasPrefix(o.path, "/"):
		return o, errors.New("-path must be absolute")
	case !contains(scenarios, o.scenario):
		return o, fmt.Errorf("-scenario %q: this peer runs %s", o.scenario, strings.Join(scenarios, ", "))
	case o.sessions < 1 || o.sessions > 1000:
		return o, errors.New("-sessions must be between 1 and 1000")
	case o.leases < 1:
		return o, errors.New("-leases must be at least 1")
	case !(o.reads >= 0 && o.reads <= 1):
		return o, errors.New("-reads must be between 0 and 1")
	case sessionMs <= 0 || stallMs <= 0:
		return o, errors.New("-session-timeout-ms and -stall-ms must be positive")
	case warmupMs < 0 || durationMs <= 0:
		return o, errors.New("-warmup-ms must not be negative, -duration-ms must be positive")
	}
	return o, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// output is the result line.
type output struct {
	Status    string  `json:"status"`
	ElapsedNs int64   `json:"elapsed_ns"`
	Errors    int     `json:"errors"`
	Completed int64   `json:"completed"`
	LatNs     []int64 `json:"lat_ns"`
	Error     string  `json:"error,omitempty"`
}

// locker is one session's handle.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// semLocker takes and releases a lease. One goroutine uses it at a time.
type semLocker struct {
	s     *semaphore.Semaphore
	lease *semaphore.Lease
}

func (l *semLocker) Lock(ctx context.Context) (err error) {
	l.lease, err = l.s.Acquire(ctx)
	return err
}

func (l *semLocker) Unlock(ctx context.Context) error { return l.lease.Release(ctx) }

// rwLocker takes the read lock with probability reads, else the write
// lock. One goroutine uses it at a time.
type rwLocker struct {
	rw    *rwlock.RWLock
	rng   *rand.Rand
	reads float64
	read  bool
}

func (l *rwLocker) Lock(ctx context.Context) error {
	l.read = l.rng.Float64() < l.reads
	if l.read {
		return l.rw.RLock(ctx)
	}
	return l.rw.Lock(ctx)
}

func (l *rwLocker) Unlock(ctx context.Context) error {
	if l.read {
		return l.rw.RUnlock(ctx)
	}
	return l.rw.Unlock(ctx)
}

// connectTimeout bounds the wait for a session (the runner's).
const connectTimeout = 15 * time.Second

// open opens the sessions and a handle on each.
func open(ctx context.Context, o options) ([]*recipe.Client, []locker, error) {
	var clients []*recipe.Client
	var lockers []locker
	for i := 0; i < o.sessions; i++ {
		ct := o.connectTimeout
		if ct <= 0 {
			ct = connectTimeout
		}
		cctx, cancel := context.WithTimeout(ctx, ct)
		c, err := recipe.Connect(cctx, []string{o.zk}, recipe.WithSessionTimeout(o.sessionTimeout))
		cancel()
		if err != nil {
			closeAll(clients)
			return nil, nil, fmt.Errorf("connect: %w", err)
		}
		clients = append(clients, c)
		var l locker
		switch o.scenario {
		case "mutex":
			l, err = mutex.New(c, o.path)
		case "semaphore":
			var s *semaphore.Semaphore
			if s, err = semaphore.New(c, o.path, o.leases); err == nil {
				l = &semLocker{s: s}
			}
		case "rwlock":
			var rw *rwlock.RWLock
			if rw, err = rwlock.New(c, o.path); err == nil {
				// The runner's seeds (scenarios.go), so both draw the same reads.
				l = &rwLocker{rw: rw, rng: rand.New(rand.NewPCG(uint64(i), 7)), reads: o.reads}
			}
		}
		if err != nil {
			closeAll(clients)
			return nil, nil, err
		}
		lockers = append(lockers, l)
	}
	return clients, lockers, nil
}

func closeAll(clients []*recipe.Client) {
	for _, c := range clients {
		c.Close()
	}
}

// Phases of a run.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// errStalled ends a run in which no cycle completed for -stall-ms.
var errStalled = errors.New("stalled")

// cycler runs the sessions' cycles.
type cycler struct {
	phase    atomic.Int32
	progress atomic.Int64
	failed   chan struct{} // closed on the first error
	once     sync.Once
	err      error
	wg       sync.WaitGroup
	lat      [][]time.Duration
}

func (c *cycler) fail(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.failed)
	})
}

// start starts one goroutine per handle, cycling until the phase is
// phaseStop. The latency recorded while measuring is of the whole cycle
// with one session, of the Lock call with more, as the runner's.
func (c *cycler) start(ctx context.Context, lockers []locker) {
	c.failed = make(chan struct{})
	c.lat = make([][]time.Duration, len(lockers))
	whole := len(lockers) == 1
	for i, l := range lockers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				p := c.phase.Load()
				if p == phaseStop {
					return
				}
				t := time.Now()
				if err := l.Lock(ctx); err != nil {
					c.fail(fmt.Errorf("session %d: lock: %w", i, err))
					return
				}
				d := time.Since(t)
				if err := l.Unlock(ctx); err != nil {
					c.fail(fmt.Errorf("session %d: unlock: %w", i, err))
					return
				}
				if whole {
					d = time.Since(t)
				}
				c.progress.Add(1)
				if p == phaseMeasure {
					c.lat[i] = append(c.lat[i], d)
				}
			}
		}()
	}
}

// wait waits for d, or until the goroutines are done when done is not
// nil; it returns errStalled when no cycle completes for stall, or the
// first cycle's error.
func (c *cycler) wait(d, stall time.Duration, done <-chan struct{}) error {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last, since := c.progress.Load(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-end.C:
			if done == nil {
				return nil
			}
		case <-c.failed:
			return c.err
		case now := <-tick.C:
			if p := c.progress.Load(); p != last {
				last, since = p, now
			} else if now.Sub(since) > stall {
				return errStalled
			}
		}
	}
}

// run runs the peer: it returns the process's exit code, and whether the
// sessions were closed (a stalled run leaves them to expire).
func run(o options, stdin io.Reader, stdout, stderr io.Writer) (code int, closed bool) {
	ctx := context.Background()
	clients, lockers, err := open(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "gopeer:", err)
		return 1, true
	}
	var closeOnce sync.Once
	closeSessions := func() { closeOnce.Do(func() { closeAll(clients) }) }
	in := bufio.NewScanner(stdin)
	var c cycler
	c.start(ctx, lockers)
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	// finish stops the cycles, prints the result and, unless the run
	// stalled, waits for the runner's EOF and closes the sessions.
	finish := func(out output) (int, bool) {
		c.phase.Store(phaseStop)
		if out.Status == "error" {
			// The cycles end at their next turn; closing the sessions
			// makes calls that stay blocked return. Not at once:
			// go-zookeeper v1.0.4 reads a CreateContainer reply that
			// its Close abandons while its receiver still writes it.
			t := time.NewTimer(o.stall)
			select {
			case <-done:
			case <-t.C:
				closeSessions()
				<-done
			}
			t.Stop()
		}
		line, err := json.Marshal(out)
		if err != nil {
			line = []byte(`{"status":"error","error":"encoding the result"}`)
		}
		fmt.Fprintf(stdout, "%s\n", line)
		if out.Status == "stalled" {
			return 1, false
		}
		for in.Scan() {
		}
		closeSessions()
		<-done
		return 0, true
	}
	failed := func(err error) (int, bool) {
		if errors.Is(err, errStalled) {
			return finish(output{Status: "stalled"})
		}
		return finish(output{Status: "error", Errors: 1, Error: err.Error()})
	}
	if err := c.wait(o.warmup, o.stall, nil); err != nil {
		return failed(err)
	}
	fmt.Fprintln(stdout, "ready")
	if !in.Scan() || strings.TrimSpace(in.Text()) != "go" {
		return failed(errors.New(`expected "go" on stdin`))
	}
	start := time.Now()
	c.phase.Store(phaseMeasure)
	if err := c.wait(o.duration, o.stall, nil); err != nil {
		return failed(err)
	}
	elapsed := time.Since(start)
	c.phase.Store(phaseStop)
	if err := c.wait(0, o.stall, done); err != nil {
		return failed(err)
	}
	out := output{Status: "ok", ElapsedNs: elapsed.Nanoseconds(), LatNs: []int64{}}
	for _, l := range c.lat {
		for _, d := range l {
			out.LatNs = append(out.LatNs, d.Nanoseconds())
		}
	}
	out.Completed = int64(len(out.LatNs))
	return finish(out)
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gopeer:", err)
		os.Exit(2)
	}
	code, _ := run(o, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(code)
}
