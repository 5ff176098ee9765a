package simzk_test

// Agreement tests: the same scripted sequences of requests run on the
// model (inside a synctest bubble) and on a real ZooKeeper server (through
// go-zookeeper and zktest's fault proxy), and their transcripts must be
// equal. A transcript is normalized so that both servers can be compared:
// paths are relative to the script's directory, zxids relative to the
// directory's czxid, sessions named by client and incarnation (A1, A2,
// ...), and each client's events (its event callback's, go-zookeeper's
// and the model's) listed in order, with the EventNotWatching events of
// one invalidation sorted (go-zookeeper sends them in map order).

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/recipe/internal/jute"
	"github.com/zkrecipes/zkrecipes/recipe/internal/simzk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// conn is what a script calls: go-zookeeper's client, on both sides.
type conn interface {
	Children(path string) ([]string, *zk.Stat, error)
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	Get(path string) ([]byte, *zk.Stat, error)
	GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error)
	ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error)
	Set(path string, data []byte, version int32) (*zk.Stat, error)
	Delete(path string, version int32) error
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	CreateContainer(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	Multi(ops ...any) ([]zk.MultiResponse, error)
	SessionID() int64
	Close()
}

var _ conn = (*zk.Conn)(nil)

// faults are the faults a script can inject, on either side.
type faults interface {
	expire(i int)         // the server expires client i's session
	drop(i int)           // client i's connection breaks
	loseNextCreate(i int) // the reply to client i's next create is lost
	dropNextCreate(i int) // client i's next create never reaches the server
	close(i int)          // client i closes, and has sent its last event
	settle()              // the server's container manager has had a turn
}

// recorder keeps a client's events.
type recorder struct {
	mu  sync.Mutex
	evs []zk.Event
}

func (r *recorder) add(ev zk.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) events() []zk.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// env runs a script on one side.
type env struct {
	t       testing.TB
	root    string
	conns   []conn
	recs    []*recorder
	seen    []int // per client: events looked at by awaitState
	labels  map[int64]string
	nsess   []int
	zx0     int64
	out     []string
	watches map[string]<-chan zk.Event
	f       faults
	wait    time.Duration
	cut     map[int]int // per client closed by the script: its events before the close
}

var acl = zk.WorldACL(zk.PermAll)

func newEnv(t testing.TB, root string, f faults) *env {
	return &env{t: t, root: root, labels: map[int64]string{}, watches: map[string]<-chan zk.Event{}, f: f, wait: 20 * time.Second}
}

// add adds client i (the next), which has a session.
func (e *env) add(c conn, r *recorder) {
	e.conns = append(e.conns, c)
	e.recs = append(e.recs, r)
	e.seen = append(e.seen, 0)
	e.nsess = append(e.nsess, 0)
	e.awaitState(len(e.conns)-1, zk.StateHasSession)
}

func (e *env) name(i int) string { return string(rune('A' + i)) }

func (e *env) log(i int, format string, args ...any) {
	e.out = append(e.out, e.name(i)+" "+fmt.Sprintf(format, args...))
}

func (e *env) p(rel string) string { return e.root + rel }

func (e *env) rel(p string) string {
	if p == e.root {
		return "."
	}
	return strings.TrimPrefix(p, e.root)
}

func (e *env) label(id int64) string {
	if id == 0 {
		return "0"
	}
	if l, ok := e.labels[id]; ok {
		return l
	}
	return "?"
}

func (e *env) stat(s *zk.Stat) string {
	if s == nil {
		return "nil"
	}
	if *s == (zk.Stat{}) {
		return "zero"
	}
	return fmt.Sprintf("{cz%+d mz%+d pz%+d v%d cv%d nc%d len%d owner=%s}",
		s.Czxid-e.zx0, s.Mzxid-e.zx0, s.Pzxid-e.zx0, s.Version, s.Cversion, s.NumChildren, s.DataLength, e.label(s.EphemeralOwner))
}

func errs(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func (e *env) event(ev zk.Event) string {
	s := fmt.Sprintf("%v %v", ev.Type, ev.State)
	if ev.Path != "" {
		s += " " + e.rel(ev.Path)
	}
	if ev.Err != nil {
		s += " (" + ev.Err.Error() + ")"
	}
	return s
}

// awaitState waits for client i's next session event with the state, and
// names the session when it is StateHasSession.
func (e *env) awaitState(i int, st zk.State) {
	deadline := time.Now().Add(e.wait)
	for {
		evs := e.recs[i].events()
		for j := e.seen[i]; j < len(evs); j++ {
			if evs[j].Type == zk.EventSession && evs[j].State == st {
				e.seen[i] = j + 1
				if id := e.conns[i].SessionID(); st == zk.StateHasSession && e.labels[id] == "" {
					e.nsess[i]++
					e.labels[id] = fmt.Sprintf("%s%d", e.name(i), e.nsess[i])
				}
				return
			}
		}
		if time.Now().After(deadline) {
			e.log(i, "timeout waiting for %v", st)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The steps: each does one request and logs it with its result.

func (e *env) begin() {
	p, err := e.conns[0].Create(e.root, nil, 0, acl)
	_, st, _, _ := e.conns[0].ExistsW(e.root)
	if st != nil {
		e.zx0 = st.Czxid
	}
	e.log(0, "create %s: %s %s", e.rel(e.root), e.rel(p), errs(err))
	// The ExistsW left a watch on the root: fire and forget it.
	e.watches["root"] = nil
}

func (e *env) create(i int, rel string, flags int32) {
	p, err := e.conns[i].Create(e.p(rel), []byte(rel), flags, acl)
	e.log(i, "create %s %d: %s %s", rel, flags, e.rel(p), errs(err))
}

func (e *env) createRaw(i int, path string, flags int32, a []zk.ACL) {
	p, err := e.conns[i].Create(path, nil, flags, a)
	e.log(i, "create %q %d: %s %s", e.rel(path), flags, e.rel(p), errs(err))
}

func (e *env) createContainer(i int, rel string, flags int32) {
	p, err := e.conns[i].CreateContainer(e.p(rel), nil, flags, acl)
	e.log(i, "createContainer %s %d: %s %s", rel, flags, e.rel(p), errs(err))
}

func (e *env) del(i int, rel string, version int32) {
	err := e.conns[i].Delete(e.p(rel), version)
	e.log(i, "delete %s %d: %s", rel, version, errs(err))
}

func (e *env) set(i int, rel, data string, version int32) {
	st, err := e.conns[i].Set(e.p(rel), []byte(data), version)
	e.log(i, "set %s %q %d: %s %s", rel, data, version, e.stat(st), errs(err))
}

func (e *env) get(i int, rel string) {
	data, st, err := e.conns[i].Get(e.p(rel))
	e.log(i, "get %s: %q %s %s", rel, data, e.stat(st), errs(err))
}

func (e *env) children(i int, rel string) {
	names, st, err := e.conns[i].Children(e.p(rel))
	slices.Sort(names)
	e.log(i, "children %s: %v %s %s", rel, names, e.stat(st), errs(err))
}

func (e *env) exists(i int, rel string) {
	ok, st, ch, err := e.conns[i].ExistsW(e.p(rel))
	_ = ch
	e.log(i, "exists %s: %v %s %s", rel, ok, e.stat(st), errs(err))
}

func (e *env) getW(i int, rel, w string) {
	data, st, ch, err := e.conns[i].GetW(e.p(rel))
	e.watches[w] = ch
	e.log(i, "getW %s [%s]: %q %s %s", rel, w, data, e.stat(st), errs(err))
}

func (e *env) childrenW(i int, rel, w string) {
	names, st, ch, err := e.conns[i].ChildrenW(e.p(rel))
	slices.Sort(names)
	e.watches[w] = ch
	e.log(i, "childrenW %s [%s]: %v %s %s", rel, w, names, e.stat(st), errs(err))
}

func (e *env) existsW(i int, rel, w string) {
	ok, st, ch, err := e.conns[i].ExistsW(e.p(rel))
	e.watches[w] = ch
	e.log(i, "existsW %s [%s]: %v %s %s", rel, w, ok, e.stat(st), errs(err))
}

// sync makes a request of client i: the events of every change made
// before it are then in its watch channels (ZooKeeper's ordering).
func (e *env) sync(i int) {
	_, _, err := e.conns[i].Get(e.root)
	e.log(i, "sync: %s", errs(err))
}

// check logs what watch w has delivered, without waiting.
func (e *env) check(w string) {
	ch := e.watches[w]
	if ch == nil {
		e.out = append(e.out, fmt.Sprintf("  [%s] no watch", w))
		return
	}
	select {
	case ev, ok := <-ch:
		if !ok {
			e.out = append(e.out, fmt.Sprintf("  [%s] closed", w))
			return
		}
		e.out = append(e.out, fmt.Sprintf("  [%s] %s", w, e.event(ev)))
		e.watches[w] = nil
	default:
		e.out = append(e.out, fmt.Sprintf("  [%s] none", w))
	}
}

// await logs what watch w delivers, waiting for it.
func (e *env) await(w string) {
	ch := e.watches[w]
	if ch == nil {
		e.out = append(e.out, fmt.Sprintf("  [%s] no watch", w))
		return
	}
	select {
	case ev := <-ch:
		e.out = append(e.out, fmt.Sprintf("  [%s] %s", w, e.event(ev)))
		e.watches[w] = nil
	case <-time.After(e.wait):
		e.out = append(e.out, fmt.Sprintf("  [%s] timeout", w))
	}
}

func (e *env) multi(i int, ops ...any) {
	res, err := e.conns[i].Multi(ops...)
	var rs []string
	for _, r := range res {
		rs = append(rs, fmt.Sprintf("(%s %s %s)", e.rel(r.String), e.stat(r.Stat), errs(r.Error)))
	}
	e.log(i, "multi: %v %s", rs, errs(err))
}

// awaitGone polls until path is gone (the real server's container manager
// deletes containers on its own schedule), bounded.
func (e *env) awaitGone(i int, rel string) {
	deadline := time.Now().Add(e.wait)
	for {
		_, _, err := e.conns[i].Get(e.p(rel)) // no watch: the model deletes sooner
		if err == zk.ErrNoNode {
			e.log(i, "gone %s", rel)
			return
		}
		if time.Now().After(deadline) {
			e.log(i, "still there %s: %s", rel, errs(err))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) sessionEvents(i int) []string {
	evs := e.recs[i].events()
	if n, ok := e.cut[i]; ok {
		evs = evs[:n]
	}
	var lines []string
	for j := 0; j < len(evs); {
		if evs[j].Type != zk.EventNotWatching {
			lines = append(lines, e.event(evs[j]))
			j++
			continue
		}
		k := j
		var run []string
		for ; k < len(evs) && evs[k].Type == zk.EventNotWatching; k++ {
			run = append(run, e.event(evs[k]))
		}
		slices.Sort(run)
		lines = append(lines, run...)
		j = k
	}
	return lines
}

// close closes client i. Its events from then on are go-zookeeper's own
// shutdown, which depends on whether the server answered the close before
// the connection ended (timing, on a real server), not the server's doing:
// the transcript leaves them out.
func (e *env) close(i int) {
	if e.cut == nil {
		e.cut = map[int]int{}
	}
	e.cut[i] = len(e.recs[i].events())
	e.f.close(i)
}

func (e *env) transcript() []string {
	out := slices.Clone(e.out)
	for i := range e.conns {
		out = append(out, "events "+e.name(i)+":")
		for _, l := range e.sessionEvents(i) {
			out = append(out, "  "+l)
		}
	}
	return out
}

// script is one agreement test: its clients and its steps.
type script struct {
	name    string
	clients int
	run     func(e *env)
}

// The model side.

type modelFaults struct {
	w     *simzk.World
	hosts []*simzk.Host
	conns []*zk.Conn
}

func (f *modelFaults) expire(i int)         { f.w.Expire(f.conns[i].SessionID()) }
func (f *modelFaults) drop(i int)           { f.hosts[i].Drop() }
func (f *modelFaults) loseNextCreate(i int) { f.hosts[i].DieAfterApply(jute.OpCreate) }
func (f *modelFaults) dropNextCreate(i int) { f.hosts[i].DieBeforeRead(jute.OpCreate) }
func (f *modelFaults) close(i int)          { f.conns[i].Close() }
func (f *modelFaults) settle()              {}

func runModel(t *testing.T, s script) []string {
	skipUnpatchedRace(t)
	var out []string
	synctest.Test(t, func(t *testing.T) {
		w := simzk.New(1)
		defer w.Close()
		f := &modelFaults{w: w}
		e := newEnv(t, "/zktest/"+s.name, f)
		for i := range s.clients {
			h := w.NewHost(fmt.Sprint("client", i))
			c, r := dial(h, zktest.DefaultSessionTimeout)
			f.hosts = append(f.hosts, h)
			f.conns = append(f.conns, c)
			e.add(c, r)
		}
		if _, err := e.conns[0].Create("/zktest", nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		s.run(e)
		out = e.transcript()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return out
}

// The real side.

type realFaults struct {
	t       testing.TB
	proxies []*zktest.Proxy
	conns   []*zk.Conn
	gone    []chan struct{}
}

func (f *realFaults) expire(i int) {
	if _, err := f.proxies[i].ExpireSessions(); err != nil {
		f.t.Error(err)
	}
}
func (f *realFaults) drop(i int)           { f.proxies[i].DropAll() }
func (f *realFaults) loseNextCreate(i int) { f.proxies[i].LoseNextReply(zktest.OpCreate) }
func (f *realFaults) dropNextCreate(i int) { f.proxies[i].DropNextRequest(zktest.OpCreate) }
func (f *realFaults) close(i int) {
	f.conns[i].Close()
	select {
	case <-f.gone[i]:
	case <-time.After(10 * time.Second):
		f.t.Errorf("client %d did not shut down", i)
	}
}

// settle waits for the server's container check (every second on
// zktest's servers).
func (f *realFaults) settle() { time.Sleep(1500 * time.Millisecond) }

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func runReal(t *testing.T, s script) []string {
	srv := zktest.Shared(t)
	f := &realFaults{t: t}
	e := newEnv(t, zktest.UniquePath(t), f)
	for range s.clients {
		p := srv.Proxy(t)
		r := &recorder{}
		c, ec, err := zk.Connect([]string{p.Addr()}, zktest.DefaultSessionTimeout,
			zk.WithEventCallback(r.add), zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		gone := make(chan struct{})
		go func() {
			for range ec {
			}
			close(gone)
		}()
		t.Cleanup(func() {
			c.Close()
			<-gone
		})
		f.proxies = append(f.proxies, p)
		f.conns = append(f.conns, c)
		f.gone = append(f.gone, gone)
		e.add(c, r)
	}
	if _, err := e.conns[0].Create("/zktest", nil, 0, acl); err != nil && err != zk.ErrNodeExists {
		t.Fatal(err)
	}
	s.run(e)
	return e.transcript()
}

func TestAgreement(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			model := runModel(t, s)
			real := runReal(t, s)
			if !slices.Equal(model, real) {
				t.Errorf("the model and ZooKeeper disagree:\n%s", diff(model, real))
			}
			if testing.Verbose() {
				t.Logf("transcript:\n%s", strings.Join(real, "\n"))
			}
		})
	}
}

// diff lists both transcripts side by side, marking the lines that
// differ.
func diff(model, real []string) string {
	var b strings.Builder
	for i := range max(len(model), len(real)) {
		var m, r string
		if i < len(model) {
			m = model[i]
		}
		if i < len(real) {
			r = real[i]
		}
		if m == r {
			fmt.Fprintf(&b, "   %s\n", m)
		} else {
			fmt.Fprintf(&b, "-  model: %s\n+  zk:    %s\n", m, r)
		}
	}
	return b.String()
}

var scripts = []script{
	{"sequential", 2, func(e *env) {
		e.begin()
		for range 3 {
			e.create(0, "/n-", zk.FlagEphemeralSequential)
		}
		for range 2 {
			e.create(1, "/n-", zk.FlagEphemeralSequential)
		}
		e.children(1, "")
		e.exists(0, "")
		e.del(0, "/n-0000000001", -1)
		e.create(1, "/n-", zk.FlagEphemeralSequential)
		e.exists(1, "")
		e.del(1, "/n-0000000003", -1)
		e.del(1, "/n-0000000005", -1)
		e.create(0, "/n-", zk.FlagEphemeralSequential)
		e.children(0, "")
		e.exists(1, "")
		e.exists(1, "/n-0000000004")
		e.create(0, "/n-0000000002", 0)
		e.create(0, "/p", 0)
		e.create(0, "/p/q-", zk.FlagSequence)
		e.create(0, "/p/", zk.FlagSequence)
		e.del(0, "/p", 5)
		e.del(0, "/p", -1)
		e.create(0, "/n-0000000000/x", 0)
		e.createRaw(0, e.p("/noacl"), 0, nil)
		e.create(0, "/missing/x", 0)
		e.set(0, "/p", "one", 0)
		e.set(0, "/p", "two", 0)
		e.get(1, "/p")
		e.del(0, "/p/q-0000000000", 1)
		e.del(0, "/p/q-0000000000", 0)
		e.del(0, "/p/0000000001", -1)
		e.children(0, "/p")
		e.del(0, "/p", 1)
		e.create(0, "/s-", zk.FlagSequence)
		e.get(1, "/missing")
		e.set(1, "/missing", "x", -1)
		e.del(1, "/missing", -1)
		e.children(1, "/missing")
		e.createRaw(0, "bad", 0, acl)
		e.createRaw(0, e.p("/x/"), 0, acl)
		e.createRaw(0, e.p("/./x"), 0, acl)
		e.createRaw(0, e.p("/t"), zk.FlagTTL, acl)
		e.createRaw(0, e.p("/t"), 9, acl)
		e.createRaw(0, "/", 0, acl)
		e.exists(0, "")
	}},
	{"watches", 2, func(e *env) {
		e.begin()
		e.create(0, "/x", 0)
		e.create(0, "/d", 0)
		e.getW(1, "/x", "x")
		e.existsW(1, "/x", "x-exists")
		e.existsW(1, "/y", "y")
		e.childrenW(1, "/d", "d")
		e.getW(1, "/none", "none")
		e.childrenW(1, "/none", "none-children")
		e.set(0, "/x", "1", -1)
		e.sync(1)
		e.check("x")
		e.check("x-exists")
		e.check("y")
		e.check("d")
		e.create(0, "/y", 0)
		e.sync(1)
		e.check("y")
		e.check("d")
		e.create(0, "/d/c", 0)
		e.sync(1)
		e.check("d")
		e.set(0, "/x", "2", -1) // no watch left on /x
		e.sync(1)
		e.getW(1, "/x", "x2")
		e.childrenW(1, "/x", "x2-children")
		e.existsW(0, "/x", "x2-A")
		e.del(0, "/x", -1)
		e.sync(1)
		e.check("x2")
		e.check("x2-children")
		e.check("x2-A")
		e.childrenW(1, "/d", "d2")
		e.getW(1, "/d/c", "c")
		e.del(0, "/d/c", -1)
		e.sync(1)
		e.check("d2")
		e.check("c")
		e.childrenW(1, "/d", "d3")
		e.getW(1, "/d", "d3-data")
		e.del(0, "/d", -1)
		e.sync(1)
		e.check("d3")
		e.check("d3-data")
		// A client's own change: its event comes before its reply.
		e.create(1, "/z", 0)
		e.getW(1, "/z", "z")
		e.set(1, "/z", "mine", 0)
		e.check("z")
		e.existsW(1, "/z", "z2")
		e.getW(0, "/z", "z2-A")
		e.set(0, "/z", "theirs", -1)
		e.check("z2-A")
		e.sync(1)
		e.check("z2")
	}},
	{"multi", 2, func(e *env) {
		e.begin()
		e.create(0, "/a", 0)
		e.getW(1, "/a", "a")
		e.childrenW(1, "", "dir")
		e.multi(0,
			&zk.CreateRequest{Path: e.p("/m1"), Acl: acl},
			&zk.CreateRequest{Path: e.p("/a"), Acl: acl},
			&zk.SetDataRequest{Path: e.p("/a"), Data: []byte("no"), Version: -1})
		e.sync(1)
		e.check("a")
		e.check("dir")
		e.exists(0, "/m1")
		e.get(0, "/a")
		e.multi(0,
			&zk.CreateRequest{Path: e.p("/m-"), Acl: acl, Flags: zk.FlagSequence},
			&zk.CreateRequest{Path: e.p("/m-"), Acl: acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: e.p("/a"), Data: []byte("yes"), Version: 0},
			&zk.CheckVersionRequest{Path: e.p("/a"), Version: 1},
			&zk.CreateRequest{Path: e.p("/m-0000000001/c"), Acl: acl})
		e.sync(1)
		e.check("a")
		e.check("dir")
		e.children(1, "")
		e.multi(0, &zk.CheckVersionRequest{Path: e.p("/a"), Version: 5})
		e.multi(0,
			&zk.CreateRequest{Path: e.p("/e"), Acl: acl, Flags: zk.FlagEphemeral},
			&zk.CreateRequest{Path: e.p("/e/x"), Acl: acl})
		e.multi(0, &zk.DeleteRequest{Path: e.p("/nope"), Version: -1})
		e.multi(0,
			&zk.CreateRequest{Path: e.p("/q"), Acl: acl},
			&zk.SetDataRequest{Path: e.p("/q"), Data: []byte("q"), Version: 0},
			&zk.DeleteRequest{Path: e.p("/q"), Version: 1})
		e.exists(0, "/q")
		e.multi(0, &zk.CreateRequest{Path: e.p("/r")})
		e.multi(0)
		e.multi(0, &zk.CreateRequest{Path: e.p("/bad/"), Acl: acl})
		e.multi(0, &zk.CreateRequest{Path: e.p("/f"), Acl: acl, Flags: 9})
		e.multi(0,
			&zk.DeleteRequest{Path: e.p("/a"), Version: -1},
			&zk.CreateRequest{Path: e.p("/a"), Acl: acl},
			&zk.DeleteRequest{Path: e.p("/m-0000000001/c"), Version: 3})
		e.get(0, "/a")
		e.multi(0, &zk.CreateRequest{Path: e.p("/ttl"), Acl: acl, Flags: zk.FlagTTL})
		e.exists(0, "/ttl")
		e.multi(0,
			&zk.SetDataRequest{Path: e.p("/a"), Data: []byte("c"), Version: -1},
			&zk.CreateRequest{Path: e.p("/mc"), Acl: acl, Flags: zk.FlagContainer})
		e.exists(0, "/mc")
		e.get(0, "/a")
		e.exists(0, "")
	}},
	{"expiry", 2, func(e *env) {
		e.begin()
		e.create(0, "/other", 0)
		e.create(0, "/e-", zk.FlagEphemeralSequential)
		e.create(0, "/other/o", zk.FlagEphemeral)
		e.create(1, "/e-", zk.FlagEphemeralSequential)
		e.getW(1, "/e-0000000001", "e1")
		e.childrenW(1, "", "dir")
		e.getW(1, "/e-0000000002", "e2")
		e.getW(0, "/e-0000000002", "mine")
		e.existsW(0, "/later", "later")
		e.f.expire(0)
		e.sync(1)
		e.check("e1")
		e.check("dir")
		e.check("e2")
		e.awaitState(0, zk.StateHasSession)
		e.await("mine")
		e.await("later")
		e.children(1, "")
		e.children(1, "/other")
		e.create(0, "/e-", zk.FlagEphemeralSequential)
		e.exists(1, "/e-0000000003")
		e.exists(1, "/e-0000000001")
		e.f.expire(1)
		e.awaitState(1, zk.StateHasSession)
		e.children(0, "")
	}},
	{"close", 2, func(e *env) {
		e.begin()
		e.create(0, "/c-", zk.FlagEphemeralSequential)
		e.create(0, "/p", 0)
		e.getW(1, "/c-0000000000", "c")
		e.getW(0, "/p", "own")
		e.close(0)
		e.sync(1)
		e.check("c")
		e.children(1, "")
		e.await("own")
		e.create(0, "/after", 0)
	}},
	{"containers", 2, func(e *env) {
		e.begin()
		e.createContainer(0, "/c", zk.FlagContainer)
		e.exists(0, "/c")
		e.createContainer(0, "/never", zk.FlagContainer)
		e.create(0, "/c/x", 0)
		e.getW(1, "/c", "c")
		e.del(0, "/c/x", -1)
		e.awaitGone(0, "/c")
		e.sync(1)
		e.check("c")
		e.create(0, "/flag4", zk.FlagContainer)
		e.create(0, "/flag4/x", 0)
		e.del(0, "/flag4/x", -1)
		e.f.settle()
		e.exists(0, "/never")
		e.exists(0, "/flag4")
		e.createContainer(0, "/bad", 0)
		e.createContainer(0, "/c2", zk.FlagContainer)
		e.create(0, "/c2/e", zk.FlagEphemeral)
		e.createContainer(0, "/c3", zk.FlagContainer)
		e.createContainer(0, "/c3/sub", zk.FlagContainer)
		e.create(0, "/c3/sub/e", zk.FlagEphemeral)
		e.close(0)
		e.awaitGone(1, "/c2")
		e.awaitGone(1, "/c3/sub")
		e.awaitGone(1, "/c3")
		e.exists(1, "")
	}},
	{"reconnect", 2, func(e *env) {
		e.begin()
		e.create(0, "/x", 0)
		e.create(0, "/y", 0)
		e.create(0, "/d", 0)
		e.getW(1, "/x", "x")
		e.getW(1, "/y", "y")
		e.childrenW(1, "/d", "d")
		e.existsW(1, "/n", "n")
		e.create(1, "/b-", zk.FlagEphemeralSequential)
		e.f.drop(1)
		e.awaitState(1, zk.StateDisconnected)
		e.set(0, "/x", "1", -1)
		e.create(0, "/n", 0)
		e.create(0, "/d/k", 0)
		e.awaitState(1, zk.StateHasSession)
		// go-zookeeper sends SetWatches from a goroutine of its own once
		// it has the session: a call made at once may go before it.
		time.Sleep(200 * time.Millisecond)
		e.sync(1)
		e.check("x")
		e.check("y")
		e.check("d")
		e.check("n")
		e.set(0, "/y", "1", -1)
		e.sync(1)
		e.check("y")
		e.children(0, "")
	}},
	{"lost", 1, func(e *env) {
		e.begin()
		e.f.loseNextCreate(0)
		e.create(0, "/l-", zk.FlagEphemeralSequential)
		e.awaitState(0, zk.StateHasSession)
		e.children(0, "")
		e.exists(0, "/l-0000000000")
		e.f.dropNextCreate(0)
		e.create(0, "/l-", zk.FlagEphemeralSequential)
		e.awaitState(0, zk.StateHasSession)
		e.children(0, "")
		e.create(0, "/l-", zk.FlagEphemeralSequential)
		e.exists(0, "")
	}},
}
