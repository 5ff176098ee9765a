package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// leaders records who leads a singleton: never two at once.
type leaders struct {
	mu         sync.Mutex
	cur        string
	log        []string
	violations int
}

func (l *leaders) enter(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != "" {
		l.violations++
	}
	l.cur = id
	l.log = append(l.log, id)
}

func (l *leaders) exit(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == id {
		l.cur = ""
	}
}

func (l *leaders) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// singleton is one process of a singleton service: stop ends it as a
// rolling deploy does (the process lets go, then its session closes).
type singleton struct {
	id   string
	stop func()
}

// oldSingleton runs the singleton as services on go-zookeeper do: a
// zk.Lock on its own session, held for the life of the process.
func oldSingleton(t *testing.T, addr, path, id string, rec *leaders) *singleton {
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	lock := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
	go func() {
		defer close(done)
		if err := lock.Lock(); err != nil {
			return // the process stopped while waiting
		}
		rec.enter(id)
		<-quit
		rec.exit(id)
		_ = lock.Unlock()
	}()
	return &singleton{id: id, stop: func() {
		close(quit)
		conn.Close()
		<-done
	}}
}

// newSingleton runs the singleton on leader.Run with the mutex's nodes.
func newSingleton(t *testing.T, addr, path, id string, rec *leaders) *singleton {
	c, err := recipe.Connect(context.Background(), []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	e, err := leader.New(c, path, leader.WithMutexNodes(), leader.WithData([]byte(id)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(term context.Context) error {
			rec.enter(id)
			<-term.Done()
			rec.exit(id)
			return nil
		})
	}()
	return &singleton{id: id, stop: func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Run = %v, want context.Canceled", id, err)
		}
		c.Close()
	}}
}

// A singleton held with go-zookeeper's zk.Lock is replaced in place by
// leader.Run made WithMutexNodes, one process at a time: old and new
// queue on one path, leadership passes in queue order from old to new,
// and never do two lead at once. Without the option the election refuses
// the path (another kind of lock).
func TestZkLockSingletonRollingReplacement(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	raw := zktest.Connect(t, srv.Addr())
	rec := &leaders{}
	queued := func(n int) {
		locktest.Eventually(t, 10*time.Second, "contenders queued", func() bool {
			return len(locktest.Children(t, raw, path)) == n
		})
	}
	leads := func(id string) {
		locktest.Eventually(t, 20*time.Second, id+" leads", func() bool { return rec.current() == id })
	}

	procs := map[string]*singleton{}
	for i, id := range []string{"old-a", "old-b", "old-c"} {
		procs[id] = oldSingleton(t, srv.Addr(), path, id, rec)
		queued(i + 1)
	}
	leads("old-a")

	t.Run("latch nodes refused", func(t *testing.T) {
		e, err := leader.New(zktest.Client(t, srv.Addr()), path)
		if err != nil {
			t.Fatal(err)
		}
		ctx := locktest.Ctx(t, 10*time.Second)
		if err := e.TryCampaign(ctx); !errors.Is(err, recipe.ErrMismatch) {
			t.Fatalf("TryCampaign with latch- nodes on a zk.Lock path = %v, want ErrMismatch", err)
		}
	})

	// Each step starts a new process and stops the oldest one, which leads.
	steps := []struct{ start, stop, next string }{
		{"new-1", "old-a", "old-b"},
		{"new-2", "old-b", "old-c"},
		{"new-3", "old-c", "new-1"},
		{"", "new-1", "new-2"},
		{"", "new-2", "new-3"},
	}
	for _, st := range steps {
		if st.start != "" {
			procs[st.start] = newSingleton(t, srv.Addr(), path, st.start, rec)
			queued(len(procs))
		}
		procs[st.stop].stop()
		delete(procs, st.stop)
		leads(st.next)
	}
	procs["new-3"].stop()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.violations != 0 {
		t.Fatalf("%d times two singletons led at once (terms %v)", rec.violations, rec.log)
	}
	want := []string{"old-a", "old-b", "old-c", "new-1", "new-2", "new-3"}
	if len(rec.log) != len(want) {
		t.Fatalf("terms %v, want %v", rec.log, want)
	}
	for i := range want {
		if rec.log[i] != want[i] {
			t.Fatalf("terms %v, want %v", rec.log, want)
		}
	}
}
