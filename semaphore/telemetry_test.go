package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// With two leases held by one AcquireN: a TryAcquire that finds no lease,
// an Acquire that times out, and one woken by a release. Span names,
// attributes, parentage, the wake-up event, release spans and metrics.
func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	holder := newSem(t, tel.Client(t, srv.Addr()), path, 2)
	waiter := newSem(t, tel.Client(t, srv.Addr()), path, 2)

	caller, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "caller")
	held, err := holder.AcquireN(locktest.Ctx(t, 10*time.Second), 2)
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
	locktest.Queued(t, 2, holder.Participants)
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
	locktest.Queued(t, 3, holder.Participants)
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

	acquires := tel.Spans("semaphore.acquire")
	if len(acquires) != 4 {
		t.Fatalf("got %d semaphore.acquire spans, want 4", len(acquires))
	}
	for _, s := range acquires {
		if r, _ := locktest.SpanAttr(s, telemetry.AttrRecipe); r.AsString() != "semaphore" {
			t.Errorf("span recipe %q, want semaphore", r.AsString())
		}
		if p, _ := locktest.SpanAttr(s, telemetry.AttrPath); p.AsString() != path {
			t.Errorf("span path %q, want %q", p.AsString(), path)
		}
	}
	var both, woken sdktrace.ReadOnlySpan
	var others []sdktrace.ReadOnlySpan
	for _, s := range acquires {
		switch _, isN := locktest.SpanAttr(s, telemetry.AttrCount); {
		case isN:
			both = s
		case locktest.Outcome(s) == "acquired":
			woken = s
		default:
			others = append(others, s)
		}
	}
	if both == nil || woken == nil {
		t.Fatalf("want one AcquireN span and one acquired Acquire span, got %d spans", len(acquires))
	}
	failed := locktest.ByOutcome(t, others)
	noLease, ok := failed["held_elsewhere"]
	if !ok {
		t.Fatalf("no semaphore.acquire span with outcome held_elsewhere: %v", failed)
	}
	timeout, ok := failed["timeout"]
	if !ok {
		t.Fatalf("no semaphore.acquire span with outcome timeout: %v", failed)
	}

	// AcquireN: one span for the n nodes, with the first node's name and token.
	if c, _ := locktest.SpanAttr(both, telemetry.AttrCount); c.AsInt64() != 2 {
		t.Errorf("AcquireN span count %d, want 2", c.AsInt64())
	}
	if o := locktest.Outcome(both); o != "acquired" {
		t.Errorf("AcquireN span outcome %q", o)
	}
	if n, _ := locktest.SpanAttr(both, telemetry.AttrNode); n.AsString() != first {
		t.Errorf("AcquireN span node %q, want the first lease's %q", n.AsString(), first)
	}
	if tok, _ := locktest.SpanAttr(both, telemetry.AttrToken); tok.AsInt64() != held[0].Token() || tok.AsInt64() <= 0 {
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
	if _, ok := locktest.SpanAttr(noLease, telemetry.AttrPosition); ok {
		t.Errorf("TryAcquire span carries %s", telemetry.AttrPosition)
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"timeout": timeout, "woken": woken} {
		if pos, ok := locktest.SpanAttr(s, telemetry.AttrPosition); !ok || pos.AsInt64() != 2 {
			t.Errorf("%s span: queue position %d (set %v), want 2", name, pos.AsInt64(), ok)
		}
	}
	for name, s := range map[string]sdktrace.ReadOnlySpan{"no lease": noLease, "timeout": timeout} {
		if _, ok := locktest.SpanAttr(s, telemetry.AttrToken); ok {
			t.Errorf("%s span carries a token", name)
		}
		if len(s.Events()) != 0 {
			t.Errorf("%s span events %v, want none", name, s.Events())
		}
	}
	if n, _ := locktest.SpanAttr(woken, telemetry.AttrNode); n.AsString() != lease.Node() {
		t.Errorf("woken span node %q, want %q", n.AsString(), lease.Node())
	}
	if tok, _ := locktest.SpanAttr(woken, telemetry.AttrToken); tok.AsInt64() != lease.Token() || lease.Token() <= held[1].Token() {
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
	if n := len(tel.Spans("semaphore.release")); n != 3 {
		t.Errorf("got %d semaphore.release spans, want 3", n)
	}

	rm := tel.Collect(t)
	attr := telemetry.AttrRecipe.String("semaphore")
	locktest.WantSums(t, rm, attr, map[string]int64{
		telemetry.MetricAcquisitions: 3, // AcquireN counts each lease
		telemetry.MetricTimeouts:     1, // not the TryAcquire
		telemetry.MetricHolders:      0,
		telemetry.MetricWaiters:      0,
	})
	if got, _ := locktest.Sum(t, rm, telemetry.MetricLosses, attr); got != 0 {
		t.Errorf("losses = %d, want 0", got)
	}
	for outcome, want := range map[string]uint64{"acquired": 2, "timeout": 1, "held_elsewhere": 1} {
		if got := locktest.HistCount(t, rm, attr, telemetry.AttrOutcome.String(outcome)); got != want {
			t.Errorf("acquire duration{%s} has %d values, want %d", outcome, got, want)
		}
	}
}

// While leases are held the holders gauge counts them; a lease lost to a
// deletion is counted by reason and leaves the gauge.
func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	s := newSem(t, tel.Client(t, srv.Addr()), path, 3)
	a, b := acquire(t, s), acquire(t, s)
	attr := telemetry.AttrRecipe.String("semaphore")
	if got, _ := locktest.Sum(t, tel.Collect(t), telemetry.MetricHolders, attr); got != 2 {
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
	rm := tel.Collect(t)
	if got, _ := locktest.Sum(t, rm, telemetry.MetricLosses, attr, telemetry.AttrLossReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{semaphore, node_deleted} = %d, want 1", got)
	}
	if got, _ := locktest.Sum(t, rm, telemetry.MetricHolders, attr); got != 1 {
		t.Fatalf("holders after one loss = %d, want 1", got)
	}
	_ = a.Release(context.Background())
	release(t, b)
	if got, _ := locktest.Sum(t, tel.Collect(t), telemetry.MetricHolders, attr); got != 0 {
		t.Fatalf("holders after the release = %d, want 0", got)
	}
}
