package rwlock_test

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

// telemetry is an SDK tracer provider recording every ended span and a
// meter provider read on demand, for one test.
type telemetry struct {
	tp     *sdktrace.TracerProvider
	rec    *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return &telemetry{tp: tp, rec: rec, mp: mp, reader: reader}
}

// client connects a client that reports to tel.
func (tel *telemetry) client(t *testing.T, addr string) *recipe.Client {
	t.Helper()
	return locktest.Client(t, []string{addr}, recipe.WithTracerProvider(tel.tp), recipe.WithMeterProvider(tel.mp))
}

func (tel *telemetry) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func (tel *telemetry) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func outcomeOf(s sdktrace.ReadOnlySpan) string {
	v, _ := attrOf(s, recipe.AttrOutcome)
	return v.AsString()
}

// byOutcome indexes spans by outcome, failing on a duplicate.
func byOutcome(t *testing.T, spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		o := outcomeOf(s)
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

// sumOf returns the total of an Int64 sum metric over the points that
// carry every attribute of want, and whether the metric was found.
func sumOf(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (int64, bool) {
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

// histCount returns how many values the acquire duration histogram holds
// for the points that carry every attribute of want.
func histCount(t *testing.T, rm metricdata.ResourceMetrics, want ...attribute.KeyValue) uint64 {
	t.Helper()
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != recipe.MetricAcquireDuration {
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

// wantSums checks Int64 sums, each for the points carrying attr.
func wantSums(t *testing.T, rm metricdata.ResourceMetrics, attr attribute.KeyValue, want map[string]int64) {
	t.Helper()
	for name, w := range want {
		if got, ok := sumOf(t, rm, name, attr); !ok || got != w {
			t.Errorf("metric %s{%s=%s} = %d (found %v), want %d", name, attr.Key, attr.Value.String(), got, ok, w)
		}
	}
}

// A read acquire that times out behind a writer, one woken by the writer's
// release, and a write acquire that times out behind the reader: span
// names, attributes, parentage, wake-up event, release spans and metrics.
func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := newTelemetry(t)
	writer := newRW(t, tel.client(t, srv.Addr()), path)
	reader := newRW(t, tel.client(t, srv.Addr()), path)

	caller, parent := tel.tp.Tracer("test").Start(context.Background(), "caller")
	if err := writer.Lock(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wnode, wtoken := writer.Node(), writer.Token()

	// A read behind the writer times out, inside the caller's span.
	tctx, cancel := context.WithTimeout(caller, 200*time.Millisecond)
	err := reader.RLock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RLock behind a writer = %v, want a timeout", err)
	}

	// A read that waits and is woken by the writer's release.
	done := make(chan error, 1)
	go func() { done <- reader.RLock(caller) }()
	queued(t, writer, 2)
	time.Sleep(50 * time.Millisecond) // let the reader arm its watch
	if err := writer.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rnode, rtoken := reader.RNode(), reader.RToken()

	// A write behind the reader times out.
	tctx, cancel = context.WithTimeout(caller, 200*time.Millisecond)
	err = writer.Lock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock behind a reader = %v, want a timeout", err)
	}
	if err := reader.RUnlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	parent.End()

	callerID := parent.SpanContext().SpanID()
	for name, want := range map[string]string{"rwlock.read.acquire": "rwlock.read", "rwlock.write.acquire": "rwlock.write"} {
		spans := tel.spans(name)
		if len(spans) != 2 {
			t.Fatalf("got %d %s spans, want 2", len(spans), name)
		}
		for _, s := range spans {
			if r, _ := attrOf(s, recipe.AttrRecipe); r.AsString() != want {
				t.Errorf("%s span: recipe %q, want %q", name, r.AsString(), want)
			}
			if p, _ := attrOf(s, recipe.AttrPath); p.AsString() != path {
				t.Errorf("%s span: path %q, want %q", name, p.AsString(), path)
			}
			if _, ok := attrOf(s, recipe.AttrWaitMs); !ok {
				t.Errorf("%s span (%s) without %s", name, outcomeOf(s), recipe.AttrWaitMs)
			}
		}
	}

	reads := byOutcome(t, tel.spans("rwlock.read.acquire"))
	readTimeout, ok := reads["timeout"]
	if !ok {
		t.Fatalf("no rwlock.read.acquire span with outcome timeout: %v", reads)
	}
	woken, ok := reads["acquired"]
	if !ok {
		t.Fatalf("no rwlock.read.acquire span with outcome acquired: %v", reads)
	}
	writes := byOutcome(t, tel.spans("rwlock.write.acquire"))
	writeTimeout, ok := writes["timeout"]
	if !ok {
		t.Fatalf("no rwlock.write.acquire span with outcome timeout: %v", writes)
	}
	first, ok := writes["acquired"]
	if !ok {
		t.Fatalf("no rwlock.write.acquire span with outcome acquired: %v", writes)
	}

	for name, s := range map[string]sdktrace.ReadOnlySpan{"read timeout": readTimeout, "read woken": woken, "write timeout": writeTimeout} {
		if s.Parent().SpanID() != callerID {
			t.Errorf("%s span is not a child of the caller's span", name)
		}
		if pos, ok := attrOf(s, recipe.AttrPosition); !ok || pos.AsInt64() != 1 {
			t.Errorf("%s span: queue position %v (set %v), want 1", name, pos.AsInt64(), ok)
		}
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"read timeout": readTimeout, "write timeout": writeTimeout} {
		for _, k := range []attribute.Key{recipe.AttrNode, recipe.AttrToken} {
			if _, ok := attrOf(s, k); ok {
				t.Errorf("%s span carries %s", name, k)
			}
		}
		if len(s.Events()) != 0 {
			t.Errorf("%s span events %v, want none", name, s.Events())
		}
	}

	if first.Parent().IsValid() {
		t.Errorf("the first write acquire had no parent span, got %v", first.Parent().SpanID())
	}
	if _, ok := attrOf(first, recipe.AttrPosition); ok {
		t.Errorf("an acquire that did not wait carries %s", recipe.AttrPosition)
	}
	if n, _ := attrOf(first, recipe.AttrNode); n.AsString() != wnode {
		t.Errorf("write span node %q, want %q", n.AsString(), wnode)
	}
	if tok, _ := attrOf(first, recipe.AttrToken); tok.AsInt64() != wtoken || wtoken <= 0 {
		t.Errorf("write span token %d, want %d (> 0)", tok.AsInt64(), wtoken)
	}

	if n, _ := attrOf(woken, recipe.AttrNode); n.AsString() != rnode {
		t.Errorf("read span node %q, want %q", n.AsString(), rnode)
	}
	if tok, _ := attrOf(woken, recipe.AttrToken); tok.AsInt64() != rtoken || rtoken <= wtoken {
		t.Errorf("read span token %d (reader's %d), want the reader's, above the writer's %d", tok.AsInt64(), rtoken, wtoken)
	}
	ev := woken.Events()
	if len(ev) != 1 || ev[0].Name != "wake-up" {
		t.Fatalf("woken read span events %v, want one wake-up", ev)
	}
	evAttrs := attribute.NewSet(ev[0].Attributes...)
	if v, _ := evAttrs.Value("zkrecipes.lock.watched"); v.AsString() != wnode {
		t.Errorf("wake-up watched %q, want the writer's node %q", v.AsString(), wnode)
	}
	if v, _ := evAttrs.Value("zkrecipes.zk.event"); v.AsString() != "EventNodeDeleted" {
		t.Errorf("wake-up event %q, want EventNodeDeleted", v.AsString())
	}

	for name, node := range map[string]string{"rwlock.write.release": wnode, "rwlock.read.release": rnode} {
		rel := tel.spans(name)
		if len(rel) != 1 {
			t.Fatalf("got %d %s spans, want 1", len(rel), name)
		}
		if n, _ := attrOf(rel[0], recipe.AttrNode); n.AsString() != node {
			t.Errorf("%s span node %q, want %q", name, n.AsString(), node)
		}
		if tok, _ := attrOf(rel[0], recipe.AttrToken); tok.AsInt64() <= 0 {
			t.Errorf("%s span without a token", name)
		}
	}

	rm := tel.collect(t)
	for _, r := range []string{"rwlock.read", "rwlock.write"} {
		attr := recipe.AttrRecipe.String(r)
		wantSums(t, rm, attr, map[string]int64{
			recipe.MetricAcquisitions: 1,
			recipe.MetricTimeouts:     1,
			recipe.MetricHolders:      0,
			recipe.MetricWaiters:      0,
		})
		if got, _ := sumOf(t, rm, recipe.MetricLosses, attr); got != 0 {
			t.Errorf("losses{%s} = %d, want 0", r, got)
		}
		for outcome, want := range map[string]uint64{"acquired": 1, "timeout": 1} {
			if got := histCount(t, rm, attr, recipe.AttrOutcome.String(outcome)); got != want {
				t.Errorf("acquire duration{%s, %s} has %d values, want %d", r, outcome, got, want)
			}
		}
	}
}

// A downgrade is a read acquire by the write holder: it has its own span
// and hold, and every holder count returns to 0, also when the read hold
// rides on the write node because a writer queued behind it.
func TestDowngradeTelemetry(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := newTelemetry(t)
	rw := newRW(t, tel.client(t, srv.Addr()), path)
	ctx := ctxTimeout(t, 20*time.Second)
	holders := func(r string) int64 {
		got, _ := sumOf(t, tel.collect(t), recipe.MetricHolders, recipe.AttrRecipe.String(r))
		return got
	}

	if err := rw.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if w, r := holders("rwlock.write"), holders("rwlock.read"); w != 1 || r != 1 {
		t.Fatalf("holders while writing and reading: write %d, read %d, want 1 and 1", w, r)
	}
	down := tel.spans("rwlock.read.acquire")
	if len(down) != 1 || outcomeOf(down[0]) != "acquired" {
		t.Fatalf("downgrade read acquire spans %d (outcome %q), want 1 acquired", len(down), outcomeOf(down[0]))
	}
	if n, _ := attrOf(down[0], recipe.AttrNode); n.AsString() != rw.RNode() {
		t.Errorf("downgrade span node %q, want the read node %q", n.AsString(), rw.RNode())
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if w, r := holders("rwlock.write"), holders("rwlock.read"); w != 0 || r != 0 {
		t.Fatalf("holders after a downgrade: write %d, read %d, want 0", w, r)
	}

	// A writer queued behind: the read hold rides on the write node.
	other := newRW(t, tel.client(t, srv.Addr()), path)
	if err := rw.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- other.Lock(ctx) }()
	queued(t, rw, 2)
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rm := tel.collect(t)
	for _, r := range []string{"rwlock.read", "rwlock.write"} {
		wantSums(t, rm, recipe.AttrRecipe.String(r), map[string]int64{
			recipe.MetricHolders: 0,
			recipe.MetricWaiters: 0,
		})
	}
	if got, _ := sumOf(t, rm, recipe.MetricAcquisitions, recipe.AttrRecipe.String("rwlock.write")); got != 3 {
		t.Errorf("write acquisitions = %d, want 3", got)
	}
}

func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := newTelemetry(t)
	rw := newRW(t, tel.client(t, srv.Addr()), path)
	if err := rw.RLock(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+rw.RNode(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rw.RDone():
	case <-time.After(5 * time.Second):
		t.Fatal("RDone not closed after the read node was deleted")
	}
	rm := tel.collect(t)
	read := recipe.AttrRecipe.String("rwlock.read")
	if got, _ := sumOf(t, rm, recipe.MetricLosses, read, recipe.AttrReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{rwlock.read, node_deleted} = %d, want 1", got)
	}
	if got, _ := sumOf(t, rm, recipe.MetricHolders, read); got != 0 {
		t.Fatalf("read holders after the loss = %d, want 0", got)
	}
	_ = rw.RUnlock(context.Background())
}
