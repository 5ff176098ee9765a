package recipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/telemetry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// A holder whose node carries 500 KiB of data: the waiter's span says whom
// it waited on in a few hundred bytes, cut on a character boundary and
// marked with the data's length.
func TestWaitingOnIsCut(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	// 2 + 3*170666 = 512000 bytes; the 256th byte is inside a euro sign.
	data := "xy" + strings.Repeat("€", 170666)
	spec := recipe.LockSpec{Recipe: "test", LockName: "lock-", Driver: driver.Mutex()}
	holder, err := recipe.NewLock(tel.Client(t, srv.Addr()), path, spec, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := recipe.NewLock(tel.Client(t, srv.Addr()), path, spec, []byte("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := holder.Acquire(locktest.Ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := waiter.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter's Acquire = %v, want a timeout", err)
	}
	spans := locktest.ByOutcome(t, tel.Spans("test.acquire"))
	s, ok := spans["timeout"]
	if !ok {
		t.Fatalf("no acquire span with outcome timeout: %v", spans)
	}
	if n, _ := locktest.SpanAttr(s, telemetry.AttrWaitingOnNode); n.AsString() != h.Node() {
		t.Errorf("waiting_on_node = %q, want the holder's %q", n.AsString(), h.Node())
	}
	v, _ := locktest.SpanAttr(s, telemetry.AttrWaitingOn)
	got := v.AsString()
	want := "xy" + strings.Repeat("€", 84) + "…(cut, 512000 bytes)"
	if got != want {
		t.Errorf("waiting_on is %d bytes, %.60q...; want %q", len(got), got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("waiting_on is not UTF-8")
	}
}

// A directory whose data is not what the lock expects, and is 500 KiB
// long: the acquire's error quotes it, and the exception event and the
// span's status carry no more than a kilobyte of it.
func TestExceptionMessageIsCut(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	tel := locktest.NewTelemetry(t)
	raw := zktest.Connect(t, srv.Addr())
	junk := strings.Repeat("j", 500*1024)
	if _, err := raw.Create(path, []byte(junk), 0, zk.WorldACL(zk.PermAll)); err != nil {
		if !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		// The tests' parent container was reaped: make it again.
		if _, err := raw.Create(path[:strings.LastIndexByte(path, '/')], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
		if _, err := raw.Create(path, []byte(junk), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = raw.Delete(path, -1) })
	leases, err := driver.Leases(1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := recipe.NewLock(tel.Client(t, srv.Addr()), path,
		recipe.LockSpec{Recipe: "test", LockName: "lease-", Driver: leases, DirData: []byte("maxLeases=1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(locktest.Ctx(t, 10*time.Second)); !errors.Is(err, recipe.ErrMismatch) {
		t.Fatalf("Acquire = %v, want a mismatch", err)
	}
	spans := tel.Spans("test.acquire")
	if len(spans) != 1 {
		t.Fatalf("%d acquire spans, want 1", len(spans))
	}
	s := spans[0]
	if d := s.Status().Description; s.Status().Code != codes.Error || len(d) > 1100 || !strings.Contains(d, "…(cut, ") {
		t.Errorf("status %v, %d bytes: want Error, cut", s.Status().Code, len(s.Status().Description))
	}
	var found bool
	for _, e := range s.Events() {
		if e.Name != "exception" {
			continue
		}
		found = true
		for _, kv := range e.Attributes {
			switch kv.Key {
			case "exception.message":
				if m := kv.Value.AsString(); len(m) > 1100 || !strings.Contains(m, "…(cut, ") || !strings.Contains(m, path) {
					t.Errorf("exception.message of %d bytes: %.200q", len(m), m)
				}
			case "exception.type":
				if kv.Value.AsString() == "" {
					t.Error("empty exception.type")
				}
			}
		}
	}
	if !found {
		t.Errorf("no exception event in %v", s.Events())
	}
}
