package recipe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// The phase machine against the scripted fake (fakezk_test.go): no server.

const (
	phaseDir  = "/locks/t"
	phasePred = phaseDir + "/_c_00000000-0000-0000-0000-000000000000-lock-0000000000"
)

// phaseEnv is what a case's script may use.
type phaseEnv struct {
	f      *fakeZK
	cancel context.CancelFunc

	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether this is the first time the script asks for what.
func (e *phaseEnv) first(what string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen[what] {
		return false
	}
	if e.seen == nil {
		e.seen = map[string]bool{}
	}
	e.seen[what] = true
	return true
}

type phaseCase struct {
	name   string
	noDir  bool // the lock directory does not exist yet
	pred   bool // another client holds the lock (phasePred)
	noZxid bool // the wire tap sees no create zxid
	script func(e *phaseEnv, r *fakeCall)

	try     bool
	n       int           // AcquireN(n) when > 1, with an n-lease driver
	timeout time.Duration // the acquire's deadline; default 2s

	wantErr  error  // nil: held
	requests string // the requests sent by the acquire, when set
	check    func(t *testing.T, e *phaseEnv, hs []*Hold)
}

// ours reports whether r concerns one of the client's lock nodes.
func ours(r *fakeCall) bool {
	return strings.HasPrefix(r.path, phaseDir+"/_c_") && !strings.HasPrefix(r.path, phasePred)
}

func isOp(r *fakeCall, op string, n int) bool { return r.op == op && r.n == n }

var phaseCases = []phaseCase{
	{
		name:     "uncontended: one create, the listing behind it",
		requests: "children=1 create=1",
	},
	{
		name: "create applied, reply lost: found again by its UUID",
		script: func(e *phaseEnv, r *fakeCall) {
			r.lose = isOp(r, "create", 1)
		},
		requests: "children=2 create=1 getW=1",
		check:    checkOneNode,
	},
	{
		name: "create not applied: created anew",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "create", 1) {
				r.fail = zk.ErrConnectionClosed
			}
		},
		requests: "children=2 create=2",
		check:    checkOneNode,
	},
	{
		name: "create applied, reply lost, session expired meanwhile: created in the new session",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "create", 1) {
				r.lose, r.after = true, e.f.expire
			}
		},
		requests: "children=2 create=2",
		check:    checkNewSession,
	},
	{
		name: "found again, owned by an earlier session: deleted, created anew",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "create", 1) {
				r.lose, r.after = true, e.f.newSession
			}
		},
		requests: "children=3 create=2 delete=1 getW=1",
		check: func(t *testing.T, e *phaseEnv, hs []*Hold) {
			checkOneNode(t, e, hs)
			checkNewSession(t, e, hs)
		},
	},
	{
		name: "create refused, session expired: created in the new session",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "create", 1) {
				e.f.expire()
				r.fail = zk.ErrSessionExpired
			}
		},
		requests: "children=1 create=2",
		check:    checkNewSession,
	},
	{
		name:     "directory missing: created as containers, parents first",
		noDir:    true,
		requests: "children=1 container=3 create=2",
	},
	{
		name:     "zxid not seen on the wire: our node is read for its token",
		noZxid:   true,
		requests: "children=2 create=1 getW=1",
	},
	{
		name: "create in flight when ctx ends: cleaned up once it lands",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "create", 1) {
				e.cancel()
				r.after = func() { time.Sleep(20 * time.Millisecond) }
			}
		},
		wantErr: context.Canceled,
	},
	{
		name: "ctx ends while verifying after a lost reply",
		script: func(e *phaseEnv, r *fakeCall) {
			r.lose = isOp(r, "create", 1)
			if isOp(r, "children", 1) {
				e.cancel()
			}
		},
		wantErr: context.Canceled,
	},
	{
		name: "ctx ends before deciding",
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "children", 1) {
				r.after = e.cancel
			}
		},
		wantErr: context.Canceled,
	},
	{
		name: "ctx ends while arming",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "getW" && r.path == phasePred {
				e.cancel()
			}
		},
		wantErr: context.Canceled,
	},
	{
		name:     "ctx ends while waiting",
		pred:     true,
		timeout:  30 * time.Millisecond,
		wantErr:  context.DeadlineExceeded,
		requests: "children=1 create=1 delete=1 getW=2",
	},
	{
		name:     "try-acquire finds it held: ErrWouldBlock, node deleted",
		pred:     true,
		try:      true,
		wantErr:  ErrWouldBlock,
		requests: "children=1 create=1 delete=1",
	},
	{
		name: "predecessor deleted while waiting",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "getW" && r.path == phasePred {
				r.after = func() { e.f.remove(phasePred) }
			}
		},
		requests: "children=1 create=1 getW=2",
	},
	{
		name: "predecessor gone before its watch is set: holds without waiting",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "getW" && r.path == phasePred {
				e.f.remove(phasePred)
			}
		},
		requests: "children=1 create=1 getW=2",
	},
	{
		name: "our node deleted while waiting: enqueued anew",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			switch {
			case r.op == "getW" && ours(r) && e.first("own"):
				r.after = func() { e.f.remove(r.path) }
			case r.op == "get" && r.path == phasePred:
				// The new node reads its predecessor without a watch:
				// it joins the one the first node left there.
				r.after = func() { e.f.remove(phasePred) }
			}
		},
		requests: "children=2 create=2 get=1 getW=3",
		check:    checkOneNode,
	},
	{
		name: "session expires while waiting: enqueued in the new session",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "getW" && r.path == phasePred {
				switch r.np {
				case 1:
					r.after = e.f.expire
				case 2:
					r.after = func() { e.f.remove(phasePred) }
				}
			}
		},
		check: func(t *testing.T, e *phaseEnv, hs []*Hold) {
			checkNewSession(t, e, hs)
			if n := e.f.count("create"); n != 2 {
				t.Errorf("%d creates, want 2", n)
			}
		},
	},
	{
		name: "silence past the loss timeout while waiting: kept, in a new epoch of the same session",
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			switch {
			case r.op == "getW" && r.path == phasePred && r.np == 1:
				r.after = e.f.silence
			case r.op == "get" && r.path == phasePred:
				// Verified again in the new epoch, the waiter joins
				// the watch it had set on its predecessor.
				r.after = func() { e.f.remove(phasePred) }
			}
		},
		requests: "children=2 create=1 get=1 getW=2",
		check: func(t *testing.T, e *phaseEnv, hs []*Hold) {
			if n := e.f.count("create"); n != 1 {
				t.Errorf("%d creates, want 1: the node outlives the silence", n)
			}
			if hs[0].ep.session != 0x100 {
				t.Errorf("held in session 0x%x, want the first", hs[0].ep.session)
			}
		},
	},
	{
		name: "our node deleted before the first listing: read, found gone, enqueued anew",
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "children" && e.first("listing") {
				for _, n := range e.f.owned(phaseDir) {
					e.f.remove(join(phaseDir, n))
				}
			}
		},
		requests: "children=3 create=2 getW=1", // the read of our node finds it gone
		check:    checkOneNode,
	},
	{
		name:     "AcquireN: one transaction",
		n:        2,
		requests: "children=1 get=1 multi=1", // one listing and one read verify every node
	},
	{
		name: "AcquireN: transaction applied, reply lost: all found again",
		n:    2,
		script: func(e *phaseEnv, r *fakeCall) {
			r.lose = isOp(r, "multi", 1)
		},
		requests: "children=3 getW=2 multi=1",
	},
	{
		name: "AcquireN: transaction not applied: sent anew",
		n:    2,
		script: func(e *phaseEnv, r *fakeCall) {
			if isOp(r, "multi", 1) {
				r.fail = zk.ErrConnectionClosed
			}
		},
		requests: "children=2 get=1 multi=2",
	},
	{
		name: "AcquireN behind a holder: the last node waits for it",
		n:    2,
		pred: true,
		script: func(e *phaseEnv, r *fakeCall) {
			if r.op == "getW" && r.path == phasePred {
				r.after = func() { e.f.remove(phasePred) }
			}
		},
		requests: "children=1 get=1 getW=3 multi=1", // our nodes together, then the holder and our first
	},
	{
		name:    "AcquireN: ctx ends while waiting: every node cleaned up",
		n:       2,
		pred:    true,
		timeout: 30 * time.Millisecond,
		wantErr: context.DeadlineExceeded,
	},
}

// checkOneNode checks that the directory holds the holds' nodes and no
// other of ours (a duplicate, or a stale node).
func checkOneNode(t *testing.T, e *phaseEnv, hs []*Hold) {
	t.Helper()
	if got := e.f.owned(phaseDir); len(got) != len(hs) {
		t.Errorf("our nodes in the directory: %v, want %d", got, len(hs))
	}
}

// checkNewSession checks that the holds are in the session current now.
func checkNewSession(t *testing.T, e *phaseEnv, hs []*Hold) {
	t.Helper()
	for _, h := range hs {
		if sid := e.f.SessionID(); h.ep.session != sid || sid == 0x100 {
			t.Errorf("held in session 0x%x; the session now is 0x%x, the first 0x100", h.ep.session, sid)
		}
	}
}

func TestPhaseMachine(t *testing.T) {
	start := time.Now()
	for _, tc := range phaseCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runPhaseCase(t, tc)
		})
	}
	t.Cleanup(func() { t.Logf("%d cases in %v", len(phaseCases), time.Since(start)) })
}

func runPhaseCase(t *testing.T, tc phaseCase) {
	f := newFakeZK()
	f.noZxid = tc.noZxid
	if !tc.noDir {
		f.put("/locks", 0)
		f.put(phaseDir, 0)
	}
	if tc.pred {
		f.put(strings.TrimSuffix(phasePred, "0000000000"), otherSession)
	}
	c := fakeClient(t, f)
	d, n := driver.Mutex(), max(tc.n, 1)
	if n > 1 {
		d, _ = driver.Leases(n)
	}
	l, err := NewLock(c, phaseDir, LockSpec{Recipe: "test", LockName: "lock-", Driver: d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := tc.timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e := &phaseEnv{f: f, cancel: cancel}
	if tc.script != nil {
		f.setScript(func(f *fakeZK, r *fakeCall) { tc.script(e, r) })
	}
	hs, err := phaseAcquire(ctx, l, tc.try, n)
	f.setScript(nil)
	if got := f.requestCounts(); tc.requests != "" && got != tc.requests {
		t.Errorf("requests %s, want %s", got, tc.requests)
	}
	switch {
	case tc.wantErr == nil && err != nil:
		t.Fatalf("acquire: %v", err)
	case tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !errors.Is(err, ErrNotAcquired)):
		t.Fatalf("acquire: %v, want %v and %v", err, ErrNotAcquired, tc.wantErr)
	}
	if len(hs) != 0 && len(hs) != n {
		t.Fatalf("%d holds, want %d", len(hs), n)
	}
	for _, h := range hs {
		if h.Token() == 0 {
			t.Errorf("hold of %s has no token", h.Node())
		}
	}
	if tc.check != nil {
		tc.check(t, e, hs)
	}
	for _, h := range hs {
		if err := h.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	}
	awaitNoneOwned(t, f)
}

func phaseAcquire(ctx context.Context, l *Lock, try bool, n int) ([]*Hold, error) {
	switch {
	case n > 1:
		return l.AcquireN(ctx, n)
	case try:
		h, err := l.TryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		return []*Hold{h}, nil
	}
	h, err := l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return []*Hold{h}, nil
}

// awaitNoneOwned waits until none of the client's nodes is left in the
// directory: released, or cleaned up after a failed acquire.
func awaitNoneOwned(t *testing.T, f *fakeZK) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for len(f.owned(phaseDir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nodes left behind: %v", f.owned(phaseDir))
		}
		time.Sleep(time.Millisecond)
	}
}
