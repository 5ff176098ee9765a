package locktest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// Telemetry is an SDK tracer provider recording every ended span and a
// meter provider read on demand, for one test.
type Telemetry struct {
	// TracerProvider records every span it ends; a test starts its own
	// (caller) spans from it.
	TracerProvider *sdktrace.TracerProvider
	// MeterProvider is read by Collect.
	MeterProvider *sdkmetric.MeterProvider

	rec    *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// NewTelemetry returns a Telemetry whose providers are shut down when the
// test ends.
func NewTelemetry(t testing.TB) *Telemetry {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return &Telemetry{TracerProvider: tp, MeterProvider: mp, rec: rec, reader: reader}
}

// Client connects a client (see Client) to addr that reports its spans and
// metrics to tel.
func (tel *Telemetry) Client(t testing.TB, addr string) *recipe.Client {
	t.Helper()
	return Client(t, []string{addr}, recipe.WithTracerProvider(tel.TracerProvider), recipe.WithMeterProvider(tel.MeterProvider))
}

// Collect reads every metric recorded so far, failing the test on an error.
func (tel *Telemetry) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Spans returns the ended spans called name, in the order they ended.
func (tel *Telemetry) Spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// SpanAttr returns the value of the span's attribute k and whether the span
// carries it.
func SpanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Outcome returns the span's telemetry.AttrOutcome, or "" if it has none.
func Outcome(s sdktrace.ReadOnlySpan) string {
	v, _ := SpanAttr(s, telemetry.AttrOutcome)
	return v.AsString()
}

// ByOutcome indexes spans by outcome, failing the test on a duplicate.
func ByOutcome(t testing.TB, spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		o := Outcome(s)
		if _, dup := out[o]; dup {
			t.Fatalf("two %s spans with outcome %q", s.Name(), o)
		}
		out[o] = s
	}
	return out
}

// matches reports whether set carries every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Sum returns the total of an Int64 sum metric over the points that carry
// every attribute of want, and whether the metric was found. It fails the
// test if the metric is of another kind.
func Sum(t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (int64, bool) {
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
				if matches(p.Attributes, want) {
					total += p.Value
				}
			}
			return total, true
		}
	}
	return 0, false
}

// HistCount returns how many values the acquire duration histogram
// (telemetry.MetricAcquireDuration) holds for the points that carry every
// attribute of want. It fails the test if the metric is not a float64
// histogram.
func HistCount(t testing.TB, rm metricdata.ResourceMetrics, want ...attribute.KeyValue) uint64 {
	t.Helper()
	return HistCountOf(t, rm, telemetry.MetricAcquireDuration, want...)
}

// HistCountOf is HistCount for the float64 histogram called name.
func HistCountOf(t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
			}
			for _, p := range h.DataPoints {
				if matches(p.Attributes, want) {
					n += p.Count
				}
			}
		}
	}
	return n
}

// WantSums checks Int64 sums by metric name, each over the points carrying
// attr; a metric not found is an error.
func WantSums(t testing.TB, rm metricdata.ResourceMetrics, attr attribute.KeyValue, want map[string]int64) {
	t.Helper()
	for name, w := range want {
		if got, ok := Sum(t, rm, name, attr); !ok || got != w {
			t.Errorf("metric %s{%s=%s} = %d (found %v), want %d", name, attr.Key, attr.Value.Emit(), got, ok, w)
		}
	}
}
