package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// A campaign is a leader.acquire span (timeouts included), each term of Run
// a leader.term span under the caller's span, ended with the reason.
func TestTraces(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	c := tel.Client(t, srv.Addr())
	other := newElection(t, tel.Client(t, srv.Addr()), path)
	e := newElection(t, c, path)

	caller, parent := tel.TracerProvider.Tracer("test").Start(context.Background(), "service")
	if err := other.Campaign(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(caller, 200*time.Millisecond)
	if err := e.Campaign(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign behind a leader = %v, want a timeout", err)
	}
	cancel()
	if err := other.Resign(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(caller)
	ran := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- e.Run(runCtx, func(ctx context.Context) error {
			// Each term ends by returning; Run then campaigns again, and
			// may be elected again before the test stops it.
			once.Do(func() { close(ran) })
			return nil
		})
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run never led")
	}
	locktest.Eventually(t, 10*time.Second, "the term span ended", func() bool {
		return len(tel.Spans("leader.term")) > 0
	})
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	parent.End()

	campaigns, terms := tel.Spans("leader.acquire"), tel.Spans("leader.term")
	var timeouts int
	for _, s := range campaigns {
		if locktest.Outcome(s) == "timeout" {
			timeouts++
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Error("the timed-out campaign is not under the caller's span")
			}
		}
	}
	for i, s := range terms {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Error("the term span is not under the caller's span")
		}
		if v, _ := locktest.SpanAttr(s, "zkrecipes.leader.term_end"); i == 0 && v.AsString() != "returned" {
			t.Errorf("first term ended %q, want returned", v.AsString())
		}
		if v, _ := locktest.SpanAttr(s, telemetry.AttrToken); v.AsInt64() <= 0 {
			t.Error("term span without a token")
		}
	}
	if timeouts != 1 || len(campaigns) < 3 || len(terms) < 1 {
		t.Fatalf("campaign spans %d (timeouts %d), term spans %d", len(campaigns), timeouts, len(terms))
	}
}
