package recipe

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe/internal/transport"
	"github.com/zkrecipes/zkrecipes/retry"
)

// fakeZK is a scripted stand-in for ZooKeeper behind the engine's seam
// (zkSeam): an in-memory tree with sessions, sequential and ephemeral
// nodes, containers, data watches and a clock that moves only when told.
// A script sees every request before it is applied and may fail it, lose
// its reply, or act as another client (delete a node, expire the session).
type fakeZK struct {
	c *Client

	mu       sync.Mutex
	script   func(f *fakeZK, r *fakeCall) // nil: every request succeeds
	session  int64
	zxid     int64
	clock    time.Duration
	closed   bool
	nodes    map[string]*fakeNode
	watches  map[string][]chan zk.Event // data watches, by path
	zxids    map[string]int64           // create zxids the "wire tap" saw, by path
	noZxid   bool                       // the tap sees no zxid
	mute     bool                       // replies prove nothing: the client hears a silence
	written  map[string]chan struct{}   // createWritten's channels, by path
	behind   chan struct{}              // closed by the next listing: reads sent behind a create
	requests map[string]int             // requests sent, by op
	calls    map[string]int             // requests sent, by op and path
}

type fakeNode struct {
	data  []byte
	czxid int64
	owner int64 // ephemeral owner, 0 for a persistent node
	cver  int32 // sequence of the next sequential child
}

// fakeCall is one request as the script sees it, before it is applied.
type fakeCall struct {
	op   string // "create", "multi", "children", "get", "getW", "existsW", "set", "delete", "container"
	path string // the first path of a multi
	n    int    // 1 for the first request with this op, 2 for the next...
	np   int    // the same, counting only requests for this path

	fail  error  // reply with this error, without applying the request
	lose  bool   // apply the request, then reply with a connection loss
	after func() // runs once the request is applied, before the reply
}

func newFakeZK() *fakeZK {
	f := &fakeZK{
		session: 0x100, clock: time.Second,
		nodes:    map[string]*fakeNode{"/": {}},
		watches:  map[string][]chan zk.Event{},
		zxids:    map[string]int64{},
		written:  map[string]chan struct{}{},
		requests: map[string]int{},
		calls:    map[string]int{},
	}
	return f
}

// fakeClient returns a client on f, in f's first session, with a fast
// retry schedule and its watchdog running on f's clock.
func fakeClient(t testing.TB, f *fakeZK, opts ...Option) *Client {
	t.Helper()
	cfg := defaultConfig()
	cfg.sessionTimeout = 400 * time.Millisecond
	cfg.retry = retry.Forever(time.Millisecond)
	cfg.cleanupGrace = time.Second
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c := newClient(cfg)
	c.zk, f.c = f, c
	c.sessionEvent(zk.StateHasSession, f.SessionID(), "fake")
	c.goroutine(c.watchdog)
	t.Cleanup(func() { c.Close() })
	return c
}

// request lets the script see r; it reports whether to apply it.
func (f *fakeZK) request(r *fakeCall) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return zk.ErrClosing
	}
	f.requests[r.op]++
	f.calls[r.op+" "+r.path]++
	r.n, r.np = f.requests[r.op], f.calls[r.op+" "+r.path]
	script := f.script
	f.mu.Unlock()
	if script != nil {
		script(f, r)
	}
	return r.fail
}

// setScript has script see every request from now on (nil: none).
func (f *fakeZK) setScript(script func(f *fakeZK, r *fakeCall)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = script
}

// reply ends a request: the script's after runs, the server is heard
// from, and a lost reply turns into a connection loss.
func (f *fakeZK) reply(r *fakeCall, err error) error {
	if r.after != nil {
		r.after()
	}
	f.mu.Lock()
	now, mute := f.clock, f.mute
	f.mu.Unlock()
	if f.c != nil && !mute {
		f.c.heardAt(int64(now))
	}
	if r.lose {
		return zk.ErrConnectionClosed
	}
	return err
}

func (f *fakeZK) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[op]
}

// requestCounts is the requests sent, "op=n" by op.
func (f *fakeZK) requestCounts() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(f.requests)) {
		parts = append(parts, fmt.Sprintf("%s=%d", op, f.requests[op]))
	}
	return strings.Join(parts, " ")
}

// --- the tree, under mu -----------------------------------------------------

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func (f *fakeZK) childrenLocked(dir string) []string {
	var out []string
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	for p := range f.nodes {
		if p != "/" && parentPath(p) == dir {
			out = append(out, strings.TrimPrefix(p, prefix))
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeZK) stat(n *fakeNode) *zk.Stat {
	return &zk.Stat{Czxid: n.czxid, EphemeralOwner: n.owner}
}

func (f *fakeZK) fireLocked(path string, t zk.EventType, err error) {
	if len(f.watches[path]) > 0 && f.c != nil {
		// As go-zookeeper does: the event callback first, then the
		// channels.
		f.c.watches.route(zk.Event{Type: t, Path: path, Err: err})
	}
	for _, ch := range f.watches[path] {
		ch <- zk.Event{Type: t, Path: path, Err: err}
	}
	delete(f.watches, path)
}

func (f *fakeZK) watchLocked(path string) <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	f.watches[path] = append(f.watches[path], ch)
	return ch
}

func (f *fakeZK) createLocked(path string, data []byte, flags int32, owner int64) (string, error) {
	parent, ok := f.nodes[parentPath(path)]
	if !ok {
		return "", zk.ErrNoNode
	}
	if flags&zk.FlagSequence != 0 {
		path += fmt.Sprintf("%010d", parent.cver)
	}
	if _, ok := f.nodes[path]; ok {
		return "", zk.ErrNodeExists
	}
	parent.cver++
	f.zxid++
	n := &fakeNode{data: append([]byte(nil), data...), czxid: f.zxid}
	if flags&zk.FlagEphemeral != 0 {
		n.owner = owner
	}
	f.nodes[path] = n
	if !f.noZxid {
		f.zxids[path] = f.zxid
	}
	return path, nil
}

func (f *fakeZK) deleteLocked(path string) error {
	if _, ok := f.nodes[path]; !ok {
		return zk.ErrNoNode
	}
	if len(f.childrenLocked(path)) > 0 {
		return zk.ErrNotEmpty
	}
	delete(f.nodes, path)
	f.fireLocked(path, zk.EventNodeDeleted, nil)
	return nil
}

// --- what a script or a test does, as ZooKeeper or as another client --------

// put creates a node as another client (session owner, 0: persistent).
func (f *fakeZK) put(path string, owner int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	flags := int32(0)
	if owner != 0 {
		flags = zk.FlagEphemeral
	}
	if strings.HasSuffix(path, "-") {
		flags |= zk.FlagSequence
	}
	p, err := f.createLocked(path, nil, flags, owner)
	if err != nil {
		panic(err)
	}
	return p
}

// remove deletes a node as another client.
func (f *fakeZK) remove(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.deleteLocked(path)
}

// otherSession owns the nodes of other clients; the client's sessions are
// numbered from 0x100 up.
const otherSession = 0x99

// owned lists the nodes under dir that the client's sessions own.
func (f *fakeZK) owned(dir string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.childrenLocked(dir) {
		if f.nodes[join(dir, n)].owner >= 0x100 {
			out = append(out, n)
		}
	}
	return out
}

// expire expires the session, as the server does: its ephemeral nodes go,
// its watches end with ErrSessionExpired, and the client learns of the
// expiry, then gets a new session.
func (f *fakeZK) expire() {
	f.mu.Lock()
	old := f.session
	for p, n := range f.nodes {
		if n.owner == old {
			delete(f.nodes, p)
		}
	}
	for p := range f.watches {
		f.fireLocked(p, zk.EventNotWatching, zk.ErrSessionExpired)
	}
	f.session++
	sid := f.session
	f.mu.Unlock()
	f.c.sessionEvent(zk.StateExpired, 0, "fake")
	f.c.sessionEvent(zk.StateHasSession, sid, "fake")
}

// newSession gives the client a new session while the old one's nodes
// still stand (the server has not expired it yet).
func (f *fakeZK) newSession() {
	f.mu.Lock()
	f.session++
	sid := f.session
	f.mu.Unlock()
	f.c.sessionEvent(zk.StateHasSession, sid, "fake")
}

// silence moves the clock past the loss timeout with nothing heard, waits
// until the client has stopped trusting the session, then lets the server
// answer again (a ping) on the same session.
func (f *fakeZK) silence() {
	f.mu.Lock()
	f.mute = true
	f.mu.Unlock()
	f.advance(f.c.lossTimeout() + time.Millisecond)
	for f.c.currentEpoch() != nil {
		time.Sleep(time.Millisecond)
	}
	f.mu.Lock()
	f.mute = false
	f.mu.Unlock()
	f.c.heardAt(int64(f.Now()))
}

func (f *fakeZK) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock += d
}

// --- zkSeam ----------------------------------------------------------------

func (f *fakeZK) Children(path string) ([]string, *zk.Stat, error) {
	r := &fakeCall{op: "children", path: path}
	f.mu.Lock()
	if f.behind != nil {
		close(f.behind)
		f.behind = nil
	}
	f.mu.Unlock()
	if err := f.request(r); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	_, ok := f.nodes[path]
	names := f.childrenLocked(path)
	f.mu.Unlock()
	if !ok {
		return nil, nil, f.reply(r, zk.ErrNoNode)
	}
	return names, &zk.Stat{}, f.reply(r, nil)
}

func (f *fakeZK) ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	names, st, err := f.Children(path)
	return names, st, make(chan zk.Event, 1), err
}

func (f *fakeZK) get(op, path string, watch bool) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	r := &fakeCall{op: op, path: path}
	if err := f.request(r); err != nil {
		return nil, nil, nil, err
	}
	f.mu.Lock()
	n, ok := f.nodes[path]
	var data []byte
	var st *zk.Stat
	var ch <-chan zk.Event
	if ok {
		data, st = append([]byte(nil), n.data...), f.stat(n)
		if watch {
			ch = f.watchLocked(path)
		}
	}
	f.mu.Unlock()
	if !ok {
		return nil, nil, nil, f.reply(r, zk.ErrNoNode)
	}
	return data, st, ch, f.reply(r, nil)
}

func (f *fakeZK) Get(path string) ([]byte, *zk.Stat, error) {
	data, st, _, err := f.get("get", path, false)
	return data, st, err
}

func (f *fakeZK) GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	return f.get("getW", path, true)
}

func (f *fakeZK) ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	_, st, ch, err := f.get("existsW", path, true)
	if err == zk.ErrNoNode {
		return false, nil, make(chan zk.Event, 1), nil
	}
	return err == nil, st, ch, err
}

func (f *fakeZK) Set(path string, data []byte, version int32) (*zk.Stat, error) {
	r := &fakeCall{op: "set", path: path}
	if err := f.request(r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	n, ok := f.nodes[path]
	if ok {
		n.data = append([]byte(nil), data...)
		f.fireLocked(path, zk.EventNodeDataChanged, nil)
	}
	f.mu.Unlock()
	if !ok {
		return nil, f.reply(r, zk.ErrNoNode)
	}
	return &zk.Stat{}, f.reply(r, nil)
}

func (f *fakeZK) Delete(path string, version int32) error {
	r := &fakeCall{op: "delete", path: path}
	if err := f.request(r); err != nil {
		return err
	}
	f.mu.Lock()
	err := f.deleteLocked(path)
	f.mu.Unlock()
	return f.reply(r, err)
}

func (f *fakeZK) Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	r := &fakeCall{op: "create", path: path}
	if err := f.request(r); err != nil {
		return "", err
	}
	f.mu.Lock()
	out, err := f.createLocked(path, data, flags, f.session)
	written := f.written[path]
	delete(f.written, path)
	f.mu.Unlock()
	if written != nil && err == nil && !r.lose {
		// The request is on the wire: reads sent now follow it, and
		// are sent before its reply comes (a round trip is longer than
		// the engine takes to send them). With a lost reply, the
		// connection dropped right after the create was written:
		// nothing sent behind it reaches the server.
		behind := make(chan struct{})
		f.mu.Lock()
		f.behind = behind
		f.mu.Unlock()
		close(written)
		select {
		case <-behind:
		case <-time.After(100 * time.Millisecond): // the acquire's ctx ended
		}
	}
	if err != nil {
		return "", f.reply(r, err)
	}
	return out, f.reply(r, nil)
}

func (f *fakeZK) CreateContainer(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	r := &fakeCall{op: "container", path: path}
	if err := f.request(r); err != nil {
		return "", err
	}
	f.mu.Lock()
	out, err := f.createLocked(path, data, 0, 0)
	f.mu.Unlock()
	return out, f.reply(r, err)
}

func (f *fakeZK) Multi(ops ...any) ([]zk.MultiResponse, error) {
	r := &fakeCall{op: "multi", path: ops[0].(*zk.CreateRequest).Path}
	if err := f.request(r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	res := make([]zk.MultiResponse, len(ops))
	var err error
	var made []string
	for i, op := range ops {
		cr := op.(*zk.CreateRequest)
		res[i].String, err = f.createLocked(cr.Path, cr.Data, cr.Flags, f.session)
		if err != nil {
			break
		}
		made = append(made, res[i].String)
	}
	if err != nil { // all or none
		for _, p := range made {
			delete(f.nodes, p)
		}
		for i := range res {
			res[i] = zk.MultiResponse{Error: err}
		}
	}
	f.mu.Unlock()
	return res, f.reply(r, err)
}

func (f *fakeZK) AddAuth(scheme string, auth []byte) error { return nil }

func (f *fakeZK) SessionID() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session
}

func (f *fakeZK) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func (f *fakeZK) CreateZxid(path string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	zxid, ok := f.zxids[path]
	delete(f.zxids, path)
	return zxid, ok
}

// CreateThenRead runs production's create with reads behind it
// (transport.CreateThenRead) over the fake's requests: the fake tells when
// the create is written (createWritten).
func (f *fakeZK) CreateThenRead(path string, data []byte, flags int32, acl []zk.ACL, dir string, readDir bool) (transport.Created, error) {
	return transport.CreateThenRead(f, f.createWritten, nil, path, data, flags, acl, dir, readDir)
}

// SessionTimeout is the client's: the fake grants what it asks for.
func (f *fakeZK) SessionTimeout() time.Duration { return f.c.cfg.sessionTimeout }

func (f *fakeZK) createWritten(path string) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.written[path] = ch
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.written[path] == ch {
			delete(f.written, path)
		}
	}
}

func (f *fakeZK) Now() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}
