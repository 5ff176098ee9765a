package demo

import (
	"bufio"
	"context"
	"encoding/json"
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
)

// The environment through which Spawn tells a child who it is and when
// the demo started.
const (
	envChild = "ZKRECIPES_DEMO_CHILD" // "<role> <n>"
	envStart = "ZKRECIPES_DEMO_START" // Unix nanoseconds
)

// start is when the demo started: the parent's start, in every process.
var start = startTime()

func startTime() time.Time {
	if ns, err := strconv.ParseInt(os.Getenv(envStart), 10, 64); err == nil {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// Elapsed returns the time since the parent process started. Every process
// of a demo reads the same clock, so their timelines line up.
func Elapsed() time.Duration { return time.Since(start) }

// Self reports whether this process is a child started by [Spawn] and, if
// so, the role and number it was given.
func Self() (role string, n int, ok bool) {
	v, found := os.LookupEnv(envChild)
	if !found {
		return "", 0, false
	}
	role, num, _ := strings.Cut(v, " ")
	n, err := strconv.Atoi(num)
	if err != nil || role == "" {
		return "", 0, false
	}
	return role, n, true
}

// Child is the parent's view of a child process started by [Spawn].
type Child struct {
	Role string // as given to Spawn
	N    int    // as given to Spawn
	// Result is the payload of the child's last "result" line, kept by
	// [Run]; decode it with [Child.Report].
	Result []byte

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
	code   int
}

// Spawn starts a copy of the running program with the same arguments
// followed by args, as child role n (see [Self]). The child shares the
// parent's standard output and error; its standard input and file
// descriptor 3 are pipes to and from the parent. The caller must read
// [Child.Lines] until it is closed (or hand the child to [Run]). When ctx
// ends, the child gets SIGTERM, and SIGKILL 5 seconds later if it is still
// running.
func Spawn(ctx context.Context, role string, n int, args ...string) (*Child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program's executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, append(slices.Clone(os.Args[1:]), args...)...)
	cmd.Env = append(os.Environ(),
		envChild+"="+role+" "+strconv.Itoa(n),
		envStart+"="+strconv.FormatInt(start.UnixNano(), 10))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Let the child close its session; kill it if it does not end soon.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s %d: %w", role, n, err)
	}
	c := &Child{Role: role, N: n, cmd: cmd, stdin: stdin, lines: make(chan string, 16), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				c.lines <- line
			}
		}
		r.Close()
		close(c.lines)
		cmd.Wait()
		c.code = cmd.ProcessState.ExitCode()
		close(c.exited)
	}()
	return c, nil
}

// Name returns the child's role and number: "worker 3".
func (c *Child) Name() string { return c.Role + " " + strconv.Itoa(c.N) }

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Lines returns the lines the child writes to its control pipe (empty
// lines dropped), closed when the child closes it.
func (c *Child) Lines() <-chan string { return c.lines }

// Send writes line and a newline to the child's standard input.
func (c *Child) Send(line string) error {
	_, err := io.WriteString(c.stdin, line+"\n")
	return err
}

// Await reads the child's next control line and fails unless it is want.
func (c *Child) Await(ctx context.Context, want string) error {
	select {
	case got, ok := <-c.lines:
		if !ok {
			return fmt.Errorf("%s ended before saying %q", c.Name(), want)
		}
		if got != want {
			return fmt.Errorf("%s said %q, want %q", c.Name(), got, want)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s to say %q: %w", c.Name(), want, ctx.Err())
	}
}

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Done is closed when the child has exited and its control pipe is drained.
func (c *Child) Done() <-chan struct{} { return c.exited }

// Wait waits for the child to exit, reading and dropping any control line
// left, and returns its exit status (-1 if a signal ended it).
func (c *Child) Wait() int {
	for range c.lines {
	}
	<-c.exited
	return c.code
}

// Stop asks the child to end (SIGTERM), kills it if it has not within
// grace, and returns its exit status.
func (c *Child) Stop(grace time.Duration) int {
	c.Signal(syscall.SIGTERM)
	t := time.AfterFunc(grace, func() { c.cmd.Process.Kill() })
	defer t.Stop()
	return c.Wait()
}

// Report decodes the child's result (see [Child.Result]) into v. It
// returns false if there is none or it does not decode.
func (c *Child) Report(v any) bool {
	return c.Result != nil && json.Unmarshal(c.Result, v) == nil
}

// Run follows children started together until every one has exited.
// Once all of them have said "ready", it calls onStart (if not nil) and
// tells each "go". It keeps the payload of each child's "result" line in
// [Child.Result], pauses a child that asks for it ([Parent.Pause]), and
// passes every other line, split into its first word and the rest, to
// handle (if not nil), one at a time.
//
// If a child exits before the start, Run stops the others (SIGTERM) and
// returns an error naming it. If ctx ends, Run closes the children's
// standard input, so that a child waiting for the parent sees the end of
// it, and returns ctx.Err() once they have exited.
func Run(ctx context.Context, children []*Child, onStart func(), handle func(c *Child, verb, arg string)) error {
	type event struct {
		c    *Child
		line string // "" when c has exited
	}
	events := make(chan event)
	for _, c := range children {
		go func() {
			for line := range c.lines {
				events <- event{c, line}
			}
			<-c.exited
			events <- event{c: c}
		}()
	}
	closeInputs := func() {
		for _, c := range children {
			c.stdin.Close()
		}
	}
	defer context.AfterFunc(ctx, closeInputs)()

	var early *Child // the first child that exited before the start
	ready, running, started := 0, len(children), false
	for running > 0 {
		ev := <-events
		verb, arg, _ := strings.Cut(ev.line, " ")
		switch {
		case ev.line == "":
			running--
			if !started && early == nil && ctx.Err() == nil {
				early = ev.c
				for _, c := range children {
					c.Signal(syscall.SIGTERM) // fails, harmlessly, for those that have exited
				}
				closeInputs()
			}
		case verb == "ready" && !started:
			if ready++; ready == len(children) {
				started = true
				if onStart != nil {
					onStart()
				}
				for _, c := range children {
					c.Send("go")
				}
			}
		case verb == "result":
			ev.c.Result = []byte(arg)
		case verb == "pause":
			go pauseFor(ctx, ev.c, arg)
		case handle != nil:
			handle(ev.c, verb, arg)
		}
	}
	switch {
	case early != nil:
		return fmt.Errorf("%s ended before the start (exit status %d)", early.Name(), early.code)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return nil
}

// Parent is a child's channel to its parent: lines written to file
// descriptor 3, lines read from standard input.
type Parent struct {
	ctrl *os.File
	in   *bufio.Reader
}

// ToParent returns the channel to the parent. Call it only in a child
// (see [Self]).
func ToParent() *Parent {
	return &Parent{ctrl: os.NewFile(3, "control"), in: bufio.NewReader(os.Stdin)}
}

// Send writes verb to the parent, followed by v encoded as JSON unless v
// is nil: "result {...}".
func (p *Parent) Send(verb string, v any) error {
	line := []byte(verb)
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = append(append(line, ' '), b...)
	}
	_, err := p.ctrl.Write(append(line, '\n'))
	return err
}

// Recv returns the parent's next line, without its newline.
func (p *Parent) Recv() (string, error) {
	line, err := p.in.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading from the parent: %w", err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// Expect reads the parent's next line and fails unless it is want.
func (p *Parent) Expect(want string) error {
	got, err := p.Recv()
	if err != nil {
		return fmt.Errorf("waiting for %q: %w", want, err)
	}
	if got != want {
		return fmt.Errorf("the parent said %q, want %q", got, want)
	}
	return nil
}

// Ready tells the parent this child is ready and waits for its "go" (see
// [Run]).
func (p *Parent) Ready() error {
	if err := p.Send("ready", nil); err != nil {
		return err
	}
	return p.Expect("go")
}

// Close closes the pipe to the parent.
func (p *Parent) Close() error { return p.ctrl.Close() }

// SpawnN starts children role 1 to count with [Spawn]. If one fails to
// start, it stops those already started and returns the error.
func SpawnN(ctx context.Context, role string, count int, args ...string) ([]*Child, error) {
	var children []*Child
	for n := 1; n <= count; n++ {
		c, err := Spawn(ctx, role, n, args...)
		if err != nil {
			for _, c := range children {
				c.Stop(5 * time.Second)
			}
			return nil, err
		}
		children = append(children, c)
	}
	return children, nil
}

// Fail returns a child's exit status after a failure: 130 if ctx has ended
// (an interrupt), else 1 after logging msg and err.
func Fail(ctx context.Context, log *slog.Logger, msg string, err error) int {
	if ctx.Err() != nil {
		return 130
	}
	log.Error(msg, "err", err)
	return 1
}

// pauseFor pauses c as its line "pause <duration> <why>" asks, then tells
// it "resume".
func pauseFor(ctx context.Context, c *Child, arg string) {
	d, why, _ := strings.Cut(arg, " ")
	dur, err := time.ParseDuration(d)
	if err == nil {
		fmt.Printf("parent    stops %s (pid %d) for %v %s\n", c.Name(), c.Pid(), dur, why)
		if err = c.Pause(ctx, dur); err == nil {
			fmt.Printf("parent    resumes %s\n", c.Name())
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "parent: pause %s: %v\n", c.Name(), err)
	}
	c.Send("resume")
}

// Pause asks the parent to stop this process for d, as a long
// garbage-collection pause or a suspended virtual machine would, and
// returns once it runs again; why ends the parent's line about it.
func (p *Parent) Pause(d time.Duration, why string) error {
	if err := p.Send("pause "+d.String()+" "+why, nil); err != nil {
		return err
	}
	return p.Expect("resume")
}

// Main parses the command line (see [Parse]) and runs child, in a child
// started by [Spawn], or else parent, with a context that ends on SIGINT or
// SIGTERM and the examples' [Logger] (in a child, tagged with its role and
// number). It exits with the status they return; after an interrupt, the
// parent prints "interrupted" and exits with status 130.
func Main(c *Config, check func() error,
	child func(ctx context.Context, role string, n int, log *slog.Logger) int,
	parent func(ctx context.Context, log *slog.Logger) int) {
	Parse(c, check)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if role, n, ok := Self(); ok {
		code = child(ctx, role, n, Logger().With(role, n))
	} else if code = parent(ctx, Logger()); ctx.Err() != nil {
		fmt.Println("interrupted")
		code = 130
	}
	stop()
	os.Exit(code)
}

// TempFile makes *path name a new empty temporary file (pattern as in
// [os.CreateTemp]) if it is empty, and returns a function that removes
// that file; if *path is set, it does nothing, and neither does the
// function.
func TempFile(path *string, pattern string) (remove func(), err error) {
	if *path != "" {
		return func() {}, nil
	}
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	f.Close()
	*path = f.Name()
	return func() { os.Remove(f.Name()) }, nil
}

// Step is one step of a conversation with children (see [Converse]).
type Step func(ctx context.Context) error

// Await is the step of waiting for c to say line (see [Child.Await]).
func Await(c *Child, line string) Step {
	return func(ctx context.Context) error { return c.Await(ctx, line) }
}

// Tell is the step of telling c line (see [Child.Send]).
func Tell(c *Child, line string) Step {
	return func(context.Context) error { return c.Send(line) }
}

// Converse takes steps in order, stopping at the first that fails, then
// closes the children's standard input (a child waiting for a line sees
// the end of it) and waits for every child to exit. It returns the failed
// step's error, else an error for the first child that exited with a
// non-zero status, else nil.
func Converse(ctx context.Context, children []*Child, steps ...Step) error {
	var err error
	for _, step := range steps {
		if err = step(ctx); err != nil {
			break
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	for _, c := range children {
		if code := c.Wait(); code != 0 && err == nil {
			err = fmt.Errorf("%s exited with status %d", c.Name(), code)
		}
	}
	return err
}
