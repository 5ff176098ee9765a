package migrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// session is the session timeout of every contender.
const session = 4 * time.Second

// contender is one process's lock, as a service uses it.
type contender interface {
	// lock returns once the lock is held, or with ctx's error when ctx
	// ends first (a zk.Lock goes on waiting in the background: its Lock
	// cannot be interrupted).
	lock(ctx context.Context) error
	unlock() error
	// lost is closed when the hold is lost; nil when the library has no
	// loss signal.
	lost() <-chan struct{}
	close()
}

// silent is a go-zookeeper logger that drops everything.
type silent struct{}

func (silent) Printf(string, ...any) {}

type impl struct {
	name string
	dial func(t *testing.T, addr, path string) contender
}

var impls = []impl{
	{"zk.Lock", dialZkLock},
	{"mutex", dialMutex},
}

type zkLock struct {
	conn *zk.Conn
	l    *zk.Lock
	once sync.Once
}

func dialZkLock(t *testing.T, addr, path string) contender {
	conn, _, err := zk.Connect([]string{addr}, session, zk.WithLogInfo(false), zk.WithLogger(silent{}))
	if err != nil {
		t.Fatal(err)
	}
	z := &zkLock{conn: conn, l: zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))}
	t.Cleanup(z.close)
	return z
}

func (z *zkLock) lock(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- z.l.Lock() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err() // Lock goes on: it has no way to stop
	}
}

func (z *zkLock) unlock() error         { return z.l.Unlock() }
func (z *zkLock) lost() <-chan struct{} { return nil }
func (z *zkLock) close()                { z.once.Do(z.conn.Close) }

type ours struct {
	c *recipe.Client
	m *mutex.Mutex
}

func dialMutex(t *testing.T, addr, path string) contender {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := recipe.Connect(ctx, []string{addr}, recipe.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(c, path)
	if err != nil {
		t.Fatal(err)
	}
	o := &ours{c: c, m: m}
	t.Cleanup(o.close)
	return o
}

func (o *ours) lock(ctx context.Context) error { return o.m.Lock(ctx) }
func (o *ours) unlock() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return o.m.Unlock(ctx)
}
func (o *ours) lost() <-chan struct{} { return o.m.Done() }
func (o *ours) close()                { _ = o.c.Close() }

// locked starts c's lock in the background and returns when it reports.
func locked(ctx context.Context, c contender) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.lock(ctx) }()
	return ch
}

// children counts the lock nodes at path.
func children(t *testing.T, addr, path string) int {
	raw, _, err := zk.Connect([]string{addr}, session, zk.WithLogInfo(false), zk.WithLogger(silent{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	names, _, err := raw.Children(path)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return len(names)
}

func waitChildren(t *testing.T, addr, path string, n int) {
	deadline := time.Now().Add(20 * time.Second)
	for children(t, addr, path) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %d contenders queued", path, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// within describes when ch delivered, bounded by limit.
func within(ch <-chan error, start time.Time, limit time.Duration) string {
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Sprintf("Lock returned an error after %s (%v)", round(time.Since(start)), short(err))
		}
		return fmt.Sprintf("holds after %s", round(time.Since(start)))
	case <-time.After(limit):
		return fmt.Sprintf("still waiting after %s", round(limit))
	}
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func short(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// scenario is one fault, run for one implementation; it returns the cell
// of the table.
type scenario struct {
	name, what string
	run        func(t *testing.T, im impl) string
}

var scenarios = []scenario{
	{"server restart", "holder unlocks once the server is back; the holder, the waiter", restartCase},
	{"holder's session expired by the server", "writes of the old holder (every 5ms) after the next holder was granted, within 1s", holderExpiryCase},
	{"waiter's session expired by the server", "holder unlocks 1s after the expiry; the waiter", waiterExpiryCase},
	{"holder SIGKILLed", "the next holder", killCase},
	{"waiter SIGTERMed (its context cancelled)", "the waiter's call, and its node", termCase},
}

// queued dials a holder on holderAddr and a waiter on waiterAddr (the
// server at server, or a proxy in front of it), has the holder take path
// and the waiter call Lock with wctx, and returns once the waiter's node
// is queued behind the holder's.
func queued(t *testing.T, im impl, ctx, wctx context.Context, server, path, holderAddr, waiterAddr string) (a, b contender, got <-chan error) {
	t.Helper()
	a, b = im.dial(t, holderAddr, path), im.dial(t, waiterAddr, path)
	if err := a.lock(ctx); err != nil {
		t.Fatal(err)
	}
	got = locked(wctx, b)
	waitChildren(t, server, path, 2)
	return a, b, got
}

func restartCase(t *testing.T, im impl) string {
	srv := zktest.Start(t)
	path := "/compare/restart"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, _, got := queued(t, im, ctx, ctx, srv.Addr(), path, srv.Addr(), srv.Addr())
	down := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	holder := fmt.Sprintf("server back after %s; holder's Unlock succeeds", round(start.Sub(down)))
	if err := a.unlock(); err != nil {
		holder = fmt.Sprintf("server back after %s; holder told of the loss (Unlock: %s)", round(start.Sub(down)), short(err))
	}
	return holder + "; waiter " + within(got, start, 45*time.Second) + " from the Unlock"
}

func holderExpiryCase(t *testing.T, im impl) string {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, _, got := queued(t, im, ctx, ctx, srv.Addr(), path, proxy.Addr(), srv.Addr())
	lost := a.lost()
	var mu sync.Mutex
	var writes []time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the old holder's work: a write every 5ms while it believes it holds
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-lost:
				return
			case <-stop:
				return
			case now := <-tick.C:
				mu.Lock()
				writes = append(writes, now)
				mu.Unlock()
			}
		}
	})
	if _, err := proxy.ExpireSessions(); err != nil {
		t.Fatal(err)
	}
	var granted time.Time
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		granted = time.Now()
	case <-time.After(20 * time.Second):
		close(stop)
		wg.Wait()
		return "next holder not granted within 20s"
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	n := 0
	for _, w := range writes {
		if w.After(granted) {
			n++
		}
	}
	told := "never told"
	if lost != nil {
		select {
		case <-lost:
			told = "told (Done)"
		default:
			told = "not told within 1s"
		}
	}
	return fmt.Sprintf("%d writes; %s", n, told)
}

func waiterExpiryCase(t *testing.T, im impl) string {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, _, got := queued(t, im, ctx, ctx, srv.Addr(), path, srv.Addr(), proxy.Addr())
	if _, err := proxy.ExpireSessions(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-got: // before the holder let go
		if err == nil {
			return "holds while the holder still holds (!)"
		}
		return fmt.Sprintf("Lock returned an error %s after the expiry (%v); the service must call it again", round(time.Since(start)), short(err))
	case <-time.After(time.Second):
	}
	if err := a.unlock(); err != nil {
		t.Fatal(err)
	}
	return within(got, start, 20*time.Second) + " from the expiry"
}

func killCase(t *testing.T, im impl) string {
	srv := zktest.Shared(t)
	proxy := srv.Proxy(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, _, got := queued(t, im, ctx, ctx, srv.Addr(), path, proxy.Addr(), srv.Addr())
	proxy.Partition() // nothing gets through again: the process is gone
	proxy.DropAll()   // its connection closed, as the kernel closes a killed process's sockets
	start := time.Now()
	return within(got, start, 30*time.Second) + fmt.Sprintf(" (session timeout %s)", session)
}

func termCase(t *testing.T, im impl) string {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bctx, term := context.WithCancel(ctx)
	a, b, got := queued(t, im, ctx, bctx, srv.Addr(), path, srv.Addr(), srv.Addr())
	term()
	start := time.Now()
	var call string
	if _, ok := b.(*zkLock); ok {
		call = "Lock cannot be interrupted: it returns when the lock is granted"
	} else {
		select {
		case err := <-got:
			call = fmt.Sprintf("Lock returned %s after the cancel", round(time.Since(start)))
			if !errors.Is(err, context.Canceled) {
				call += fmt.Sprintf(" (%v)", short(err))
			}
		case <-time.After(10 * time.Second):
			call = "Lock still waiting after 10s"
		}
	}
	time.Sleep(time.Second)
	nodes := "its node left the queue"
	if children(t, srv.Addr(), path) > 1 {
		nodes = "its node is still queued 1s later (it would be granted the lock)"
	}
	_ = a.unlock()
	return call + "; " + nodes
}

// TestCompareWithZkLock runs every fault for zk.Lock and for the mutex and
// prints the table of docs/migrating.md.
func TestCompareWithZkLock(t *testing.T) {
	if os.Getenv("MIGRATE_COMPARE") == "" {
		t.Skip("set MIGRATE_COMPARE=1 to run the comparison (about two minutes)")
	}
	var b strings.Builder
	b.WriteString("| fault | what is measured | go-zookeeper `zk.Lock` | `mutex.Mutex` |\n|---|---|---|---|\n")
	for _, sc := range scenarios {
		cells := make([]string, len(impls))
		for i, im := range impls {
			t.Run(sc.name+"/"+im.name, func(t *testing.T) {
				cells[i] = sc.run(t, im)
				t.Logf("%s, %s: %s", sc.name, im.name, cells[i])
			})
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", sc.name, sc.what, cells[0], cells[1])
	}
	t.Logf("comparison (session timeout %s):\n%s", session, b.String())
	if f := os.Getenv("MIGRATE_TABLE"); f != "" {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
