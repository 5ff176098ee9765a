package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/internal/zktest"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A campaign is a leader.campaign span (timeouts included), each term of Run
// a leader.term span under the caller's span, ended with the reason.
func TestTraces(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithTracerProvider(tp))
	other := newElection(t, locktest.Client(t, []string{srv.Addr()}, recipe.WithTracerProvider(tp)), path)
	e := newElection(t, c, path)

	caller, parent := tp.Tracer("test").Start(context.Background(), "service")
	if err := other.Campaign(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(caller, 200*time.Millisecond)
	if err := e.Campaign(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign behind a leader = %v, want a timeout", err)
	}
	cancel()
	if err := other.Resign(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(caller)
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(runCtx, func(ctx context.Context) error {
			close(ran)
			return nil // one term, ended by returning
		})
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run never led")
	}
	locktest.Eventually(t, 10*time.Second, "the term span ended", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "leader.term" {
				return true
			}
		}
		return false
	})
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	parent.End()

	var campaigns, timeouts, terms int
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "leader.campaign":
			campaigns++
			if v, _ := spanAttr(s, recipe.AttrOutcome); v.AsString() == "timeout" {
				timeouts++
				if s.Parent().SpanID() != parent.SpanContext().SpanID() {
					t.Error("the timed-out campaign is not under the caller's span")
				}
			}
		case "leader.term":
			terms++
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Error("the term span is not under the caller's span")
			}
			if v, _ := spanAttr(s, "zkrecipes.leader.term_end"); terms == 1 && v.AsString() != "returned" {
				t.Errorf("first term ended %q, want returned", v.AsString())
			}
			if v, _ := spanAttr(s, recipe.AttrToken); v.AsInt64() <= 0 {
				t.Error("term span without a token")
			}
		}
	}
	if timeouts != 1 || campaigns < 3 || terms < 1 {
		t.Fatalf("campaign spans %d (timeouts %d), term spans %d", campaigns, timeouts, terms)
	}
}
