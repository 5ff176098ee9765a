package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/internal/zktest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// sumOf returns the value of an Int64 sum metric for the points whose
// attributes include want.
func sumOf(t *testing.T, rm metricdata.ResourceMetrics, name string, want attribute.KeyValue) (int64, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, want an int64 sum", name, m.Data)
			}
			var total int64
			for _, p := range sum.DataPoints {
				if v, ok := p.Attributes.Value(want.Key); ok && v == want.Value {
					total += p.Value
				}
			}
			return total, true
		}
	}
	return 0, false
}

func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	opts := []recipe.Option{recipe.WithTracerProvider(tp), recipe.WithMeterProvider(mp)}
	holder := newMutex(t, locktest.Client(t, []string{srv.Addr()}, opts...), path)
	waiter := newMutex(t, locktest.Client(t, []string{srv.Addr()}, opts...), path)

	caller, parent := tp.Tracer("test").Start(context.Background(), "caller")
	if err := holder.Lock(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A timeout behind the holder, inside the caller's span.
	tctx, cancel := context.WithTimeout(caller, 200*time.Millisecond)
	err := waiter.Lock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want a timeout", err)
	}
	// A waiter that is woken by the release.
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(caller) }()
	locktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
		p, err := holder.Participants(caller)
		return err == nil && len(p) == 2
	})
	time.Sleep(50 * time.Millisecond) // let the waiter arm its watch
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := waiter.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	parent.End()

	acquires := spansNamed(rec, "mutex.acquire")
	if len(acquires) != 3 {
		t.Fatalf("got %d mutex.acquire spans, want 3", len(acquires))
	}
	outcomes := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range acquires {
		v, _ := attrOf(s, recipe.AttrOutcome)
		outcomes[v.AsString()+map[bool]string{true: "+woken"}[len(s.Events()) > 0]] = s
		if p, _ := attrOf(s, recipe.AttrPath); p.AsString() != path {
			t.Errorf("span path %q, want %q", p.AsString(), path)
		}
		if r, _ := attrOf(s, recipe.AttrRecipe); r.AsString() != "mutex" {
			t.Errorf("span recipe %q", r.AsString())
		}
	}
	timeout, ok := outcomes["timeout"]
	if !ok {
		t.Fatalf("no acquire span with outcome timeout: %v", outcomes)
	}
	woken, ok := outcomes["acquired+woken"]
	if !ok {
		t.Fatalf("no acquired span with a wake-up event: %v", outcomes)
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"timeout": timeout, "woken": woken} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s span is not a child of the caller's span", name)
		}
		if pos, ok := attrOf(s, recipe.AttrPosition); !ok || pos.AsInt64() != 1 {
			t.Errorf("%s span queue position = %v, want 1", name, pos.AsInt64())
		}
	}
	if ev := woken.Events(); len(ev) != 1 || ev[0].Name != "wake-up" {
		t.Errorf("woken span events %v, want one wake-up", ev)
	}
	if tok, _ := attrOf(woken, recipe.AttrToken); tok.AsInt64() <= 0 {
		t.Errorf("acquired span without a token")
	}
	if n := len(spansNamed(rec, "mutex.release")); n != 2 {
		t.Errorf("got %d mutex.release spans, want 2", n)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	mutexAttr := recipe.AttrRecipe.String("mutex")
	for name, want := range map[string]int64{
		recipe.MetricAcquisitions: 2,
		recipe.MetricTimeouts:     1,
		recipe.MetricHolders:      0,
		recipe.MetricWaiters:      0,
	} {
		got, ok := sumOf(t, rm, name, mutexAttr)
		if !ok || got != want {
			t.Errorf("metric %s = %d (found %v), want %d", name, got, ok, want)
		}
	}
	var histCount uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == recipe.MetricAcquireDuration {
				for _, p := range h.DataPoints {
					histCount += p.Count
				}
			}
		}
	}
	if histCount != 3 {
		t.Errorf("acquire duration histogram has %d points, want 3", histCount)
	}
}

func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m := newMutex(t, locktest.Client(t, []string{srv.Addr()}, recipe.WithMeterProvider(mp)), path)
	if err := m.Lock(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+m.Node(), -1); err != nil {
		t.Fatal(err)
	}
	<-m.Done()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if got, _ := sumOf(t, rm, recipe.MetricLosses, recipe.AttrReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{node_deleted} = %d, want 1", got)
	}
	if got, _ := sumOf(t, rm, recipe.MetricHolders, recipe.AttrRecipe.String("mutex")); got != 0 {
		t.Fatalf("holders after the loss = %d, want 0", got)
	}
	_ = m.Unlock(context.Background())
}
