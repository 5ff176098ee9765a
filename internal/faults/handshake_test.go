package faults_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestUnansweredHandshake: a server that is starting up accepts
// connections before it answers them. A client that reconnects in that
// window must not wait long for the answer: once the server serves, the
// client takes a free lock within B, as after any other fault.
//
// The client reaches the server through a proxy. The fault: the proxy
// drops the client's connection and sends the next ones to a listener
// that accepts and never answers (the starting server); once the client
// has sent its connect request there, the proxy sends new connections to
// the server again, and the fault is over. go-zookeeper alone waits ten
// receive timeouts (6.7 session timeouts: 13s for 2s sessions) for the
// answer to its connect request before it dials again; the client bounds
// that wait (recipe/internal/transport/conn.go, handshakeTimeout). The liveness grid met the
// stall after a server restart, when a reconnect landed in the server's
// start-up.
func TestUnansweredHandshake(t *testing.T) {
	srv := zktest.Shared(t)
	const session = 2 * time.Second
	bound := faults.Bound(session, faults.DefaultMaxSleep)

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var conns sync.WaitGroup
	var open []net.Conn
	var mu sync.Mutex
	conns.Go(func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			accepted.Add(1)
		}
	})
	defer func() {
		silent.Close()
		conns.Wait()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
	}()

	p, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := recipe.Connect(ctx, []string{p.Addr()}, recipe.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := mutex.New(c, zktest.UniquePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	p.Retarget(silent.Addr().String())
	p.DropAll()
	deadline := time.Now().Add(5 * time.Second)
	for accepted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if accepted.Load() == 0 {
		t.Fatal("the client did not reconnect within 5s")
	}
	time.Sleep(200 * time.Millisecond) // its connect request is out
	p.Retarget(srv.Addr())
	over := time.Now()

	lctx, lcancel := context.WithTimeout(context.Background(), 5*bound)
	defer lcancel()
	err = m.Lock(lctx)
	took := time.Since(over)
	if err != nil {
		t.Fatalf("Lock after the server answers again: %v after %v (B %v)", err, took.Round(time.Millisecond), bound)
	}
	defer m.Unlock(context.Background())
	t.Logf("taken %v after the server answers again (B %v)", took.Round(time.Millisecond), bound)
	if took > bound+faults.SchedulingAllowance {
		t.Errorf("taken %v after the server answers again, past B %v + %v", took.Round(time.Millisecond), bound, faults.SchedulingAllowance)
	}
}
