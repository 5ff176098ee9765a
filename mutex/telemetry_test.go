package mutex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestTracesAndMetrics(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	holder := newMutex(t, tel.Client(t, srv.Addr()), path)
	waiter := newMutex(t, tel.Client(t, srv.Addr()), path)

	caller, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "caller")
	if err := holder.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
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

	acquires := tel.Spans("mutex.acquire")
	if len(acquires) != 3 {
		t.Fatalf("got %d mutex.acquire spans, want 3", len(acquires))
	}
	outcomes := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range acquires {
		v, _ := locktest.SpanAttr(s, telemetry.AttrOutcome)
		outcomes[v.AsString()+map[bool]string{true: "+woken"}[len(s.Events()) > 0]] = s
		if p, _ := locktest.SpanAttr(s, telemetry.AttrPath); p.AsString() != path {
			t.Errorf("span path %q, want %q", p.AsString(), path)
		}
		if r, _ := locktest.SpanAttr(s, telemetry.AttrRecipe); r.AsString() != "mutex" {
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
		if pos, ok := locktest.SpanAttr(s, telemetry.AttrPosition); !ok || pos.AsInt64() != 1 {
			t.Errorf("%s span queue position = %v, want 1", name, pos.AsInt64())
		}
	}
	if ev := woken.Events(); len(ev) != 1 || ev[0].Name != "wake-up" {
		t.Errorf("woken span events %v, want one wake-up", ev)
	}
	if tok, _ := locktest.SpanAttr(woken, telemetry.AttrToken); tok.AsInt64() <= 0 {
		t.Errorf("acquired span without a token")
	}
	if n := len(tel.Spans("mutex.release")); n != 2 {
		t.Errorf("got %d mutex.release spans, want 2", n)
	}

	rm := tel.Collect(t)
	locktest.WantSums(t, rm, telemetry.AttrRecipe.String("mutex"), map[string]int64{
		telemetry.MetricAcquisitions: 2,
		telemetry.MetricTimeouts:     1,
		telemetry.MetricHolders:      0,
		telemetry.MetricWaiters:      0,
	})
	if n := locktest.HistCount(t, rm); n != 3 {
		t.Errorf("acquire duration histogram has %d points, want 3", n)
	}
}

func TestLossMetric(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	m := newMutex(t, tel.Client(t, srv.Addr()), path)
	if err := m.Lock(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+m.Node(), -1); err != nil {
		t.Fatal(err)
	}
	<-m.Done()
	rm := tel.Collect(t)
	if got, _ := locktest.Sum(t, rm, telemetry.MetricLosses, telemetry.AttrLossReason.String("node_deleted")); got != 1 {
		t.Fatalf("losses{node_deleted} = %d, want 1", got)
	}
	if got, _ := locktest.Sum(t, rm, telemetry.MetricHolders, telemetry.AttrRecipe.String("mutex")); got != 0 {
		t.Fatalf("holders after the loss = %d, want 0", got)
	}
	_ = m.Unlock(context.Background())
}
