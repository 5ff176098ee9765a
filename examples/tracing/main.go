//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command tracing shows the OpenTelemetry spans of two processes contending
// for one zkrecipes mutex.
//
// The parent process starts a trace and two copies of itself, "first" and
// "second", handing them the trace context. Each opens its own ZooKeeper
// session with an SDK tracer provider and meter provider, passed to
// recipe.Connect as options, and prints every span as it ends:
//
//   - first takes the mutex at once (mutex.acquire, outcome acquired);
//   - second tries for -try (outcome timeout), then waits in line; first
//     holds for -hold and releases (mutex.release); second's mutex.acquire
//     ends with a wake-up event and outcome acquired;
//   - second releases, both print their metrics and exit.
//
// Usage:
//
//	go run ./examples/tracing -zk 127.0.0.1:21811
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

type config struct {
	zk          string
	path        string
	hold        time.Duration
	try         time.Duration
	timeout     time.Duration
	debug       bool
	role        string // "first" or "second" in a child process
	traceparent string // W3C trace context handed to a child
}

func main() {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&cfg.path, "path", "/zkrecipes-demo/tracing", "ZooKeeper path of the mutex")
	flag.DurationVar(&cfg.hold, "hold", 300*time.Millisecond, "how long the first process holds the mutex once the second waits")
	flag.DurationVar(&cfg.try, "try", 100*time.Millisecond, "timeout of the second process's first attempt (0: no such attempt)")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "bound on the whole run")
	flag.BoolVar(&cfg.debug, "debug", false, "also print the library's debug log (recipe.WithLogger) to standard error")
	flag.StringVar(&cfg.role, "role", "", "run as child `first` or `second` (used by the parent process)")
	flag.StringVar(&cfg.traceparent, "traceparent", "", "trace context of the parent (used by the parent process)")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "tracing:", err)
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	var err error
	if cfg.role != "" {
		err = runChild(ctx, cfg)
	} else {
		err = runParent(ctx, cfg)
	}
	cancel()
	stop()
	if err != nil {
		name := cfg.role
		if name == "" {
			name = "parent"
		}
		fmt.Fprintf(os.Stderr, "tracing (%s): %v\n", name, err)
		os.Exit(1)
	}
}

func (c *config) validate() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	case c.servers() == nil:
		return errors.New("-zk: no servers")
	case c.hold < 0 || c.try < 0 || c.timeout <= 0:
		return errors.New("-hold and -try must not be negative, -timeout must be positive")
	case c.role != "" && c.role != "first" && c.role != "second":
		return fmt.Errorf("-role %q: want first or second", c.role)
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

// Parent and children talk in lines: a child writes "ready", "locked" and
// "waiting" to file descriptor 3, and reads "go" and "release" from its
// standard input.

func runParent(ctx context.Context, cfg config) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(newPrinter(os.Stdout, "parent")))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("zkrecipes-example-tracing").Start(ctx, "tracing-demo")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	fmt.Printf("tracing: two processes contend for mutex %s on %s; trace %s\n\n",
		cfg.path, cfg.zk, span.SpanContext().TraceID())

	type child struct {
		name  string
		cmd   *exec.Cmd
		stdin io.WriteCloser
		lines chan string
		exit  chan error
	}
	start := func(role string) (*child, error) {
		cmd := exec.CommandContext(ctx, exe, "-role", role, "-traceparent", carrier.Get("traceparent"),
			"-zk", cfg.zk, "-path", cfg.path, "-hold", cfg.hold.String(), "-try", cfg.try.String(),
			"-timeout", cfg.timeout.String(), fmt.Sprintf("-debug=%t", cfg.debug))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.ExtraFiles = []*os.File{w}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		w.Close()
		c := &child{name: role, cmd: cmd, stdin: stdin, lines: make(chan string, 8), exit: make(chan error, 1)}
		go func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			r.Close()
			close(c.lines)
			c.exit <- cmd.Wait()
		}()
		return c, nil
	}
	// await waits for line from c.
	await := func(c *child, line string) error {
		select {
		case got, ok := <-c.lines:
			if !ok {
				return fmt.Errorf("%s ended before saying %q", c.name, line)
			}
			if got != line {
				return fmt.Errorf("%s said %q, want %q", c.name, got, line)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to say %q: %w", c.name, line, ctx.Err())
		}
	}

	first, err := start("first")
	if err != nil {
		return err
	}
	second, err := start("second")
	if err != nil {
		first.stdin.Close()
		<-first.exit
		return err
	}
	err = func() error {
		if err := await(first, "ready"); err != nil {
			return err
		}
		if err := await(second, "ready"); err != nil {
			return err
		}
		io.WriteString(first.stdin, "go\n")
		if err := await(first, "locked"); err != nil {
			return err
		}
		io.WriteString(second.stdin, "go\n")
		if err := await(second, "waiting"); err != nil {
			return err
		}
		io.WriteString(first.stdin, "release\n")
		return nil
	}()
	first.stdin.Close()
	second.stdin.Close()
	for _, c := range []*child{first, second} {
		for range c.lines {
		}
		if e := <-c.exit; e != nil && err == nil {
			err = fmt.Errorf("%s: %w", c.name, e)
		}
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

func runChild(ctx context.Context, cfg config) error {
	ctrl := os.NewFile(3, "control")
	if ctrl == nil {
		return errors.New("no control pipe on file descriptor 3: run without -role")
	}
	defer ctrl.Close()
	stdin := bufio.NewReader(os.Stdin)
	expect := func(line string) error {
		got, err := stdin.ReadString('\n')
		if err != nil {
			return fmt.Errorf("waiting for %q from the parent: %w", line, err)
		}
		if got = strings.TrimSpace(got); got != line {
			return fmt.Errorf("parent said %q, want %q", got, line)
		}
		return nil
	}

	// The providers: spans printed as they end, metrics read at the end.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(newPrinter(os.Stdout, cfg.role)))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	opts := []recipe.Option{recipe.WithTracerProvider(tp), recipe.WithMeterProvider(mp)}
	if cfg.debug {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts = append(opts, recipe.WithLogger(log.With("process", cfg.role)))
	}

	// The child's work is one span in the parent's trace.
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": cfg.traceparent})
	ctx, span := tp.Tracer("zkrecipes-example-tracing").Start(ctx, cfg.role,
		trace.WithAttributes(attribute.Int("process.pid", os.Getpid())))
	err := contend(ctx, cfg, opts, ctrl, expect)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	printMetrics(os.Stdout, cfg.role, reader)
	return err
}

// contend is a child's part: connect, then take and release the mutex as
// its role says.
func contend(ctx context.Context, cfg config, opts []recipe.Option, ctrl io.Writer, expect func(string) error) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := recipe.Connect(cctx, cfg.servers(), opts...)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := mutex.New(c, cfg.path, mutex.WithData(fmt.Appendf(nil, "tracing example %s pid %d", cfg.role, os.Getpid())))
	if err != nil {
		return err
	}
	fmt.Fprintln(ctrl, "ready")
	if err := expect("go"); err != nil {
		return err
	}

	if cfg.role == "first" {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		fmt.Fprintln(ctrl, "locked")
		if err := expect("release"); err != nil {
			return err
		}
		// Hold on until the second process is in line, and then a little
		// longer, so that its span shows the wait.
		for {
			p, err := m.Participants(ctx)
			if err != nil {
				return err
			}
			if len(p) >= 2 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(cfg.hold)
		return m.Unlock(ctx)
	}

	if cfg.try > 0 {
		tctx, cancel := context.WithTimeout(ctx, cfg.try)
		err := m.Lock(tctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the first attempt was to time out behind the first process, got %v", err)
		}
	}
	fmt.Fprintln(ctrl, "waiting")
	if err := m.Lock(ctx); err != nil {
		return err
	}
	select {
	case <-m.Done():
		return m.Err()
	case <-time.After(20 * time.Millisecond): // the work
	}
	return m.Unlock(ctx)
}

// printer is a span exporter that prints each span compactly: name,
// duration, ids, attributes, events and status. (The SDK's stdouttrace
// exporter prints the same data as JSON, resource and scope included.)
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	label string
}

func newPrinter(w io.Writer, label string) *printer { return &printer{w: w, label: label} }

func (p *printer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range spans {
		// One write per span, so the lines of the two processes sharing
		// the terminal do not interleave.
		var b bytes.Buffer
		fmt.Fprintf(&b, "%-7s %-22s %9s  span %s", p.label, s.Name(), ms(s.EndTime().Sub(s.StartTime())), s.SpanContext().SpanID())
		if s.Parent().IsValid() {
			fmt.Fprintf(&b, "  parent %s", s.Parent().SpanID())
		}
		b.WriteByte('\n')
		for _, kv := range s.Attributes() {
			fmt.Fprintf(&b, "        %-28s %s\n", kv.Key, kv.Value.String())
		}
		for _, e := range s.Events() {
			fmt.Fprintf(&b, "        event +%s %s", ms(e.Time.Sub(s.StartTime())), e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, "  %s=%s", kv.Key, kv.Value.String())
			}
			b.WriteByte('\n')
		}
		if st := s.Status(); st.Code == codes.Error {
			fmt.Fprintf(&b, "        status Error: %s\n", st.Description)
		}
		if _, err := p.w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func (p *printer) Shutdown(context.Context) error { return nil }

// printMetrics prints what the meter provider collected, one line per
// metric and attribute set.
func printMetrics(w io.Writer, label string, reader *sdkmetric.ManualReader) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Fprintf(os.Stderr, "%s: metrics: %v\n", label, err)
		return
	}
	var b bytes.Buffer
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "%-7s metric %s{%s} = %d\n", label, m.Name, attrs(p.Attributes), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "%-7s metric %s{%s} count %d, sum %.4fs\n", label, m.Name, attrs(p.Attributes), p.Count, p.Sum)
				}
			}
		}
	}
	w.Write(b.Bytes())
}

func attrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
