//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command mutex-counter shows operating-system processes contending for one
// zkrecipes mutex.
//
// The parent process starts -workers copies of itself. Each worker opens its
// own ZooKeeper session and, -increments times, takes the mutex (with a
// timeout), reads a counter from a shared file, sleeps a little (so that a
// broken lock would lose updates), writes the counter plus one, and unlocks.
// The parent then checks that no update was lost.
//
// The file stands for a storage service that honours fencing tokens: every
// write carries the writer's token (the czxid of its lock node), and the
// write is refused when the file was last written with a greater token,
// that is, by a later holder. With -stall N the parent stops worker N
// (SIGSTOP) while it holds the lock, long enough for its session to expire
// and the lock to pass on, then resumes it: its write is refused.
//
//	go run ./examples/mutex-counter -zk 127.0.0.1:21811 -workers 4 -increments 25
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// exitFenced is a worker's exit code when its write was refused because a
// later lock holder had written first.
const exitFenced = 3

type config struct {
	zk             string
	path           string
	file           string
	workers        int
	increments     int
	work           time.Duration
	sessionTimeout time.Duration
	lockTimeout    time.Duration
	stall          int
	worker         int // > 0 in a worker process
}

func main() {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&cfg.path, "path", "/zkrecipes-demo/counter", "ZooKeeper path of the mutex")
	flag.StringVar(&cfg.file, "file", "", "counter file shared by the workers, overwritten (default: a temporary file)")
	flag.IntVar(&cfg.workers, "workers", 4, "number of worker processes")
	flag.IntVar(&cfg.increments, "increments", 25, "increments per worker")
	flag.DurationVar(&cfg.work, "work", 5*time.Millisecond, "time each worker spends between reading and writing the counter")
	flag.DurationVar(&cfg.sessionTimeout, "session-timeout", 3*time.Second, "ZooKeeper session timeout of each worker")
	flag.DurationVar(&cfg.lockTimeout, "lock-timeout", 30*time.Second, "how long a worker waits for the mutex before giving up")
	flag.IntVar(&cfg.stall, "stall", 0, "stop worker `N` while it holds the mutex until its session expires, to show fencing (0: never)")
	flag.IntVar(&cfg.worker, "worker", 0, "run as worker `N` (used by the parent process)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: mutex-counter [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "mutex-counter:", err)
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
	case c.increments < 1:
		return fmt.Errorf("-increments %d: need at least one", c.increments)
	case c.work < 0:
		return fmt.Errorf("-work %v: must not be negative", c.work)
	case c.sessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: must be positive", c.sessionTimeout)
	case c.lockTimeout <= 0:
		return fmt.Errorf("-lock-timeout %v: must be positive", c.lockTimeout)
	case c.stall < 0 || c.stall > c.workers:
		return fmt.Errorf("-stall %d: not a worker (1..%d)", c.stall, c.workers)
	case c.worker < 0:
		return fmt.Errorf("-worker %d: must be positive", c.worker)
	case c.worker > 0 && c.file == "":
		return errors.New("-worker needs -file")
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

// report is what a worker tells the parent when it ends.
type report struct {
	Worker   int
	Acquired int           // successful Lock calls
	Writes   int           // counter writes the file accepted
	WaitSum  time.Duration // total time spent in Lock
	WaitMax  time.Duration
	Lost     int  // holds lost before their write or before Unlock
	Fenced   bool // a write was refused: a later holder had written
}

// Worker/parent protocol. The worker writes lines to file descriptor 3
// ("ready", "stall <session timeout>", "result <json>") and reads lines from
// stdin (the start signal, and the end of a stall).

func runWorker(cfg config, log *slog.Logger) int {
	ctrl := os.NewFile(3, "control")
	if ctrl == nil {
		log.Error("no control pipe on file descriptor 3: run without -worker")
		return 1
	}
	defer ctrl.Close()
	stdin := bufio.NewReader(os.Stdin)
	rep := report{Worker: cfg.worker}
	code := work(cfg, log, ctrl, stdin, &rep)
	if b, err := json.Marshal(rep); err == nil {
		fmt.Fprintf(ctrl, "result %s\n", b)
	}
	return code
}

func work(cfg config, log *slog.Logger, ctrl io.Writer, stdin *bufio.Reader, rep *report) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

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
	m, err := mutex.New(c, cfg.path, mutex.WithData(fmt.Appendf(nil, "mutex-counter worker %d pid %d", cfg.worker, os.Getpid())))
	if err != nil {
		log.Error("cannot create the mutex", "err", err)
		return 1
	}
	st := store{path: cfg.file}

	// Wait until every worker is connected, so that they all contend.
	fmt.Fprintln(ctrl, "ready")
	if _, err := stdin.ReadString('\n'); err != nil {
		if ctx.Err() != nil {
			return 130
		}
		log.Error("no start signal from the parent", "err", err)
		return 1
	}

	stallAt := 0
	if cfg.stall == cfg.worker {
		stallAt = (cfg.increments + 1) / 2
	}
	for done := 0; done < cfg.increments; {
		// Take the mutex, waiting at most -lock-timeout.
		lctx, cancel := context.WithTimeout(ctx, cfg.lockTimeout)
		start := time.Now()
		err := m.Lock(lctx)
		cancel()
		waited := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return 130 // interrupted
			}
			log.Error("cannot take the mutex", "err", err)
			return 1
		}
		rep.Acquired++
		rep.WaitSum += waited
		rep.WaitMax = max(rep.WaitMax, waited)
		token := m.Token()

		// Critical section: read, work, write.
		cur, err := st.read()
		if err != nil {
			log.Error("cannot read the counter", "err", err)
			unlock(m, log, rep)
			return 1
		}
		time.Sleep(cfg.work)
		select {
		case <-m.Done():
			// Lost while working (session expired, connection suspended):
			// write nothing and do this increment again.
			log.Error("mutex lost before writing; retrying the increment", "err", m.Err())
			rep.Lost++
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.Unlock(ctx) // ends the lost hold; reports the loss again
			cancel()
			continue
		default:
		}
		if done+1 == stallAt {
			stallAt = 0
			fmt.Printf("worker %d  holds %s  token=0x%x  waited %s  read counter %d, stalls before writing\n",
				cfg.worker, cfg.path, token, ms(waited), cur.counter)
			fmt.Fprintf(ctrl, "stall %d\n", c.SessionTimeout().Milliseconds())
			if _, err := stdin.ReadString('\n'); err != nil {
				if ctx.Err() != nil {
					return 130
				}
				log.Error("no resume signal from the parent", "err", err)
				return 1
			}
			// The check above passed before the stall; nothing here
			// notices that the mutex was lost meanwhile. The fence does.
		}
		prev, err := st.write(cur.counter+1, token)
		var fe *fencedError
		if errors.As(err, &fe) {
			// Give the client a moment to notice the loss, to show it.
			select {
			case <-m.Done():
			case <-time.After(3 * time.Second):
			}
			log.Error("write refused: a later lock holder has written since this worker took the mutex",
				"own_token", fmt.Sprintf("0x%x", token), "file_token", fmt.Sprintf("0x%x", fe.file.token),
				"file_counter", fe.file.counter, "mutex", errString(m.Err()))
			rep.Fenced = true
			return exitFenced
		}
		if err != nil {
			log.Error("cannot write the counter", "err", err)
			unlock(m, log, rep)
			return 1
		}
		rep.Writes++
		done++
		fmt.Printf("worker %d  holds %s  token=0x%x  waited %s  counter %d -> %d\n",
			cfg.worker, cfg.path, token, ms(waited), prev.counter, cur.counter+1)
		unlock(m, log, rep)
	}
	return 0
}

func unlock(m *mutex.Mutex, log *slog.Logger, rep *report) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Unlock(ctx); err != nil {
		if errors.Is(err, mutex.ErrLost) {
			rep.Lost++
		}
		log.Error("unlock", "err", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "still held"
	}
	return err.Error()
}

// store is the counter file: "counter=N token=0xT". It plays a storage
// service that honours fencing tokens: write refuses a token lower than the
// last one written, and checks and writes under a file lock, so the check
// and the write are one atomic step for every process.
type store struct{ path string }

type state struct{ counter, token int64 }

func (s state) String() string { return fmt.Sprintf("counter=%d token=0x%x\n", s.counter, s.token) }

// fencedError is returned by write when the file carries a greater token.
type fencedError struct{ file state }

func (e *fencedError) Error() string {
	return fmt.Sprintf("fenced: the file was written with token 0x%x", e.file.token)
}

func initStore(path string) error {
	return os.WriteFile(path, []byte(state{}.String()), 0o644)
}

func (s store) read() (state, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return state{}, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return state{}, fmt.Errorf("flock %s: %w", s.path, err)
	}
	return readState(f)
}

// write stores counter with token unless the file was last written with a
// greater token. It returns the state it replaced.
func (s store) write(counter, token int64) (state, error) {
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return state{}, err
	}
	defer f.Close() // also releases the file lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return state{}, fmt.Errorf("flock %s: %w", s.path, err)
	}
	cur, err := readState(f)
	if err != nil {
		return state{}, err
	}
	if cur.token > token {
		return cur, &fencedError{file: cur}
	}
	if err := f.Truncate(0); err != nil {
		return cur, err
	}
	_, err = f.WriteAt([]byte(state{counter, token}.String()), 0)
	return cur, err
}

func readState(f *os.File) (state, error) {
	b, err := io.ReadAll(f)
	if err != nil {
		return state{}, err
	}
	var st state
	if _, err := fmt.Sscanf(string(b), "counter=%d token=0x%x", &st.counter, &st.token); err != nil {
		return state{}, fmt.Errorf("%s: bad content %q: %w", f.Name(), b, err)
	}
	return st, nil
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// worker is the parent's view of one worker process.
type worker struct {
	n      int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	rep    *report
	code   int
	exited bool
}

// event is a control line from a worker, or its exit (line "").
type event struct {
	w    *worker
	line string
	err  error // exit status, when line == ""
}

func runParent(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.file == "" {
		f, err := os.CreateTemp("", "zkrecipes-demo-counter-*.txt")
		if err != nil {
			log.Error("cannot create the counter file", "err", err)
			return 1
		}
		f.Close()
		cfg.file = f.Name()
		defer os.Remove(cfg.file)
	}
	if err := initStore(cfg.file); err != nil {
		log.Error("cannot initialise the counter file", "err", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		log.Error("cannot find this program's executable", "err", err)
		return 1
	}
	fmt.Printf("mutex-counter: %d worker processes x %d increments, mutex %s on %s\n",
		cfg.workers, cfg.increments, cfg.path, cfg.zk)
	fmt.Printf("counter file %s\n", cfg.file)

	events := make(chan event)
	workers := make([]*worker, 0, cfg.workers)
	var ctrlReaders []*os.File
	for n := 1; n <= cfg.workers; n++ {
		cmd := exec.CommandContext(ctx, exe,
			"-worker", strconv.Itoa(n),
			"-zk", cfg.zk,
			"-path", cfg.path,
			"-file", cfg.file,
			"-increments", strconv.Itoa(cfg.increments),
			"-work", cfg.work.String(),
			"-session-timeout", cfg.sessionTimeout.String(),
			"-lock-timeout", cfg.lockTimeout.String(),
			"-stall", strconv.Itoa(cfg.stall))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		// On interrupt, let the worker close its session; kill it if it
		// does not end soon.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		r, w, err := os.Pipe()
		if err != nil {
			log.Error("pipe", "err", err)
			return 1
		}
		cmd.ExtraFiles = []*os.File{w}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			log.Error("stdin pipe", "err", err)
			return 1
		}
		if err := cmd.Start(); err != nil {
			log.Error("cannot start worker", "worker", n, "err", err)
			return 1
		}
		w.Close()
		ctrlReaders = append(ctrlReaders, r)
		workers = append(workers, &worker{n: n, cmd: cmd, stdin: stdin})
	}
	for i, wk := range workers {
		go func() {
			sc := bufio.NewScanner(ctrlReaders[i])
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					events <- event{w: wk, line: line}
				}
			}
			ctrlReaders[i].Close()
			events <- event{w: wk, err: wk.cmd.Wait()}
		}()
	}

	go func() {
		// Workers waiting for a line on stdin see the end of it instead.
		<-ctx.Done()
		for _, w := range workers {
			w.stdin.Close()
		}
	}()
	ready, running, started, aborted := 0, len(workers), false, false
	for running > 0 {
		ev := <-events
		wk := ev.w
		verb, arg, _ := strings.Cut(ev.line, " ")
		switch {
		case ev.line == "":
			running--
			wk.exited = true
			wk.code = wk.cmd.ProcessState.ExitCode()
			if !started && ctx.Err() == nil {
				log.Error("worker ended before the start; stopping the others", "worker", wk.n, "status", ev.err)
				aborted = true
				stop() // ends the other workers
			}
		case verb == "ready":
			ready++
			if ready == len(workers) {
				started = true
				for _, w := range workers {
					io.WriteString(w.stdin, "go\n")
				}
			}
		case verb == "stall":
			timeoutMs, _ := strconv.ParseInt(arg, 10, 64)
			go stall(ctx, wk, 2*time.Duration(timeoutMs)*time.Millisecond+time.Second, log)
		case verb == "result":
			var r report
			if err := json.Unmarshal([]byte(arg), &r); err != nil {
				log.Error("bad report from worker", "worker", wk.n, "err", err)
				continue
			}
			wk.rep = &r
		}
	}
	if ctx.Err() != nil && !aborted {
		fmt.Println("interrupted")
		return 130
	}
	return summarize(cfg, workers, log)
}

// stall stops a worker process for d, as a long garbage-collection pause or
// a suspended virtual machine would, then lets it continue.
func stall(ctx context.Context, wk *worker, d time.Duration, log *slog.Logger) {
	p := wk.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		log.Error("cannot stop worker", "worker", wk.n, "err", err)
	} else {
		fmt.Printf("parent    stops worker %d (pid %d) for %v while it holds the mutex; its session expires\n", wk.n, p.Pid, d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			p.Signal(syscall.SIGCONT) // to end; its stdin is closed
			return
		}
		fmt.Printf("parent    resumes worker %d, which goes on to write\n", wk.n)
		if err := p.Signal(syscall.SIGCONT); err != nil {
			log.Error("cannot resume worker", "worker", wk.n, "err", err)
		}
	}
	io.WriteString(wk.stdin, "resume\n")
}

func summarize(cfg config, workers []*worker, log *slog.Logger) int {
	final, err := store{path: cfg.file}.read()
	if err != nil {
		log.Error("cannot read the final counter", "err", err)
		return 1
	}
	expected := int64(cfg.workers * cfg.increments)
	ok := true
	var writes int64
	fenced := 0
	fmt.Println()
	fmt.Println("summary")
	fmt.Printf("  final count     %d  (last token 0x%x)\n", final.counter, final.token)
	fmt.Printf("  expected count  %d  (%d workers x %d increments)\n", expected, cfg.workers, cfg.increments)
	slices.SortFunc(workers, func(a, b *worker) int { return a.n - b.n })
	for _, wk := range workers {
		r := wk.rep
		if r == nil {
			fmt.Printf("  worker %d  no report (exit status %d)\n", wk.n, wk.code)
			ok = false
			continue
		}
		writes += int64(r.Writes)
		line := fmt.Sprintf("  worker %d  %3d acquisitions  wait mean %s  max %s", wk.n, r.Acquired, ms(mean(r.WaitSum, r.Acquired)), ms(r.WaitMax))
		if r.Lost > 0 {
			line += fmt.Sprintf("  lost %d", r.Lost)
		}
		switch {
		case r.Fenced && wk.code == exitFenced:
			fenced++
			line += fmt.Sprintf("  FENCED after %d writes: its stale write was refused", r.Writes)
			if wk.n != cfg.stall {
				ok = false
			}
		case wk.code != 0:
			line += fmt.Sprintf("  FAILED (exit status %d)", wk.code)
			ok = false
		}
		fmt.Println(line)
	}
	if final.counter != writes {
		fmt.Printf("FAIL: the workers made %d writes but the counter is %d: updates were lost\n", writes, final.counter)
		return 1
	}
	if !ok {
		fmt.Println("FAIL: a worker failed (see above)")
		return 1
	}
	if fenced > 0 {
		fmt.Printf("ok: no update was lost; worker %d's write after its stall was refused by the fencing token, so the count is %d short\n",
			cfg.stall, expected-final.counter)
		return 0
	}
	if final.counter != expected {
		fmt.Printf("FAIL: the count is %d, expected %d\n", final.counter, expected)
		return 1
	}
	fmt.Println("ok: no update was lost")
	return 0
}

func mean(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}
