package recipe_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

func newLock(t testing.TB, c *recipe.Client, path string) *recipe.Lock {
	t.Helper()
	l, err := recipe.NewLock(c, path, recipe.LockSpec{Recipe: "test", LockName: "lock-", Driver: driver.Mutex()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConnectBadInput(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		ctx     context.Context
		servers []string
		opts    []recipe.Option
	}{
		"nil context":       {nil, []string{"127.0.0.1:1"}, nil},
		"no servers":        {ctx, nil, nil},
		"empty server":      {ctx, []string{""}, nil},
		"nil option":        {ctx, []string{"127.0.0.1:1"}, []recipe.Option{nil}},
		"zero session":      {ctx, []string{"127.0.0.1:1"}, []recipe.Option{recipe.WithSessionTimeout(0)}},
		"loss >= session":   {ctx, []string{"127.0.0.1:1"}, []recipe.Option{recipe.WithSessionTimeout(time.Second), recipe.WithLossTimeout(time.Second)}},
		"empty ACL":         {ctx, []string{"127.0.0.1:1"}, []recipe.Option{recipe.WithACL()}},
		"nil logger":        {ctx, []string{"127.0.0.1:1"}, []recipe.Option{recipe.WithLogger(nil)}},
		"auth without user": {ctx, []string{"127.0.0.1:1"}, []recipe.Option{recipe.WithDigestAuth("", "x")}},
		"no port number":    {ctx, []string{"127.0.0.1:"}, nil},
		"port out of range": {ctx, []string{"127.0.0.1:70000"}, nil},
		"no host":           {ctx, []string{":2181"}, nil},
		"garbage":           {ctx, []string{"zk1:2181:2182"}, nil},
		"path, not server":  {ctx, []string{"127.0.0.1:2181/chroot"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := recipe.Connect(tc.ctx, tc.servers, tc.opts...)
			if !errors.Is(err, recipe.ErrInvalidArgument) {
				t.Fatalf("Connect = %v, %v; want ErrInvalidArgument", c, err)
			}
		})
	}
}

// Nothing listens: Connect returns when its context ends and leaves no
// goroutine behind (checked by TestMain).
func TestConnectHonoursContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = recipe.Connect(ctx, []string{addr})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Connect to a dead address = %v, want DeadlineExceeded and the dial's connection refused", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Connect took %v past its 300ms context", took)
	}
}

// Silence past the loss timeout ends holds before the server could expire
// the session; when the same session answers again, new acquires work and
// the lost node is cleaned up.
func TestLossOnSilenceThenRecovery(t *testing.T) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const session = 4 * time.Second
	c := locktest.Client(t, []string{proxy.Addr()}, recipe.WithSessionTimeout(session))
	path := zktest.UniquePath(t)
	l := newLock(t, c, path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	proxy.Partition()
	start := time.Now()
	select {
	case <-h.Done():
	case <-time.After(session):
		t.Fatal("hold not lost within the session timeout of silence")
	}
	took := time.Since(start)
	if err := h.Err(); !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrConnectionSuspended) {
		t.Fatalf("Err = %v, want ErrLost and ErrConnectionSuspended", err)
	}
	t.Logf("loss signalled after %v of silence (session timeout %v)", took, session)
	proxy.Heal()
	h2, err := l.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire after the connection came back: %v", err)
	}
	if c.SessionID() != sid {
		t.Fatalf("session changed from 0x%x to 0x%x: the test meant to keep it", sid, c.SessionID())
	}
	raw := zktest.Connect(t, srv.Addr())
	locktest.Eventually(t, 10*time.Second, "lost node cleaned up", func() bool {
		names, _, err := raw.Children(path)
		return err == nil && len(names) == 1 && names[0] == h2.Node()
	})
	if err := h.Release(ctx); !errors.Is(err, recipe.ErrLost) {
		t.Fatalf("Release of a lost hold = %v, want ErrLost", err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h2.Release(ctx); !errors.Is(err, recipe.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrReleased", err)
	}
}

func TestClosedClient(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	l := newLock(t, c, zktest.UniquePath(t))
	h, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("hold not ended by Close")
	}
	if err := h.Err(); !errors.Is(err, recipe.ErrClosed) {
		t.Fatalf("Err after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Acquire(context.Background()); !errors.Is(err, recipe.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if id := c.SessionID(); id != 0 {
		t.Fatalf("SessionID after Close = %#x, want 0", id)
	}
}

// Close wakes an acquire that is waiting in the queue: it returns at once
// with ErrClosed.
func TestCloseWakesWaiter(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	holder := newLock(t, locktest.Client(t, []string{srv.Addr()}), path)
	h, err := holder.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	c := locktest.Client(t, []string{srv.Addr()})
	waiter := newLock(t, c, path)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(context.Background())
		done <- err
	}()
	locktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
		p, err := holder.Participants(context.Background())
		return err == nil && len(p) == 2
	})
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, recipe.ErrClosed) {
			t.Fatalf("waiting Acquire after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Acquire did not return after Close")
	}
}
