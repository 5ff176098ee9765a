package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A read acquire that times out behind a writer, one woken by the writer's
// release, and a write acquire that times out behind the reader: span
// names, attributes, parentage, wake-up event, release spans and metrics.
func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	writer := newRW(t, tel.Client(t, srv.Addr()), path)
	reader := newRW(t, tel.Client(t, srv.Addr()), path)

	caller, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "caller")
	if err := writer.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
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
	locktest.Queued(t, 2, writer.Participants)
	time.Sleep(50 * time.Millisecond) // let the reader arm its watch
	if err := writer.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rnode, rtoken := reader.Reader().Node(), reader.Reader().Token()

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
		spans := tel.Spans(name)
		if len(spans) != 2 {
			t.Fatalf("got %d %s spans, want 2", len(spans), name)
		}
		for _, s := range spans {
			if r, _ := locktest.SpanAttr(s, telemetry.AttrRecipe); r.AsString() != want {
				t.Errorf("%s span: recipe %q, want %q", name, r.AsString(), want)
			}
			if p, _ := locktest.SpanAttr(s, telemetry.AttrPath); p.AsString() != path {
				t.Errorf("%s span: path %q, want %q", name, p.AsString(), path)
			}
			if _, ok := locktest.SpanAttr(s, telemetry.AttrWaitMs); !ok {
				t.Errorf("%s span (%s) without %s", name, locktest.Outcome(s), telemetry.AttrWaitMs)
			}
		}
	}

	reads := locktest.ByOutcome(t, tel.Spans("rwlock.read.acquire"))
	readTimeout, ok := reads["timeout"]
	if !ok {
		t.Fatalf("no rwlock.read.acquire span with outcome timeout: %v", reads)
	}
	woken, ok := reads["acquired"]
	if !ok {
		t.Fatalf("no rwlock.read.acquire span with outcome acquired: %v", reads)
	}
	writes := locktest.ByOutcome(t, tel.Spans("rwlock.write.acquire"))
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
		if pos, ok := locktest.SpanAttr(s, telemetry.AttrPosition); !ok || pos.AsInt64() != 1 {
			t.Errorf("%s span: queue position %v (set %v), want 1", name, pos.AsInt64(), ok)
		}
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"read timeout": readTimeout, "write timeout": writeTimeout} {
		for _, k := range []attribute.Key{telemetry.AttrNode, telemetry.AttrToken} {
			if _, ok := locktest.SpanAttr(s, k); ok {
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
	if _, ok := locktest.SpanAttr(first, telemetry.AttrPosition); ok {
		t.Errorf("an acquire that did not wait carries %s", telemetry.AttrPosition)
	}
	if n, _ := locktest.SpanAttr(first, telemetry.AttrNode); n.AsString() != wnode {
		t.Errorf("write span node %q, want %q", n.AsString(), wnode)
	}
	if tok, _ := locktest.SpanAttr(first, telemetry.AttrToken); tok.AsInt64() != wtoken || wtoken <= 0 {
		t.Errorf("write span token %d, want %d (> 0)", tok.AsInt64(), wtoken)
	}

	if n, _ := locktest.SpanAttr(woken, telemetry.AttrNode); n.AsString() != rnode {
		t.Errorf("read span node %q, want %q", n.AsString(), rnode)
	}
	if tok, _ := locktest.SpanAttr(woken, telemetry.AttrToken); tok.AsInt64() != rtoken || rtoken <= wtoken {
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
		rel := tel.Spans(name)
		if len(rel) != 1 {
			t.Fatalf("got %d %s spans, want 1", len(rel), name)
		}
		if n, _ := locktest.SpanAttr(rel[0], telemetry.AttrNode); n.AsString() != node {
			t.Errorf("%s span node %q, want %q", name, n.AsString(), node)
		}
		if tok, _ := locktest.SpanAttr(rel[0], telemetry.AttrToken); tok.AsInt64() <= 0 {
			t.Errorf("%s span without a token", name)
		}
	}

	rm := tel.Collect(t)
	for _, r := range []string{"rwlock.read", "rwlock.write"} {
		attr := telemetry.AttrRecipe.String(r)
		locktest.WantSums(t, rm, attr, map[string]int64{
			telemetry.MetricAcquisitions: 1,
			telemetry.MetricTimeouts:     1,
			telemetry.MetricHolders:      0,
			telemetry.MetricWaiters:      0,
		})
		if got, _ := locktest.Sum(t, rm, telemetry.MetricLosses, attr); got != 0 {
			t.Errorf("losses{%s} = %d, want 0", r, got)
		}
		for outcome, want := range map[string]uint64{"acquired": 1, "timeout": 1} {
			if got := locktest.HistCount(t, rm, attr, telemetry.AttrOutcome.String(outcome)); got != want {
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
	tel := locktest.NewTelemetry(t)
	rw := newRW(t, tel.Client(t, srv.Addr()), path)
	ctx := locktest.Ctx(t, 20*time.Second)
	holders := func(r string) int64 {
		got, _ := locktest.Sum(t, tel.Collect(t), telemetry.MetricHolders, telemetry.AttrRecipe.String(r))
		return got
	}

	wctx, err := rw.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.RLock(wctx); err != nil {
		t.Fatal(err)
	}
	if w, r := holders("rwlock.write"), holders("rwlock.read"); w != 1 || r != 1 {
		t.Fatalf("holders while writing and reading: write %d, read %d, want 1 and 1", w, r)
	}
	down := tel.Spans("rwlock.read.acquire")
	if len(down) != 1 || locktest.Outcome(down[0]) != "acquired" {
		t.Fatalf("downgrade read acquire spans %d (outcome %q), want 1 acquired", len(down), locktest.Outcome(down[0]))
	}
	if n, _ := locktest.SpanAttr(down[0], telemetry.AttrNode); n.AsString() != rw.Reader().Node() {
		t.Errorf("downgrade span node %q, want the read node %q", n.AsString(), rw.Reader().Node())
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
	other := newRW(t, tel.Client(t, srv.Addr()), path)
	wctx, err = rw.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- other.Lock(ctx) }()
	locktest.Queued(t, 2, rw.Participants)
	if err := rw.RLock(wctx); err != nil {
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
	rm := tel.Collect(t)
	for _, r := range []string{"rwlock.read", "rwlock.write"} {
		locktest.WantSums(t, rm, telemetry.AttrRecipe.String(r), map[string]int64{
			telemetry.MetricHolders: 0,
			telemetry.MetricWaiters: 0,
		})
	}
	if got, _ := locktest.Sum(t, rm, telemetry.MetricAcquisitions, telemetry.AttrRecipe.String("rwlock.write")); got != 3 {
		t.Errorf("write acquisitions = %d, want 3", got)
	}
}

func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	rw := newRW(t, tel.Client(t, srv.Addr()), path)
	if err := rw.RLock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+rw.Reader().Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rw.Reader().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("RDone not closed after the read node was deleted")
	}
	rm := tel.Collect(t)
	read := telemetry.AttrRecipe.String("rwlock.read")
	if got, _ := locktest.Sum(t, rm, telemetry.MetricLosses, read, telemetry.AttrLossReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{rwlock.read, node_deleted} = %d, want 1", got)
	}
	if got, _ := locktest.Sum(t, rm, telemetry.MetricHolders, read); got != 0 {
		t.Fatalf("read holders after the loss = %d, want 0", got)
	}
	_ = rw.RUnlock(context.Background())
}
