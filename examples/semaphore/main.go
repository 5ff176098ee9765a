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
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

type config struct {
	zk             string
	path           string
	workers        int
	leases         int
	rounds         int
	workMin        time.Duration
	workMax        time.Duration
	sessionTimeout time.Duration
	leaseTimeout   time.Duration
	worker         int // > 0 in a worker process
}

func main() {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&cfg.path, "path", "/zkrecipes-demo/pool", "ZooKeeper path of the semaphore")
	flag.IntVar(&cfg.workers, "workers", 6, "number of worker processes")
	flag.IntVar(&cfg.leases, "leases", 2, "number of leases: how many workers may work at once")
	flag.IntVar(&cfg.rounds, "rounds", 4, "pieces of work per worker, one lease each")
	flag.DurationVar(&cfg.workMin, "work-min", 100*time.Millisecond, "shortest piece of work")
	flag.DurationVar(&cfg.workMax, "work-max", 300*time.Millisecond, "longest piece of work")
	flag.DurationVar(&cfg.sessionTimeout, "session-timeout", 3*time.Second, "ZooKeeper session timeout of each worker")
	flag.DurationVar(&cfg.leaseTimeout, "lease-timeout", 30*time.Second, "how long a worker waits for a lease before giving up")
	flag.IntVar(&cfg.worker, "worker", 0, "run as worker `N` (used by the parent process)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: semaphore [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "semaphore:", err)
		flag.Usage()
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	if cfg.worker > 0 {
		os.Exit(runWorker(cfg, logger.With("worker", cfg.worker)))
	}
	os.Exit(runParent(cfg, logger))
}

func (c *config) validate() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	case c.servers() == nil:
		return errors.New("-zk: no servers")
	case c.workers < 1:
		return fmt.Errorf("-workers %d: need at least one", c.workers)
	case c.leases < 1:
		return fmt.Errorf("-leases %d: need at least one", c.leases)
	case c.rounds < 1:
		return fmt.Errorf("-rounds %d: need at least one", c.rounds)
	case c.workMin < 0 || c.workMax < c.workMin:
		return fmt.Errorf("-work-min %v, -work-max %v: need 0 <= min <= max", c.workMin, c.workMax)
	case c.sessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: must be positive", c.sessionTimeout)
	case c.leaseTimeout <= 0:
		return fmt.Errorf("-lease-timeout %v: must be positive", c.leaseTimeout)
	case c.worker < 0:
		return fmt.Errorf("-worker %d: must be positive", c.worker)
	}
	return recipe.ValidatePath(c.path)
}

func (c *config) servers() []string {
	var out []string
	for s := range strings.SplitSeq(c.zk, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Worker/parent protocol. A worker writes lines to its standard output:
//
//	ready                 connected, waiting for the start signal
//	acquired <json>       a lease is held (acquired)
//	released <json>       the work under a lease is over (released)
//
// and reads one line (the start signal) from its standard input. Its logs go
// to standard error, which the parent shares.

// acquired is what a worker reports when it gets a lease.
type acquired struct {
	Start   int64         // wall clock (Unix ns) after Acquire returned
	Token   int64         // the lease's fencing token
	Waited  time.Duration // time spent in Acquire
	Busy    int           // leases held, from the queue as seen just after acquiring
	Waiting int           // workers waiting then
}

// released is what a worker reports when its work under a lease is over.
type released struct {
	Start, End int64 // wall clock (Unix ns): after Acquire returned, before Release
	Token      int64
	Lost       string // why the lease was lost during the work, if it was
}

func runWorker(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := bufio.NewWriter(os.Stdout)
	emit := func(verb string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(out, "%s %s\n", verb, b)
		out.Flush()
	}

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := recipe.Connect(cctx, cfg.servers(),
		recipe.WithSessionTimeout(cfg.sessionTimeout),
		recipe.WithLogger(log))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 130
		}
		log.Error("cannot connect", "zk", cfg.zk, "err", err)
		return 1
	}
	defer c.Close()
	s, err := semaphore.New(c, cfg.path, cfg.leases,
		semaphore.WithData(fmt.Appendf(nil, "semaphore example worker %d pid %d", cfg.worker, os.Getpid())))
	if err != nil {
		log.Error("cannot create the semaphore", "err", err)
		return 1
	}

	// Wait until every worker is connected, so that they all contend.
	fmt.Fprintln(out, "ready")
	out.Flush()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		if ctx.Err() != nil {
			return 130
		}
		log.Error("no start signal from the parent", "err", err)
		return 1
	}

	for range cfg.rounds {
		lctx, cancel := context.WithTimeout(ctx, cfg.leaseTimeout)
		begin := time.Now()
		lease, err := s.Acquire(lctx)
		cancel()
		waited := time.Since(begin)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return 130
			case errors.Is(err, semaphore.ErrMaxLeasesMismatch):
				log.Error("the path was set up with another -leases; use another -path, or wait until "+
					"ZooKeeper removes the empty path (a container node) after the last run", "err", err)
			default:
				log.Error("cannot take a lease", "err", err)
			}
			return 1
		}
		start := time.Now()
		a := acquired{Start: start.UnixNano(), Token: lease.Token(), Waited: waited}
		if p, err := s.Participants(ctx); err == nil {
			a.Busy = min(len(p), cfg.leases)
			a.Waiting = len(p) - a.Busy
		}
		emit("acquired", a)

		// Work, but stop at once if the lease is lost.
		r := released{Start: a.Start, Token: a.Token}
		work := cfg.workMin + rand.N(cfg.workMax-cfg.workMin+1)
		t := time.NewTimer(work)
		select {
		case <-t.C:
		case <-lease.Done():
			t.Stop()
			r.Lost = lease.Err().Error()
			log.Error("lease lost while working", "err", lease.Err())
		case <-ctx.Done():
			t.Stop()
		}
		r.End = time.Now().UnixNano()
		emit("released", r)
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

// worker is the parent's view of one worker process.
type worker struct {
	n       int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	holds   []released
	waits   []time.Duration
	code    int
	badLine bool
}

// event is a line from a worker, or its exit (line "").
type event struct {
	w    *worker
	line string
	err  error // exit status, when line == ""
}

func runParent(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		log.Error("cannot find this program's executable", "err", err)
		return 1
	}
	fmt.Printf("semaphore: %d worker processes x %d pieces of work, %d leases at %s on %s\n",
		cfg.workers, cfg.rounds, cfg.leases, cfg.path, cfg.zk)

	events := make(chan event)
	var workers []*worker
	startFailed := false
	for n := 1; n <= cfg.workers; n++ {
		cmd := exec.CommandContext(ctx, exe,
			"-worker", strconv.Itoa(n),
			"-zk", cfg.zk,
			"-path", cfg.path,
			"-leases", strconv.Itoa(cfg.leases),
			"-rounds", strconv.Itoa(cfg.rounds),
			"-work-min", cfg.workMin.String(),
			"-work-max", cfg.workMax.String(),
			"-session-timeout", cfg.sessionTimeout.String(),
			"-lease-timeout", cfg.leaseTimeout.String())
		cmd.Stderr = os.Stderr
		// On interrupt, let the worker close its session; kill it if it
		// does not end soon.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			log.Error("stdout pipe", "err", err)
			return 1
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			log.Error("stdin pipe", "err", err)
			return 1
		}
		if err := cmd.Start(); err != nil {
			log.Error("cannot start worker; stopping the others", "worker", n, "err", err)
			startFailed = true
			stop()
			break
		}
		wk := &worker{n: n, cmd: cmd, stdin: stdin}
		workers = append(workers, wk)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					events <- event{w: wk, line: line}
				}
			}
			events <- event{w: wk, err: cmd.Wait()}
		}()
	}
	go func() {
		// Workers waiting for the start signal see the end of their input.
		<-ctx.Done()
		for _, w := range workers {
			w.stdin.Close()
		}
	}()

	ready, running, started := 0, len(workers), false
	for running > 0 {
		ev := <-events
		wk := ev.w
		verb, arg, _ := strings.Cut(ev.line, " ")
		switch {
		case ev.line == "":
			running--
			wk.code = wk.cmd.ProcessState.ExitCode()
			if !started && ctx.Err() == nil {
				log.Error("worker ended before the start; stopping the others", "worker", wk.n, "status", ev.err)
				stop()
			}
		case verb == "ready":
			ready++
			if ready == len(workers) {
				started = true
				fmt.Println("all workers connected; go")
				for _, w := range workers {
					io.WriteString(w.stdin, "go\n")
				}
			}
		case verb == "acquired":
			var a acquired
			if err := json.Unmarshal([]byte(arg), &a); err != nil {
				log.Error("bad line from worker", "worker", wk.n, "line", ev.line)
				wk.badLine = true
				continue
			}
			wk.waits = append(wk.waits, a.Waited)
			fmt.Printf("worker %d  lease %d/%d busy  %d waiting  token=0x%x  waited %s\n",
				wk.n, a.Busy, cfg.leases, a.Waiting, a.Token, ms(a.Waited))
		case verb == "released":
			var r released
			if err := json.Unmarshal([]byte(arg), &r); err != nil {
				log.Error("bad line from worker", "worker", wk.n, "line", ev.line)
				wk.badLine = true
				continue
			}
			wk.holds = append(wk.holds, r)
		default:
			log.Error("unexpected line from worker", "worker", wk.n, "line", ev.line)
			wk.badLine = true
		}
	}
	if startFailed {
		return 1
	}
	if ctx.Err() != nil && started {
		fmt.Println("interrupted")
		return 130
	}
	return summarize(cfg, workers)
}

// maxBusy returns the largest number of pieces of work in progress at any
// one time, and when that was. A piece that ends exactly when another
// starts does not overlap it.
func maxBusy(holds []released) (int, time.Time) {
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	for _, h := range holds {
		edges = append(edges, edge{h.Start, +1}, edge{h.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta))
	})
	cur, best, at := 0, 0, int64(0)
	for _, e := range edges {
		cur += e.delta
		if cur > best {
			best, at = cur, e.t
		}
	}
	return best, time.Unix(0, at)
}

func summarize(cfg config, workers []*worker) int {
	ok := true
	var all []released
	fmt.Println()
	fmt.Println("summary")
	for _, wk := range workers {
		all = append(all, wk.holds...)
		var sum, longest time.Duration
		for _, w := range wk.waits {
			sum += w
			longest = max(longest, w)
		}
		line := fmt.Sprintf("  worker %d  %d leases  wait mean %s  max %s", wk.n, len(wk.holds), ms(mean(sum, len(wk.waits))), ms(longest))
		switch {
		case wk.code != 0:
			line += fmt.Sprintf("  FAILED (exit status %d)", wk.code)
			ok = false
		case len(wk.holds) != cfg.rounds || wk.badLine:
			line += fmt.Sprintf("  INCOMPLETE (%d of %d pieces of work reported)", len(wk.holds), cfg.rounds)
			ok = false
		}
		fmt.Println(line)
	}
	busy, at := maxBusy(all)
	if busy > 0 {
		fmt.Printf("  most workers busy at once: %d of %d allowed (first at %s)\n", busy, cfg.leases, at.Format("15:04:05.000"))
	}
	if busy > cfg.leases {
		fmt.Printf("FAIL: %d workers were busy at once, more than the %d leases\n", busy, cfg.leases)
		return 1
	}
	if !ok {
		fmt.Println("FAIL: a worker failed (see above)")
		return 1
	}
	fmt.Printf("ok: %d pieces of work, never more than %d at once\n", len(all), cfg.leases)
	return 0
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

func mean(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}
