package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// python is Debian's interpreter, which sees Debian's python3-kazoo. The
// python3 first on PATH may be another installation (pyenv's, say) that
// does not.
const python = "/usr/bin/python3"

// kazooHint tells how to get kazoo.
const kazooHint = "run `make test` (its interop-install step runs `scripts/zk.sh install --curator --kazoo`, " +
	"which installs Debian's python3-kazoo)"

// twoWay is what kazoo's Lock needs to see our mutex's nodes:
// client.Lock(path, identifier, extra_lock_patterns=["-lock-"]).
var twoWay = []string{"-lock-"}

// needKazoo skips the test when python cannot import kazoo, or fails it
// when ZKTEST_REQUIRED asks for every test to run.
func needKazoo(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("interop: the kazoo interoperability tests need ZooKeeper and python3-kazoo; skipped under -short")
	}
	cmd := exec.Command(python, "-c", "import kazoo")
	cmd.Env = pythonEnv()
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	why := err.Error()
	if out = bytes.TrimSpace(out); len(out) > 0 {
		why += ": " + string(out)
	}
	msg := fmt.Sprintf("interop: %s cannot import kazoo (%s): %s", python, why, kazooHint)
	switch strings.ToLower(strings.TrimSpace(os.Getenv(zktest.EnvRequired))) {
	case "", "0", "false", "no":
		t.Skip(msg)
	}
	t.Fatal(msg + " (" + zktest.EnvRequired + " is set: not skipped)")
}

// pythonEnv is the test's environment without the variables that would
// point Debian's python at another installation's modules.
func pythonEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PYTHONHOME=") || strings.HasPrefix(kv, "PYTHONPATH=")
	})
}

// startKazoo starts testdata/kazoo_contender.py with the given id.
func startKazoo(t *testing.T, servers, id, logPath string) (*proc, error) {
	cmd := exec.Command(python, "-u", filepath.Join("testdata", "kazoo_contender.py"), servers, id, logPath)
	cmd.Env = pythonEnv()
	return startProc(t, "kazoo", id, cmd)
}

// kazooContender is one kazoo process holding a kazoo Lock on path, with
// extra_lock_patterns (nil: kazoo's own names only).
type kazooContender struct {
	p        *proc
	path     string
	patterns []string
}

func (k kazooContender) name() string { return k.p.id }

func (k kazooContender) hold(ctx context.Context) error {
	return k.p.call(ctx, "held", append([]string{"hold", k.path}, k.patterns...)...)
}

// try is Lock.acquire(blocking=False); want is "held" or "busy".
func (k kazooContender) try(ctx context.Context, want string) error {
	return k.p.call(ctx, want, append([]string{"try", k.path}, k.patterns...)...)
}

func (k kazooContender) release(ctx context.Context) error {
	return k.p.call(ctx, "released", "release")
}

func (k kazooContender) loop(ctx context.Context, n int, pause time.Duration) error {
	args := append([]string{"loop", k.path, strconv.Itoa(n), strconv.FormatInt(pause.Milliseconds(), 10)}, k.patterns...)
	return k.p.call(ctx, "looped", args...)
}

// kazooEnv is env with kazoo processes in place of Java ones.
type kazooEnv struct {
	*env
	kazoo []*proc
	raw   *zk.Conn
}

func (e *kazooEnv) kazooC(i int, path string, patterns []string) kazooContender {
	return kazooContender{p: e.kazoo[i], path: path, patterns: patterns}
}

// TestKazoo runs kazoo's Lock (Debian's python3-kazoo, driven by
// testdata/kazoo_contender.py) and our mutex on the same paths, and checks
// that our recipes refuse kazoo's read lock and election nodes.
func TestKazoo(t *testing.T) {
	needKazoo(t)
	srv := zktest.Shared(t)
	e := &kazooEnv{env: &env{addr: srv.Addr(), logPath: filepath.Join(t.TempDir(), "holds.log")}}
	f, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e.log = f
	const kazooProcs = 2
	e.kazoo = make([]*proc, kazooProcs)
	errs := make([]error, kazooProcs)
	var wg sync.WaitGroup
	for i := range kazooProcs {
		wg.Go(func() { e.kazoo[i], errs[i] = startKazoo(t, e.addr, fmt.Sprintf("kazoo-%d", i+1), e.logPath) })
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
	e.raw = zktest.Connect(t, e.addr)

	t.Run("kazoo-holds", e.kazooHolds)
	t.Run("go-holds/two-way", e.goHoldsTwoWay)
	t.Run("go-holds/one-way", e.goHoldsOneWay)
	t.Run("fifo/kazoo-first", func(t *testing.T) { e.fifo(t, true) })
	t.Run("fifo/go-first", func(t *testing.T) { e.fifo(t, false) })
	t.Run("exclusion", e.exclusion)
	t.Run("refused/read-lock", e.readLockRefused)
	t.Run("refused/unknown-sequential", e.unknownRefused)
	t.Run("refused/election", e.electionRefused)
}

// kazooHolds: while kazoo's Lock holds (without extra_lock_patterns: our
// side needs none), our TryLock finds it locked, Participants lists
// kazoo's node as the holder, and Lock waits until kazoo releases.
func (e *kazooEnv) kazooHolds(t *testing.T) {
	path, participants := e.round(t, kindMutex)
	ctx := locktest.Ctx(t, 60*time.Second)
	kz := e.kazooC(0, path, nil)
	if err := kz.hold(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := mutex.New(e.clients[1], path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, mutex.ErrLocked) || !errors.Is(err, recipe.ErrWouldBlock) {
		t.Fatalf("TryLock while kazoo holds = %v, want mutex.ErrLocked (recipe.ErrWouldBlock)", err)
	}
	g := e.goC(t, 0, kindMutex, path)
	done := make(chan error, 1)
	go func() { done <- g.hold(ctx) }()
	locktest.Queued(t, 2, participants)
	ps, err := participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(ps), []string{"kazoo-1 __lock__ true", "go-1 lock- false"}; !slices.Equal(got, want) {
		t.Errorf("Participants = %q, want %q", got, want)
	}
	select {
	case err := <-done:
		t.Fatalf("Lock returned while kazoo holds: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := kz.release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := g.release(ctx); err != nil {
		t.Fatal(err)
	}
	evs := e.events(t)
	checkExclusion(t, evs)
	if got := enters(evs); !slices.Equal(got, []string{"kazoo-1", "go-1"}) {
		t.Errorf("held in order %v, want kazoo-1, go-1", got)
	}
}

// goHoldsTwoWay: while our mutex holds, kazoo's Lock with
// extra_lock_patterns=["-lock-"] cannot acquire without blocking, and a
// blocking acquire waits until we release.
func (e *kazooEnv) goHoldsTwoWay(t *testing.T) {
	path, participants := e.round(t, kindMutex)
	ctx := locktest.Ctx(t, 60*time.Second)
	g := e.goC(t, 0, kindMutex, path)
	if err := g.hold(ctx); err != nil {
		t.Fatal(err)
	}
	kz := e.kazooC(0, path, twoWay)
	if err := kz.try(ctx, "busy"); err != nil {
		t.Fatalf("kazoo's non-blocking acquire while we hold: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- kz.hold(ctx) }()
	locktest.Queued(t, 2, participants)
	select {
	case err := <-done:
		t.Fatalf("kazoo's acquire returned while we hold: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := g.release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := kz.release(ctx); err != nil {
		t.Fatal(err)
	}
	evs := e.events(t)
	checkExclusion(t, evs)
	if got := enters(evs); !slices.Equal(got, []string{"go-1", "kazoo-1"}) {
		t.Errorf("held in order %v, want go-1, kazoo-1", got)
	}
}

// goHoldsOneWay documents the limit: kazoo's Lock without
// extra_lock_patterns does not see our nodes, and takes the lock while our
// mutex holds. Our side still waits for kazoo's.
func (e *kazooEnv) goHoldsOneWay(t *testing.T) {
	path, _ := e.round(t, kindMutex)
	ctx := locktest.Ctx(t, 60*time.Second)
	g := e.goC(t, 0, kindMutex, path)
	if err := g.hold(ctx); err != nil {
		t.Fatal(err)
	}
	kz := e.kazooC(0, path, nil)
	if err := kz.try(ctx, "held"); err != nil {
		t.Fatalf("kazoo without extra_lock_patterns while we hold: %v (documented as taking the lock)", err)
	}
	t.Log("without extra_lock_patterns, kazoo's Lock took the lock while our mutex held: exclusion is one-way")
	m, err := mutex.New(e.clients[1], path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, mutex.ErrLocked) {
		t.Errorf("our TryLock with both holding = %v, want mutex.ErrLocked", err)
	}
	if err := kz.release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.release(ctx); err != nil {
		t.Fatal(err)
	}
}

// fifo: one contender holds; the others arrive one at a time, the
// languages alternating, each queued before the next comes. Participants
// lists them in arrival order; after the release they hold one by one in
// arrival order, never two at once.
func (e *kazooEnv) fifo(t *testing.T, kazooFirst bool) {
	path, participants := e.round(t, kindMutex)
	ctx := locktest.Ctx(t, 60*time.Second)
	var arrivals []contender
	for i := range len(e.kazoo) {
		k, g := contender(e.kazooC(i, path, twoWay)), contender(e.goC(t, i, kindMutex, path))
		if kazooFirst {
			arrivals = append(arrivals, k, g)
		} else {
			arrivals = append(arrivals, g, k)
		}
	}
	e.queueInOrder(t, ctx, arrivals, participants, func(int, recipe.Participant) {})
}

// exclusion: kazoo's Locks (with extra_lock_patterns) and our mutexes
// loop on one path at once; the log never shows two holds at once.
func (e *kazooEnv) exclusion(t *testing.T) {
	path, _ := e.round(t, kindMutex)
	ctx := locktest.Ctx(t, 90*time.Second)
	const cycles = 20
	var cs []contender
	for i := range len(e.kazoo) {
		cs = append(cs, e.kazooC(i, path, twoWay), e.goC(t, i, kindMutex, path))
	}
	e.loopTogether(t, ctx, cs, cycles, "Python")
}

// readLockRefused: kazoo's ReadLock holds (an "__rlock__" node, which no
// kind of ours can order); every recipe of ours refuses the path.
func (e *kazooEnv) readLockRefused(t *testing.T) {
	ctx := locktest.Ctx(t, 60*time.Second)
	path := zktest.UniquePath(t)
	if err := e.kazoo[0].call(ctx, "held", "rlock", path); err != nil {
		t.Fatal(err)
	}
	nodes := locktest.Children(t, e.raw, path)
	if len(nodes) != 1 || !strings.Contains(nodes[0], "__rlock__") {
		t.Fatalf("kazoo's ReadLock left %v, want one __rlock__ node", nodes)
	}
	checkRefusals(t, e.raw, acquirers(t, e.clients[0], path), path, nodes...)
	if err := e.kazoo[0].call(ctx, "released", "release"); err != nil {
		t.Fatal(err)
	}
}

// unknownRefused: a sequential node of a name no library here writes is
// refused like kazoo's read lock.
func (e *kazooEnv) unknownRefused(t *testing.T) {
	path := zktest.UniquePath(t)
	conn := zktest.Connect(t, e.addr) // its node goes with its session
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if _, err := conn.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
	}
	p, err := conn.Create(path+"/member-", []byte("other"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	checkRefusals(t, e.raw, acquirers(t, e.clients[0], path), path, p[len(path)+1:])
}

// electionRefused: kazoo's Election leads (through a kazoo Lock that
// cannot be given extra patterns); our election refuses the path rather
// than lead next to it.
func (e *kazooEnv) electionRefused(t *testing.T) {
	ctx := locktest.Ctx(t, 60*time.Second)
	path := zktest.UniquePath(t)
	if err := e.kazoo[0].call(ctx, "leading", "elect", path); err != nil {
		t.Fatal(err)
	}
	nodes := locktest.Children(t, e.raw, path)
	if len(nodes) != 1 || !strings.Contains(nodes[0], "__lock__") {
		t.Fatalf("kazoo's Election left %v, want one __lock__ node", nodes)
	}
	el, err := leader.New(e.clients[0], path)
	if err != nil {
		t.Fatal(err)
	}
	checkRefusals(t, e.raw, []acquirer{{"leader", el.Campaign, leader.ErrNotElected},
		{"leader.try", el.TryCampaign, leader.ErrNotElected}}, path, nodes...)
	if err := e.kazoo[0].call(ctx, "released", "release"); err != nil {
		t.Fatal(err)
	}
}

// describe renders participants as "DATA LOCKNAME HOLDER".
func describe(ps []recipe.Participant) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%s %s %v", p.Data, p.LockName, p.Holder)
	}
	return out
}
