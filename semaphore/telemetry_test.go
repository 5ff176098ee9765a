package semaphore_test

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
	"github.com/zkrecipes/zkrecipes/semaphore"
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

// queuedSem waits until the semaphore's queue has n nodes.
func queuedSem(t *testing.T, s *semaphore.Semaphore, n int) {
	t.Helper()
	locktest.Eventually(t, 10*time.Second, "queue length", func() bool {
		p, err := s.Participants(context.Background())
		return err == nil && len(p) == n
	})
}

// With two leases held by one AcquireN: a TryAcquire that finds no lease,
// an Acquire that times out, and one woken by a release. Span names,
// attributes, parentage, the wake-up event, release spans and metrics.
func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := newTelemetry(t)
	holder := newSem(t, tel.client(t, srv.Addr()), path, 2)
	waiter := newSem(t, tel.client(t, srv.Addr()), path, 2)

	caller, parent := tel.tp.Tracer("test").Start(context.Background(), "caller")
	held, err := holder.AcquireN(ctxTimeout(t, 10*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}

	// No lease free: TryAcquire returns at once, inside the caller's span.
	if _, err := waiter.TryAcquire(caller); !errors.Is(err, semaphore.ErrNoLease) {
		t.Fatalf("TryAcquire with every lease taken = %v, want ErrNoLease", err)
	}
	// An Acquire that times out.
	tctx, cancel := context.WithTimeout(caller, 200*time.Millisecond)
	_, err = waiter.Acquire(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with every lease taken = %v, want a timeout", err)
	}
	queuedSem(t, holder, 2)
	// An Acquire that waits and is woken when a lease is released.
	type result struct {
		l   *semaphore.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(caller)
		done <- result{l, err}
	}()
	queuedSem(t, holder, 3)
	time.Sleep(50 * time.Millisecond) // let the waiter arm its watches
	first := held[0].Node()
	release(t, held[0])
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	lease := res.l
	release(t, held[1])
	release(t, lease)
	parent.End()

	acquires := tel.spans("semaphore.acquire")
	if len(acquires) != 4 {
		t.Fatalf("got %d semaphore.acquire spans, want 4", len(acquires))
	}
	for _, s := range acquires {
		if r, _ := attrOf(s, recipe.AttrRecipe); r.AsString() != "semaphore" {
			t.Errorf("span recipe %q, want semaphore", r.AsString())
		}
		if p, _ := attrOf(s, recipe.AttrPath); p.AsString() != path {
			t.Errorf("span path %q, want %q", p.AsString(), path)
		}
	}
	var both, woken sdktrace.ReadOnlySpan
	var others []sdktrace.ReadOnlySpan
	for _, s := range acquires {
		switch _, isN := attrOf(s, recipe.AttrCount); {
		case isN:
			both = s
		case outcomeOf(s) == "acquired":
			woken = s
		default:
			others = append(others, s)
		}
	}
	if both == nil || woken == nil {
		t.Fatalf("want one AcquireN span and one acquired Acquire span, got %d spans", len(acquires))
	}
	failed := byOutcome(t, others)
	noLease, ok := failed["held_elsewhere"]
	if !ok {
		t.Fatalf("no semaphore.acquire span with outcome held_elsewhere: %v", failed)
	}
	timeout, ok := failed["timeout"]
	if !ok {
		t.Fatalf("no semaphore.acquire span with outcome timeout: %v", failed)
	}

	// AcquireN: one span for the n nodes, with the first node's name and token.
	if c, _ := attrOf(both, recipe.AttrCount); c.AsInt64() != 2 {
		t.Errorf("AcquireN span count %d, want 2", c.AsInt64())
	}
	if o := outcomeOf(both); o != "acquired" {
		t.Errorf("AcquireN span outcome %q", o)
	}
	if n, _ := attrOf(both, recipe.AttrNode); n.AsString() != first {
		t.Errorf("AcquireN span node %q, want the first lease's %q", n.AsString(), first)
	}
	if tok, _ := attrOf(both, recipe.AttrToken); tok.AsInt64() != held[0].Token() || tok.AsInt64() <= 0 {
		t.Errorf("AcquireN span token %d, want the first lease's %d", tok.AsInt64(), held[0].Token())
	}
	if both.Parent().IsValid() {
		t.Errorf("AcquireN span has a parent; it was called without one")
	}

	callerID := parent.SpanContext().SpanID()
	for name, s := range map[string]sdktrace.ReadOnlySpan{"no lease": noLease, "timeout": timeout, "woken": woken} {
		if s.Parent().SpanID() != callerID {
			t.Errorf("%s span is not a child of the caller's span", name)
		}
	}
	// TryAcquire looked once and never waited: no position, no event.
	if _, ok := attrOf(noLease, recipe.AttrPosition); ok {
		t.Errorf("TryAcquire span carries %s", recipe.AttrPosition)
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"timeout": timeout, "woken": woken} {
		if pos, ok := attrOf(s, recipe.AttrPosition); !ok || pos.AsInt64() != 2 {
			t.Errorf("%s span: queue position %d (set %v), want 2", name, pos.AsInt64(), ok)
		}
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"no lease": noLease, "timeout": timeout} {
		if _, ok := attrOf(s, recipe.AttrToken); ok {
			t.Errorf("%s span carries a token", name)
		}
		if len(s.Events()) != 0 {
			t.Errorf("%s span events %v, want none", name, s.Events())
		}
	}
	if n, _ := attrOf(woken, recipe.AttrNode); n.AsString() != lease.Node() {
		t.Errorf("woken span node %q, want %q", n.AsString(), lease.Node())
	}
	if tok, _ := attrOf(woken, recipe.AttrToken); tok.AsInt64() != lease.Token() || lease.Token() <= held[1].Token() {
		t.Errorf("woken span token %d (lease %d), want the lease's, above %d", tok.AsInt64(), lease.Token(), held[1].Token())
	}
	ev := woken.Events()
	if len(ev) != 1 || ev[0].Name != "wake-up" {
		t.Fatalf("woken span events %v, want one wake-up", ev)
	}
	evAttrs := attribute.NewSet(ev[0].Attributes...)
	if v, _ := evAttrs.Value("zkrecipes.lock.watched"); v.AsString() != first {
		t.Errorf("wake-up watched %q, want the released lease's node %q", v.AsString(), first)
	}
	if v, _ := evAttrs.Value("zkrecipes.zk.event"); v.AsString() != "EventNodeDeleted" {
		t.Errorf("wake-up event %q, want EventNodeDeleted", v.AsString())
	}
	if n := len(tel.spans("semaphore.release")); n != 3 {
		t.Errorf("got %d semaphore.release spans, want 3", n)
	}

	rm := tel.collect(t)
	attr := recipe.AttrRecipe.String("semaphore")
	wantSums(t, rm, attr, map[string]int64{
		recipe.MetricAcquisitions: 3, // AcquireN counts each lease
		recipe.MetricTimeouts:     1, // not the TryAcquire
		recipe.MetricHolders:      0,
		recipe.MetricWaiters:      0,
	})
	if got, _ := sumOf(t, rm, recipe.MetricLosses, attr); got != 0 {
		t.Errorf("losses = %d, want 0", got)
	}
	for outcome, want := range map[string]uint64{"acquired": 2, "timeout": 1, "held_elsewhere": 1} {
		if got := histCount(t, rm, attr, recipe.AttrOutcome.String(outcome)); got != want {
			t.Errorf("acquire duration{%s} has %d values, want %d", outcome, got, want)
		}
	}
}

// While leases are held the holders gauge counts them; a lease lost to a
// deletion is counted by reason and leaves the gauge.
func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := newTelemetry(t)
	s := newSem(t, tel.client(t, srv.Addr()), path, 3)
	a, b := acquire(t, s), acquire(t, s)
	attr := recipe.AttrRecipe.String("semaphore")
	if got, _ := sumOf(t, tel.collect(t), recipe.MetricHolders, attr); got != 2 {
		t.Fatalf("holders with two leases = %d, want 2", got)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+a.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	rm := tel.collect(t)
	if got, _ := sumOf(t, rm, recipe.MetricLosses, attr, recipe.AttrReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{semaphore, node_deleted} = %d, want 1", got)
	}
	if got, _ := sumOf(t, rm, recipe.MetricHolders, attr); got != 1 {
		t.Fatalf("holders after one loss = %d, want 1", got)
	}
	_ = a.Release(context.Background())
	release(t, b)
	if got, _ := sumOf(t, tel.collect(t), recipe.MetricHolders, attr); got != 0 {
		t.Fatalf("holders after the release = %d, want 0", got)
	}
}
