//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command rwlock shows operating-system processes sharing one zkrecipes
// read/write lock: readers read a shared file together, a writer rewrites it
// alone.
//
// The parent process starts -readers reader processes and -writers writer
// processes, all copies of itself, each with its own ZooKeeper session.
// A reader, -reads times, takes the read lock, reads the file slowly and
// checks that it is not half-written, and unlocks. A writer, -writes times,
// takes the write lock, rewrites the file slowly with the next version, and
// unlocks. Every process prints what it does, with the time since the start
// and how many readers and writers were inside at that moment, and the
// parent checks at the end that no writer ever shared the lock and that no
// reader saw a half-written file.
//
//	go run ./examples/rwlock -zk 127.0.0.1:21811
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
	"github.com/zkrecipes/zkrecipes/rwlock"
)

type config struct {
	zk             string
	path           string
	file           string
	readers        int
	writers        int
	reads          int
	writes         int
	readTime       time.Duration
	writeTime      time.Duration
	sessionTimeout time.Duration
	lockTimeout    time.Duration
	curator        bool
	role           string // "reader" or "writer" in a child process
	id             int
	t0             int64 // the parent's start, Unix nanoseconds
}

func main() {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&cfg.path, "path", "/zkrecipes-demo/rwlock", "ZooKeeper path of the read/write lock")
	flag.StringVar(&cfg.file, "file", "", "data file shared by the processes, overwritten (default: a temporary file)")
	flag.IntVar(&cfg.readers, "readers", 3, "number of reader processes")
	flag.IntVar(&cfg.writers, "writers", 1, "number of writer processes")
	flag.IntVar(&cfg.reads, "reads", 8, "reads per reader")
	flag.IntVar(&cfg.writes, "writes", 4, "writes per writer")
	flag.DurationVar(&cfg.readTime, "read-time", 150*time.Millisecond, "time a reader takes to read the file")
	flag.DurationVar(&cfg.writeTime, "write-time", 100*time.Millisecond, "time a writer takes to rewrite the file")
	flag.DurationVar(&cfg.sessionTimeout, "session-timeout", 3*time.Second, "ZooKeeper session timeout of each process")
	flag.DurationVar(&cfg.lockTimeout, "lock-timeout", 30*time.Second, "how long a process waits for the lock before giving up")
	flag.BoolVar(&cfg.curator, "curator", false, "name the nodes like Curator's InterProcessReadWriteLock (__READ__, __WRIT__)")
	flag.StringVar(&cfg.role, "role", "", "run as a `reader` or `writer` (used by the parent process)")
	flag.IntVar(&cfg.id, "id", 0, "number of this reader or writer (used by the parent process)")
	flag.Int64Var(&cfg.t0, "t0", 0, "start time in Unix nanoseconds (used by the parent process)")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "rwlock:", err)
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
	if cfg.role != "" {
		os.Exit(runChild(cfg, logger.With(cfg.role, cfg.id)))
	}
	os.Exit(runParent(cfg, logger))
}

func (c *config) validate() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	case c.servers() == nil:
		return errors.New("-zk: no servers")
	case c.readers < 0 || c.writers < 0 || c.readers+c.writers == 0:
		return fmt.Errorf("-readers %d -writers %d: need at least one process", c.readers, c.writers)
	case c.reads < 1 || c.writes < 1:
		return fmt.Errorf("-reads %d -writes %d: need at least one each", c.reads, c.writes)
	case c.readTime < 0 || c.writeTime < 0:
		return errors.New("-read-time and -write-time must not be negative")
	case c.sessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: must be positive", c.sessionTimeout)
	case c.lockTimeout <= 0:
		return fmt.Errorf("-lock-timeout %v: must be positive", c.lockTimeout)
	case c.role != "" && c.role != "reader" && c.role != "writer":
		return fmt.Errorf("-role %q: reader or writer", c.role)
	case c.role != "" && (c.file == "" || c.id < 1 || c.t0 == 0):
		return errors.New("-role needs -file, -id and -t0")
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

// report is what a child tells the parent when it ends.
type report struct {
	Role       string
	ID         int
	Done       int           // reads or writes completed
	WaitSum    time.Duration // total time spent waiting for the lock
	WaitMax    time.Duration
	MaxReaders int // most readers inside at once, seen by this process
	Violations int // times a writer was not alone, or a reader met a writer
	Torn       int // reads that found a half-written file
	Lost       int // holds lost before the work was done
}

// Child/parent protocol, as in examples/mutex-counter: the child writes
// lines to file descriptor 3 ("ready", "result <json>") and reads its start
// signal from stdin.

func runChild(cfg config, log *slog.Logger) int {
	ctrl := os.NewFile(3, "control")
	if ctrl == nil {
		log.Error("no control pipe on file descriptor 3: run without -role")
		return 1
	}
	defer ctrl.Close()
	rep := report{Role: cfg.role, ID: cfg.id}
	code := child(cfg, log, ctrl, bufio.NewReader(os.Stdin), &rep)
	if b, err := json.Marshal(rep); err == nil {
		fmt.Fprintf(ctrl, "result %s\n", b)
	}
	return code
}

func child(cfg config, log *slog.Logger, ctrl io.Writer, stdin *bufio.Reader, rep *report) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := recipe.Connect(cctx, cfg.servers(),
		recipe.WithSessionTimeout(cfg.sessionTimeout),
		recipe.WithLogger(log))
	cancel()
	if err != nil {
		log.Error("cannot connect", "zk", cfg.zk, "err", err)
		return 1
	}
	defer c.Close()
	opts := []rwlock.Option{rwlock.WithData(fmt.Appendf(nil, "rwlock demo %s %d pid %d", cfg.role, cfg.id, os.Getpid()))}
	if cfg.curator {
		opts = append(opts, rwlock.WithCuratorNames())
	}
	rw, err := rwlock.New(c, cfg.path, opts...)
	if err != nil {
		log.Error("cannot create the lock", "err", err)
		return 1
	}
	d := data{path: cfg.file}
	in := inside{path: cfg.file + ".inside"}
	t0 := time.Unix(0, cfg.t0)
	say := func(format string, args ...any) {
		fmt.Printf("%7s  %s %d  %s\n", since(t0), cfg.role, cfg.id, fmt.Sprintf(format, args...))
	}

	// Wait until every process is connected, so that they all start together.
	fmt.Fprintln(ctrl, "ready")
	if _, err := stdin.ReadString('\n'); err != nil {
		log.Error("no start signal from the parent", "err", err)
		return 1
	}

	rnd := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(cfg.t0)))
	writer := cfg.role == "writer"
	n := cfg.reads
	if writer {
		n = cfg.writes
		// Let the readers get going first.
		time.Sleep(cfg.readTime / 2)
	}
	for rep.Done < n {
		lctx, cancel := context.WithTimeout(ctx, cfg.lockTimeout)
		start := time.Now()
		if writer {
			say("wants to write")
			err = rw.Lock(lctx)
		} else {
			err = rw.RLock(lctx)
		}
		cancel()
		waited := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return 130 // interrupted
			}
			log.Error("cannot take the lock", "err", err)
			return 1
		}
		rep.WaitSum += waited
		rep.WaitMax = max(rep.WaitMax, waited)

		// Critical section.
		readers, writers, err := in.enter(writer)
		if err != nil {
			log.Error("presence file", "err", err)
			return 1
		}
		var (
			lost    <-chan struct{}
			line    string
			version int64
			torn    bool
			werr    error
		)
		if writer {
			lost = rw.Done()
			version, werr = d.rewrite(cfg.writeTime, rw.Token(), lost)
			line = fmt.Sprintf("wrote v%d  token=0x%x  waited %s", version, rw.Token(), ms(waited))
		} else {
			lost = rw.RDone()
			version, torn, werr = d.read(cfg.readTime)
			line = fmt.Sprintf("read  v%d  waited %s", version, ms(waited))
		}
		// The counts when this process left, itself included: with those
		// at its entry, they show who shared the lock with it.
		r2, w2, err := in.exit(writer)
		if err != nil {
			log.Error("presence file", "err", err)
			return 1
		}
		readers, writers = max(readers, r2), max(writers, w2)
		rep.MaxReaders = max(rep.MaxReaders, readers)
		who := fmt.Sprintf("(%d %s inside)", readers, plural(readers, "reader"))
		if writer {
			who = "(alone)"
		}
		if writer && (readers > 0 || writers > 1) || !writer && writers > 0 {
			rep.Violations++
			who = fmt.Sprintf("VIOLATION: %d readers and %d writers inside", readers, writers)
		}
		switch {
		case errors.Is(werr, errLost) || werr == nil && isClosed(lost):
			log.Error("lock lost during the critical section; doing it again", "err", errors.Join(rw.Err(), rw.RErr()))
			rep.Lost++
		case werr != nil:
			log.Error("cannot use the file", "err", werr)
			return 1
		default:
			rep.Done++
			if torn {
				rep.Torn++
				who += "  TORN: the file was half-written"
			}
			say("%s  %s", line, who)
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
		// Think a little before the next turn.
		time.Sleep(time.Duration(rnd.Int64N(int64(max(cfg.readTime, cfg.writeTime)) + 1)))
	}
	return 0
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var errLost = errors.New("lock lost")

// data is the shared file: lines "v<N> token=0x<T> line <i>", all with the
// same version. A writer rewrites it line by line, slowly; a reader reads it
// line by line, slowly. Without the lock a reader would see lines of two
// versions: a torn read.
type data struct{ path string }

const dataLines = 5

func initData(path string) error {
	return os.WriteFile(path, content(0, 0), 0o644)
}

func content(v, token int64) []byte {
	var b []byte
	for i := range dataLines {
		b = fmt.Appendf(b, "v%d token=0x%x line %d\n", v, token, i+1)
	}
	return b
}

// read reads the file over about d and returns its version, and whether its
// lines disagree.
func (f data) read(d time.Duration) (version int64, torn bool, err error) {
	var versions []int64
	for i := range dataLines {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return 0, false, err
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		var v int64 = -1
		if i < len(lines) {
			fmt.Sscanf(lines[i], "v%d", &v)
		}
		versions = append(versions, v)
		time.Sleep(d / dataLines)
	}
	slices.Sort(versions)
	return versions[0], versions[0] != versions[len(versions)-1], nil
}

// rewrite writes the next version line by line over about d, stopping if
// lost is closed first. It returns the new version.
func (f data) rewrite(d time.Duration, token int64, lost <-chan struct{}) (int64, error) {
	v, _, err := f.read(0)
	if err != nil {
		return 0, err
	}
	next := content(v+1, token)
	lines := strings.SplitAfter(string(next), "\n")
	cur, err := os.ReadFile(f.path)
	if err != nil {
		return 0, err
	}
	old := strings.SplitAfter(string(cur), "\n")
	for i := range dataLines {
		if isClosed(lost) {
			return 0, errLost
		}
		if i < len(old) {
			old[i] = lines[i]
		}
		if err := os.WriteFile(f.path, []byte(strings.Join(old, "")), 0o644); err != nil {
			return 0, err
		}
		time.Sleep(d / dataLines)
	}
	return v + 1, nil
}

// inside counts the processes in the critical section, in a file shared by
// all of them ("readers=R writers=W") and updated under flock, so every
// process sees the true count when it enters.
type inside struct{ path string }

func (in inside) update(write bool, delta int) (readers, writers int, err error) {
	f, err := os.OpenFile(in.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close() // also releases the file lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, 0, fmt.Errorf("flock %s: %w", in.path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, 0, err
	}
	if len(b) > 0 {
		if _, err := fmt.Sscanf(string(b), "readers=%d writers=%d", &readers, &writers); err != nil {
			return 0, 0, fmt.Errorf("%s: bad content %q: %w", in.path, b, err)
		}
	}
	if write {
		writers += delta
	} else {
		readers += delta
	}
	if err := f.Truncate(0); err != nil {
		return 0, 0, err
	}
	_, err = f.WriteAt(fmt.Appendf(nil, "readers=%d writers=%d\n", readers, writers), 0)
	return readers, writers, err
}

func (in inside) enter(write bool) (readers, writers int, err error) { return in.update(write, 1) }

// exit returns the counts just before this process left.
func (in inside) exit(write bool) (readers, writers int, err error) {
	readers, writers, err = in.update(write, -1)
	if write {
		writers++
	} else {
		readers++
	}
	return readers, writers, err
}

func since(t0 time.Time) string {
	return "+" + strconv.FormatFloat(time.Since(t0).Seconds(), 'f', 3, 64) + "s"
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// proc is the parent's view of one child process.
type proc struct {
	role  string
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	rep   *report
	code  int
}

// event is a control line from a child, or its exit (line "").
type event struct {
	p    *proc
	line string
	err  error
}

func runParent(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.file == "" {
		f, err := os.CreateTemp("", "zkrecipes-demo-rwlock-*.txt")
		if err != nil {
			log.Error("cannot create the data file", "err", err)
			return 1
		}
		f.Close()
		cfg.file = f.Name()
		defer os.Remove(cfg.file)
	}
	defer os.Remove(cfg.file + ".inside")
	if err := initData(cfg.file); err != nil {
		log.Error("cannot initialise the data file", "err", err)
		return 1
	}
	if err := os.WriteFile(cfg.file+".inside", nil, 0o644); err != nil {
		log.Error("cannot initialise the presence file", "err", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		log.Error("cannot find this program's executable", "err", err)
		return 1
	}
	fmt.Printf("rwlock demo: %d %s x %d reads, %d %s x %d writes, lock %s on %s\n",
		cfg.readers, plural(cfg.readers, "reader"), cfg.reads, cfg.writers, plural(cfg.writers, "writer"), cfg.writes, cfg.path, cfg.zk)
	fmt.Printf("data file %s\n\n", cfg.file)

	t0 := time.Now()
	var procs []*proc
	var ctrls []*os.File
	start := func(role string, id int) error {
		cmd := exec.CommandContext(ctx, exe,
			"-role", role, "-id", strconv.Itoa(id), "-t0", strconv.FormatInt(t0.UnixNano(), 10),
			"-zk", cfg.zk, "-path", cfg.path, "-file", cfg.file,
			"-reads", strconv.Itoa(cfg.reads), "-writes", strconv.Itoa(cfg.writes),
			"-read-time", cfg.readTime.String(), "-write-time", cfg.writeTime.String(),
			"-session-timeout", cfg.sessionTimeout.String(), "-lock-timeout", cfg.lockTimeout.String(),
			"-curator="+strconv.FormatBool(cfg.curator))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		// On interrupt, let the child close its session; kill it if it does
		// not end soon.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		cmd.ExtraFiles = []*os.File{w}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		w.Close()
		ctrls = append(ctrls, r)
		procs = append(procs, &proc{role: role, id: id, cmd: cmd, stdin: stdin})
		return nil
	}
	for i := 1; i <= cfg.readers; i++ {
		if err := start("reader", i); err != nil {
			log.Error("cannot start reader", "reader", i, "err", err)
			return 1
		}
	}
	for i := 1; i <= cfg.writers; i++ {
		if err := start("writer", i); err != nil {
			log.Error("cannot start writer", "writer", i, "err", err)
			return 1
		}
	}
	events := make(chan event)
	for i, p := range procs {
		go func() {
			sc := bufio.NewScanner(ctrls[i])
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					events <- event{p: p, line: line}
				}
			}
			ctrls[i].Close()
			events <- event{p: p, err: p.cmd.Wait()}
		}()
	}

	ready, running, started, aborted := 0, len(procs), false, false
	for running > 0 {
		ev := <-events
		p := ev.p
		verb, arg, _ := strings.Cut(ev.line, " ")
		switch {
		case ev.line == "":
			running--
			p.code = p.cmd.ProcessState.ExitCode()
			if !started && ctx.Err() == nil {
				log.Error("process ended before the start; stopping the others", p.role, p.id, "status", ev.err)
				aborted = true
				stop()
			}
		case verb == "ready":
			ready++
			if ready == len(procs) {
				started = true
				for _, q := range procs {
					io.WriteString(q.stdin, "go\n")
				}
			}
		case verb == "result":
			var r report
			if err := json.Unmarshal([]byte(arg), &r); err != nil {
				log.Error("bad report", p.role, p.id, "err", err)
				continue
			}
			p.rep = &r
		}
	}
	if ctx.Err() != nil && !aborted {
		fmt.Println("interrupted")
		return 130
	}
	return summarize(cfg, procs, time.Since(t0))
}

func summarize(cfg config, procs []*proc, took time.Duration) int {
	fmt.Println()
	fmt.Printf("summary (%s)\n", ms(took))
	ok := true
	maxReaders, violations, torn := 0, 0, 0
	for _, p := range procs {
		r := p.rep
		if r == nil {
			fmt.Printf("  %s %d  no report (exit status %d)\n", p.role, p.id, p.code)
			ok = false
			continue
		}
		maxReaders = max(maxReaders, r.MaxReaders)
		violations += r.Violations
		torn += r.Torn
		what := "reads "
		if p.role == "writer" {
			what = "writes"
		}
		line := fmt.Sprintf("  %s %d  %2d %s  wait mean %s  max %s", p.role, p.id, r.Done, what,
			ms(mean(r.WaitSum, r.Done+r.Lost)), ms(r.WaitMax))
		if r.Lost > 0 {
			line += fmt.Sprintf("  lost %d", r.Lost)
		}
		if p.code != 0 {
			line += fmt.Sprintf("  FAILED (exit status %d)", p.code)
			ok = false
		}
		fmt.Println(line)
	}
	fmt.Printf("  most readers inside at once: %d\n", maxReaders)
	switch {
	case violations > 0:
		fmt.Printf("FAIL: %d times a writer shared the lock\n", violations)
		return 1
	case torn > 0:
		fmt.Printf("FAIL: %d reads found a half-written file\n", torn)
		return 1
	case !ok:
		fmt.Println("FAIL: a process failed (see above)")
		return 1
	}
	fmt.Println("ok: readers shared the lock, every writer was alone, no read saw a half-written file")
	return 0
}

func mean(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}
