//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command tracing shows the OpenTelemetry spans of two processes contending
// for one zkrecipes mutex.
//
// The parent process starts a trace and two copies of itself, "first" and
// "second", handing them the trace context. Each passes an SDK tracer
// provider and meter provider to recipe.Connect and prints every span as it
// ends: first takes the mutex at once; second tries for -try (outcome
// timeout), then waits in line; first holds for -hold and releases; second's
// mutex.acquire ends with a wake-up event and outcome acquired; both print
// their metrics.
//
//	go run ./examples/tracing -zk 127.0.0.1:21811
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/internal/demo"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	cfg         = demo.Flags("mutex", "/zkrecipes-demo/tracing")
	hold        = flag.Duration("hold", 300*time.Millisecond, "how long the first process holds the mutex once the second waits")
	try         = flag.Duration("try", 100*time.Millisecond, "timeout of the second process's first attempt (0: no such attempt)")
	timeout     = flag.Duration("timeout", 30*time.Second, "bound on the whole run")
	debug       = flag.Bool("debug", false, "also print the library's debug log (recipe.WithLogger) to standard error")
	traceparent = flag.String("traceparent", "", "trace context of the parent (used by the parent process)")
)

func main() {
	demo.Main(cfg, func() error {
		if *hold < 0 || *try < 0 || *timeout <= 0 {
			return errors.New("-hold and -try must not be negative, -timeout must be positive")
		}
		return nil
	}, child, parent)
}

// parent starts a trace and the two children, handing them its context,
// and tells them when to go: the first takes the mutex, then the second
// tries for it, then the first releases.
func parent(ctx context.Context, log *slog.Logger) int {
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(demo.NewSpanPrinter(os.Stdout, "parent")))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("zkrecipes-example-tracing").Start(ctx, "tracing-demo")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	fmt.Printf("tracing: two processes contend for mutex %s on %s; trace %s\n\n", cfg.Path, cfg.ZK, span.SpanContext().TraceID())

	args := []string{"-traceparent", carrier.Get("traceparent")}
	first, err1 := demo.Spawn(ctx, "first", 1, args...)
	second, err2 := demo.Spawn(ctx, "second", 2, args...)
	if err := errors.Join(err1, err2); err != nil {
		return demo.Fail(ctx, log, "cannot start the processes", err)
	}
	err := demo.Converse(ctx, []*demo.Child{first, second},
		demo.Await(first, "ready"), demo.Await(second, "ready"),
		demo.Tell(first, "go"), demo.Await(first, "locked"),
		demo.Tell(second, "go"), demo.Await(second, "waiting"),
		demo.Tell(first, "release"))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	if err != nil {
		return demo.Fail(ctx, log, "tracing", err)
	}
	return 0
}

// child is the first or the second process: its providers print spans as
// they end and the metrics at the end; its work is one span in the
// parent's trace.
func child(ctx context.Context, role string, _ int, _ *slog.Logger) int {
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(demo.NewSpanPrinter(os.Stdout, role)))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	opts := []recipe.Option{recipe.WithTracerProvider(tp), recipe.WithMeterProvider(mp)}
	if *debug {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts = append(opts, recipe.WithLogger(log.With("process", role)))
	}

	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": *traceparent})
	ctx, span := tp.Tracer("zkrecipes-example-tracing").Start(ctx, role,
		trace.WithAttributes(attribute.Int("process.pid", os.Getpid())))
	err := contend(ctx, role, opts)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	demo.PrintMetrics(os.Stdout, role, reader)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tracing (%s): %v\n", role, err)
		return 1
	}
	return 0
}

// contend connects, then takes and releases the mutex as role says.
func contend(ctx context.Context, role string, opts []recipe.Option) error {
	parent := demo.ToParent()
	defer parent.Close()
	c, err := demo.Connect(ctx, cfg, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := mutex.New(c, cfg.Path, mutex.WithData(fmt.Appendf(nil, "tracing example %s pid %d", role, os.Getpid())))
	if err != nil {
		return err
	}
	if err := parent.Ready(); err != nil {
		return err
	}
	if role == "first" {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		parent.Send("locked", nil)
		if err := parent.Expect("release"); err != nil {
			return err
		}
		// Hold on until the second process is in line, and then a little
		// longer, so that its span shows the wait.
		for queued := 0; queued < 2; time.Sleep(10 * time.Millisecond) {
			p, err := m.Participants(ctx)
			if err != nil {
				return err
			}
			queued = len(p)
		}
		time.Sleep(*hold)
		return m.Unlock(ctx)
	}

	if *try > 0 {
		tctx, cancel := context.WithTimeout(ctx, *try)
		err := m.Lock(tctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the first attempt was to time out behind the first process, got %v", err)
		}
	}
	parent.Send("waiting", nil)
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
