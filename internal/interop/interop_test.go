package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// contenders per language.
const perLanguage = 3

// A contender acquires a recipe on a path and appends "enter ID KIND" to
// the shared log once it holds and "exit ID KIND" before it releases.
type contender interface {
	name() string
	hold(ctx context.Context) error
	release(ctx context.Context) error
	// loop holds and releases n times, pausing while it holds.
	loop(ctx context.Context, n int, pause time.Duration) error
}

// javaContender is one Contender process acting on kind at path.
type javaContender struct {
	p          *proc
	kind, path string
}

func (j javaContender) name() string { return j.p.id }

func (j javaContender) hold(ctx context.Context) error {
	return j.p.call(ctx, "held", "hold", j.kind, j.path)
}

func (j javaContender) release(ctx context.Context) error {
	return j.p.call(ctx, "released", "release")
}

func (j javaContender) loop(ctx context.Context, n int, pause time.Duration) error {
	return j.p.call(ctx, "looped", "loop", j.kind, j.path, strconv.Itoa(n), strconv.FormatInt(pause.Milliseconds(), 10))
}

// goContender is one of our recipes' handles.
type goContender struct {
	id, kind   string
	log        *os.File
	lock, free func(context.Context) error // the recipe's acquire and release
}

func (g *goContender) name() string { return g.id }

func (g *goContender) hold(ctx context.Context) error {
	if err := g.lock(ctx); err != nil {
		return fmt.Errorf("%s: %s: %w", g.id, g.kind, err)
	}
	return g.note("enter")
}

func (g *goContender) release(ctx context.Context) error {
	if err := g.note("exit"); err != nil {
		return err
	}
	if err := g.free(ctx); err != nil {
		return fmt.Errorf("%s: %s: %w", g.id, g.kind, err)
	}
	return nil
}

func (g *goContender) loop(ctx context.Context, n int, pause time.Duration) error {
	for range n {
		if err := g.hold(ctx); err != nil {
			return err
		}
		time.Sleep(pause)
		if err := g.release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// note appends one line with one write: the file is opened O_APPEND, as
// the Java side's, so lines from both languages land in the order written.
func (g *goContender) note(what string) error {
	_, err := fmt.Fprintf(g.log, "%s %s %s\n", what, g.id, g.kind)
	return err
}

// kind is one recipe in both languages: the Contender's KIND, and how to
// make our handle for it.
type kind struct {
	java string
	// handle returns our recipe's acquire, release and Participants on
	// path, with data as node data.
	handle func(c *recipe.Client, path string, data []byte) (acquire, release func(context.Context) error, participants func(context.Context) ([]recipe.Participant, error), err error)
}

var (
	kindMutex = kind{java: "mutex", handle: func(c *recipe.Client, path string, data []byte) (a, r func(context.Context) error, ps func(context.Context) ([]recipe.Participant, error), err error) {
		m, err := mutex.New(c, path, mutex.WithData(data))
		if err != nil {
			return nil, nil, nil, err
		}
		return m.Lock, m.Unlock, m.Participants, nil
	}}
	kindWrite = kind{java: "write", handle: func(c *recipe.Client, path string, data []byte) (a, r func(context.Context) error, ps func(context.Context) ([]recipe.Participant, error), err error) {
		rw, err := rwlock.New(c, path, rwlock.WithCuratorNames(), rwlock.WithData(data))
		if err != nil {
			return nil, nil, nil, err
		}
		return rw.Lock, rw.Unlock, rwParticipants(rw), nil
	}}
	kindRead = kind{java: "read", handle: func(c *recipe.Client, path string, data []byte) (a, r func(context.Context) error, ps func(context.Context) ([]recipe.Participant, error), err error) {
		rw, err := rwlock.New(c, path, rwlock.WithCuratorNames(), rwlock.WithData(data))
		if err != nil {
			return nil, nil, nil, err
		}
		return rw.RLock, rw.RUnlock, rwParticipants(rw), nil
	}}
	kindLeader = kind{java: "leader", handle: func(c *recipe.Client, path string, data []byte) (a, r func(context.Context) error, ps func(context.Context) ([]recipe.Participant, error), err error) {
		e, err := leader.New(c, path, leader.WithData(data))
		if err != nil {
			return nil, nil, nil, err
		}
		return e.Campaign, e.Resign, e.Participants, nil
	}}
)

// rwParticipants lists a read/write lock's queue as the engine's
// participants (the mode is in LockName).
func rwParticipants(rw *rwlock.RWLock) func(context.Context) ([]recipe.Participant, error) {
	return func(ctx context.Context) ([]recipe.Participant, error) {
		ps, err := rw.Participants(ctx)
		out := make([]recipe.Participant, len(ps))
		for i, p := range ps {
			out[i] = p.Participant
		}
		return out, err
	}
}

// env is what every case shares: the server, Curator processes, our
// clients and the log of hold intervals.
type env struct {
	addr    string
	java    []*proc
	clients []*recipe.Client // one per Go contender
	watcher *recipe.Client   // for Participants
	logPath string
	log     *os.File
}

// TestCurator runs Curator's recipes and ours on the same paths. It
// compiles the Java contender once and starts its processes once; the
// cases reuse them one after another.
func TestCurator(t *testing.T) {
	if testing.Short() {
		t.Skip("interop: the Curator interoperability tests need ZooKeeper and Java; skipped under -short")
	}
	classPath := compileContender(t)
	srv := zktest.Shared(t)
	e := &env{addr: srv.Addr(), logPath: filepath.Join(t.TempDir(), "holds.log")}
	f, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e.log = f
	// The JVMs start side by side.
	e.java = make([]*proc, perLanguage)
	errs := make([]error, perLanguage)
	var wg sync.WaitGroup
	for i := range perLanguage {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.java[i], errs[i] = startJava(t, classPath, e.addr, fmt.Sprintf("java-%d", i+1), e.logPath)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for range perLanguage {
		e.clients = append(e.clients, locktest.Client(t, []string{e.addr}))
	}
	e.watcher = locktest.Client(t, []string{e.addr})

	for _, k := range []kind{kindMutex, kindWrite, kindLeader} {
		t.Run(k.java, func(t *testing.T) {
			t.Run("fifo/java-first", func(t *testing.T) { e.fifo(t, k, true) })
			t.Run("fifo/go-first", func(t *testing.T) { e.fifo(t, k, false) })
			t.Run("exclusion", func(t *testing.T) { e.exclusion(t, []kind{k}) })
		})
	}
	t.Run("rwlock", func(t *testing.T) {
		t.Run("readers-share/java-first", func(t *testing.T) { e.readersShare(t, true) })
		t.Run("readers-share/go-first", func(t *testing.T) { e.readersShare(t, false) })
		t.Run("exclusion", func(t *testing.T) { e.exclusion(t, []kind{kindRead, kindWrite, kindRead}) })
	})
	t.Run("revocation/curator-revokes-go", e.curatorRevokesGo)
	t.Run("revocation/go-revokes-curator", e.goRevokesCurator)
	t.Run("semaphore-refused", e.curatorSemaphoreRefused)
}

// round starts a case: a fresh path, an empty log, and a watcher's
// Participants on the path.
func (e *env) round(t *testing.T, k kind) (string, func(context.Context) ([]recipe.Participant, error)) {
	t.Helper()
	if err := os.Truncate(e.logPath, 0); err != nil {
		t.Fatal(err)
	}
	path := zktest.UniquePath(t)
	_, _, ps, err := k.handle(e.watcher, path, []byte("watcher"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, no node may be left behind.
		locktest.Eventually(t, 10*time.Second, "an empty queue", func() bool {
			p, err := ps(context.Background())
			return err == nil && len(p) == 0
		})
	})
	return path, ps
}

// goC returns Go contender i (0-based) on path.
func (e *env) goC(t *testing.T, i int, k kind, path string) *goContender {
	t.Helper()
	id := fmt.Sprintf("go-%d", i+1)
	a, r, _, err := k.handle(e.clients[i], path, []byte(id))
	if err != nil {
		t.Fatal(err)
	}
	return &goContender{id: id, kind: k.java, log: e.log, lock: a, free: r}
}

// javaC returns Java contender i (0-based) on path.
func (e *env) javaC(i int, k kind, path string) javaContender {
	return javaContender{p: e.java[i], kind: k.java, path: path}
}

// fifo: one contender holds; the others arrive one at a time, the
// languages alternating, each queued before the next comes. Participants
// lists them all, Curator's nodes included, in arrival order with only the
// first marked as holder. After the release they hold one by one in
// arrival order, never two at once.
func (e *env) fifo(t *testing.T, k kind, javaFirst bool) {
	path, participants := e.round(t, k)
	ctx := locktest.Ctx(t, 60*time.Second)
	var arrivals []contender
	for i := range perLanguage {
		j, g := contender(e.javaC(i, k, path)), contender(e.goC(t, i, k, path))
		if javaFirst {
			arrivals = append(arrivals, j, g)
		} else {
			arrivals = append(arrivals, g, j)
		}
	}
	e.queueInOrder(t, ctx, arrivals, participants, func(i int, p recipe.Participant) {
		if !strings.HasPrefix(p.Node, "_c_") {
			t.Errorf("participant %d: node %q: want a protected node", i, p.Node)
		}
	})
}

// queueInOrder has the first of arrivals hold, queues the others one
// after the other, and checks that participants lists them in arrival
// order, the first as the holder (and each as check says); then it
// releases the first, and checks that the others held one by one in
// arrival order, never two at once.
func (e *env) queueInOrder(t *testing.T, ctx context.Context, arrivals []contender,
	participants func(context.Context) ([]recipe.Participant, error), check func(i int, p recipe.Participant)) {
	t.Helper()
	names := make([]string, len(arrivals))
	for i, c := range arrivals {
		names[i] = c.name()
	}
	if err := arrivals[0].hold(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(arrivals))
	for i, c := range arrivals[1:] {
		go func() { errs <- c.loop(ctx, 1, 2*time.Millisecond) }()
		locktest.Queued(t, i+2, participants)
	}
	ps, err := participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for i, p := range ps {
		data = append(data, string(p.Data))
		if p.Holder != (i == 0) || p.Sequence < 0 {
			t.Errorf("participant %d (%s, %s): Holder = %v, sequence %d", i, p.Data, p.Node, p.Holder, p.Sequence)
		}
		check(i, p)
	}
	if !slices.Equal(data, names) {
		t.Errorf("Participants in order %v, want arrival order %v", data, names)
	}
	if err := arrivals[0].release(ctx); err != nil {
		t.Fatal(err)
	}
	for range arrivals[1:] {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	evs := e.events(t)
	checkExclusion(t, evs)
	if got := enters(evs); !slices.Equal(got, names) {
		t.Errorf("held in order %v, want arrival order %v", got, names)
	}
}

// exclusion: every contender of both languages loops on one path at once,
// with the given kinds in turn; the log never shows a write-class hold
// next to another hold.
func (e *env) exclusion(t *testing.T, kinds []kind) {
	path, _ := e.round(t, kinds[0])
	ctx := locktest.Ctx(t, 60*time.Second)
	const cycles = 20
	var cs []contender
	for i := range perLanguage {
		cs = append(cs, e.javaC(i, kinds[i%len(kinds)], path), e.goC(t, i, kinds[(i+1)%len(kinds)], path))
	}
	e.loopTogether(t, ctx, cs, cycles, "Java")
}

// loopTogether has every contender of cs loop cycles times on one path at
// once, then checks the log: never two holds at once where the kinds
// exclude each other, every hold logged, and the lock passed at least once
// between Go and the other language (named other).
func (e *env) loopTogether(t *testing.T, ctx context.Context, cs []contender, cycles int, other string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			if err := c.loop(ctx, cycles, time.Millisecond); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	evs := e.events(t)
	checkExclusion(t, evs)
	ids := enters(evs)
	if got, want := len(ids), len(cs)*cycles; got != want {
		t.Errorf("%d holds logged, want %d", got, want)
	}
	handoffs := 0
	for i := 1; i < len(ids); i++ {
		if ids[i][:2] != ids[i-1][:2] {
			handoffs++
		}
	}
	if handoffs == 0 {
		t.Errorf("the lock never passed between Go and %s: %v", other, ids)
	}
	t.Logf("%d holds, %d handoffs between the languages", len(ids), handoffs)
}

// readersShare: a reader of one language holds; a reader of the other
// joins it without waiting; writers of both languages queue behind them
// and hold in arrival order once both readers are gone.
func (e *env) readersShare(t *testing.T, javaFirst bool) {
	path, participants := e.round(t, kindRead)
	ctx := locktest.Ctx(t, 60*time.Second)
	readers := []contender{e.javaC(0, kindRead, path), e.goC(t, 0, kindRead, path)}
	writers := []contender{e.goC(t, 1, kindWrite, path), e.javaC(1, kindWrite, path)}
	if !javaFirst {
		slices.Reverse(readers)
		slices.Reverse(writers)
	}
	if err := readers[0].hold(ctx); err != nil {
		t.Fatal(err)
	}
	// The second reader must not wait for the first.
	shortCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := readers[1].hold(shortCtx); err != nil {
		t.Fatalf("second reader while the first holds: %v", err)
	}
	errs := make(chan error, len(writers))
	for i, w := range writers {
		go func() { errs <- w.loop(ctx, 1, 2*time.Millisecond) }()
		locktest.Queued(t, 3+i, participants)
	}
	ps, err := participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{readers[0].name() + " __READ__ true", readers[1].name() + " __READ__ true",
		writers[0].name() + " __WRIT__ false", writers[1].name() + " __WRIT__ false"}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s %s %v", p.Data, p.LockName, p.Holder))
	}
	if !slices.Equal(got, want) {
		t.Errorf("Participants = %q, want %q", got, want)
	}
	for _, r := range readers {
		if err := r.release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	evs := e.events(t)
	checkExclusion(t, evs)
	wantOrder := []string{readers[0].name(), readers[1].name(), writers[0].name(), writers[1].name()}
	if got := enters(evs); !slices.Equal(got, wantOrder) {
		t.Errorf("held in order %v, want %v", got, wantOrder)
	}
	if !evs[1].enter {
		t.Errorf("the second reader did not hold while the first did: %v", evs)
	}
}

// event is one line of the log of hold intervals.
type event struct {
	enter    bool
	id, kind string
}

func (e event) String() string {
	if e.enter {
		return "enter " + e.id + " " + e.kind
	}
	return "exit " + e.id + " " + e.kind
}

// events reads the log.
func (e *env) events(t *testing.T) []event {
	t.Helper()
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var evs []event
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) != 3 || (f[0] != "enter" && f[0] != "exit") {
			t.Fatalf("bad log line %q", line)
		}
		evs = append(evs, event{enter: f[0] == "enter", id: f[1], kind: f[2]})
	}
	return evs
}

// checkExclusion replays the log: a read hold may overlap only read
// holds; any other hold overlaps nothing.
func checkExclusion(t *testing.T, evs []event) {
	t.Helper()
	holding := map[string]string{} // id -> kind
	for i, ev := range evs {
		if !ev.enter {
			if holding[ev.id] != ev.kind {
				t.Fatalf("event %d: %v without a matching enter", i, ev)
			}
			delete(holding, ev.id)
			continue
		}
		for id, k := range holding {
			if ev.kind != "read" || k != "read" {
				t.Fatalf("event %d: %v while %s holds %s: exclusion broken\nlog: %v", i, ev, id, k, evs)
			}
		}
		holding[ev.id] = ev.kind
	}
	if len(holding) > 0 {
		t.Fatalf("holds never ended: %v", holding)
	}
}

// enters returns the ids in the order they entered.
func enters(evs []event) []string {
	var ids []string
	for _, ev := range evs {
		if ev.enter {
			ids = append(ids, ev.id)
		}
	}
	return ids
}
