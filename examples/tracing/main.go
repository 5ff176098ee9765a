// Command tracing shows the OpenTelemetry spans and metrics of two clients,
// each with a session of its own, contending for one zkrecipes mutex. Each
// passes SDK providers to recipe.Connect; spans are printed as they end,
// all in one trace. first takes the mutex; second tries for -try (outcome
// timeout), then waits; first holds for -hold and unlocks; second's
// acquire ends with a wake-up event. Then the metrics are printed.
//
//	go run ./examples/tracing -zk 127.0.0.1:21811
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	servers = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path    = flag.String("path", "/examples/tracing", "ZooKeeper path of the mutex")
	hold    = flag.Duration("hold", 300*time.Millisecond, "how long first holds the mutex once second waits")
	try     = flag.Duration("try", 100*time.Millisecond, "timeout of second's first attempt")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(printer("main")))
	ctx, span := tp.Tracer("example").Start(ctx, "tracing-example") // the root of every span below
	fmt.Printf("tracing: two clients contend for mutex %s on %s; trace %s\n\n", *path, *servers, span.SpanContext().TraceID())
	first, err1 := newClient(ctx, "first")
	second, err2 := newClient(ctx, "second")
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	defer first.Close()
	defer second.Close()

	if err := first.m.Lock(ctx); err != nil {
		return err
	}
	tctx, tcancel := context.WithTimeout(ctx, *try)
	err := second.m.Lock(tctx) // first holds: times out
	tcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("second's first attempt was to time out, got %v", err)
	}
	locked := make(chan error, 1)
	go func() { locked <- second.m.Lock(ctx) }()
	for ps := []mutex.Participant{}; len(ps) < 2; time.Sleep(10 * time.Millisecond) { // until second is in line
		if ps, err = first.m.Participants(ctx); err != nil {
			return err
		}
	}
	time.Sleep(*hold)
	if err := first.m.Unlock(ctx); err != nil {
		return err
	}
	if err := <-locked; err != nil {
		return err
	}
	select {
	case <-second.m.Done(): // lost while working (session expired, suspended too long)
		return second.m.Err()
	case <-time.After(20 * time.Millisecond): // the work
	}
	if err := second.m.Unlock(ctx); err != nil {
		return err
	}
	span.End()
	for _, c := range []*client{first, second} {
		c.printMetrics(ctx)
	}
	return nil
}

// client is a session with a mutex handle and its own providers.
type client struct {
	*recipe.Client
	name   string
	m      *mutex.Mutex
	reader *sdkmetric.ManualReader
}

func newClient(ctx context.Context, name string) (*client, error) {
	c := &client{name: name, reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(printer(name)))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(c.reader))
	var err error
	c.Client, err = recipe.Connect(ctx, strings.Split(*servers, ","), recipe.WithTracerProvider(tp), recipe.WithMeterProvider(mp))
	if err == nil {
		c.m, err = mutex.New(c.Client, *path, mutex.WithData([]byte(name)))
	}
	return c, err
}

// printer is a span exporter that prints each span behind a label. (The
// SDK's stdouttrace exporter prints the same as JSON.)
type printer string

func (p printer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		fmt.Printf("%-7s %-18s %7.1fms  span %s  parent %s\n", p, s.Name(),
			float64(s.EndTime().Sub(s.StartTime()).Microseconds())/1000, s.SpanContext().SpanID(), s.Parent().SpanID())
		for _, kv := range s.Attributes() {
			fmt.Printf("        %-28s %s\n", kv.Key, kv.Value.Emit())
		}
		for _, e := range s.Events() {
			fmt.Printf("        event +%v %s %s\n", e.Time.Sub(s.StartTime()).Round(time.Microsecond), e.Name, attrs(e.Attributes))
		}
	}
	return nil
}

func (p printer) Shutdown(context.Context) error { return nil }

func (c *client) printMetrics(ctx context.Context) {
	var rm metricdata.ResourceMetrics
	_ = c.reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Printf("%-7s metric %s{%s} = %d\n", c.name, m.Name, attrs(p.Attributes.ToSlice()), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Printf("%-7s metric %s{%s} count %d, sum %.4fs\n", c.name, m.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum)
				}
			}
		}
	}
}

func attrs(kvs []attribute.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}
