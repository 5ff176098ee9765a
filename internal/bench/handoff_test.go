package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	handoff       = flag.Bool("handoff", false, "run TestHandoffBreakdown (about 6 s per round)")
	handoffRounds = flag.Int("handoff.rounds", 2, "rounds of TestHandoffBreakdown")
	handoffKinds  = flag.String("handoff.kinds", "zk.Lock,mutex", "the locks TestHandoffBreakdown runs, in order (one alone, to profile it with -cpuprofile)")
)

// wireClock sits under a client's connection and times a contended
// cycle's hand-off on the wire: from the watch event to the listing sent,
// from the listing's reply to the delete sent. Within one lock only the
// waiter being handed the lock is on that path, so one clock serves all
// the sessions of a lock. It also counts reads and writes of the
// connection.
type wireClock struct {
	mu               sync.Mutex
	event, listed    time.Time
	listXid          int32
	toList, toDelete []time.Duration
	reads, writes    atomic.Int64
}

type clockedConn struct {
	net.Conn
	w     *wireClock
	buf   []byte
	first bool // the connect response was read
}

func (c *clockedConn) Write(b []byte) (int, error) {
	c.w.writes.Add(1)
	if len(b) >= 12 {
		op := int32(binary.BigEndian.Uint32(b[8:12]))
		c.w.mu.Lock()
		switch {
		case (op == 12 || op == 8) && !c.w.event.IsZero() && c.w.listed.IsZero(): // getChildren2 (go-zookeeper) or getChildren (direct) after the event
			c.w.toList = append(c.w.toList, time.Since(c.w.event))
			c.w.listXid = int32(binary.BigEndian.Uint32(b[4:8]))
		case op == 2 && !c.w.listed.IsZero(): // the delete after the listing's reply
			c.w.toDelete = append(c.w.toDelete, time.Since(c.w.listed))
			c.w.event, c.w.listed = time.Time{}, time.Time{}
		}
		c.w.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *clockedConn) Read(b []byte) (int, error) {
	c.w.reads.Add(1)
	n, err := c.Conn.Read(b)
	c.buf = append(c.buf, b[:n]...)
	for len(c.buf) >= 8 {
		l := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+l {
			break
		}
		if c.first {
			xid := int32(binary.BigEndian.Uint32(c.buf[4:8]))
			c.w.mu.Lock()
			switch {
			case xid == -1:
				c.w.event, c.w.listed = time.Now(), time.Time{}
			case !c.w.event.IsZero() && c.w.listed.IsZero() && xid == c.w.listXid:
				c.w.listed = time.Now()
			}
			c.w.mu.Unlock()
		}
		c.first = true
		c.buf = c.buf[4+l:]
	}
	return n, err
}

func (w *wireClock) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &clockedConn{Conn: c, w: w}, nil
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// TestHandoffBreakdown runs zk.Lock and the mutex contended (8 sessions,
// 3 s each, -handoff.rounds rounds) and prints, per cycle, the process's CPU time, the
// reads and writes of the connections, and the client's share of a
// hand-off. Opt in with -args -handoff; the figures are in
// docs/performance.md.
func TestHandoffBreakdown(t *testing.T) {
	if !*handoff {
		t.Skip("opt in with -args -handoff")
	}
	srv := zktest.Shared(t)
	for round := range *handoffRounds {
		for _, kind := range strings.Split(*handoffKinds, ",") {
			if kind != "zk.Lock" && kind != "mutex" {
				t.Fatalf("-handoff.kinds: %q is neither zk.Lock nor mutex", kind)
			}
			w := &wireClock{}
			var ls []locker
			path := fmt.Sprintf("/handoff-%s-%d", kind, round)
			for range 8 {
				if kind == "zk.Lock" {
					c, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithDialer(w.dial), zk.WithLogInfo(false))
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					ls = append(ls, zkLocker{zk.NewLock(c, path, zk.WorldACL(zk.PermAll))})
					continue
				}
				c, err := recipe.Connect(context.Background(), []string{srv.Addr()}, recipe.WithDialer(w.dial))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				m, err := mutex.New(c, path)
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, m)
			}
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			w.reads.Store(0)
			w.writes.Store(0)
			var cycles atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for _, l := range ls {
				wg.Go(func() {
					// A context that can end, as callers' usually can: the
					// mutex's requests then run on its client's workers.
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					for time.Since(start) < 3*time.Second {
						if err := l.Lock(ctx); err != nil {
							t.Error(err)
							return
						}
						if err := l.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
						cycles.Add(1)
					}
				})
			}
			wg.Wait()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			n := cycles.Load()
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			w.mu.Lock()
			t.Logf("%-8s %5.0f cycles/s; per cycle: CPU %v, reads %.1f, writes %.1f; hand-off p50: event->list %v, list reply->delete %v",
				kind, float64(n)/time.Since(start).Seconds(), (cpu / time.Duration(n)).Round(time.Microsecond),
				float64(w.reads.Load())/float64(n), float64(w.writes.Load())/float64(n),
				p50(w.toList).Round(100*time.Nanosecond), p50(w.toDelete).Round(100*time.Nanosecond))
			w.mu.Unlock()
		}
	}
}
