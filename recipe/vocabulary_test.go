package recipe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// handle is one recipe seen through the shared vocabulary: its blocking
// and try acquire, its release, and what it holds.
type handle struct {
	acquire, try, release func(context.Context) error
	err                   func() error
	node                  func() string
	participants          func(context.Context) ([]recipe.Participant, error)
	sentinels             []error // the recipe's own: not acquired, would block, not held
}

// kinds builds a handle of each recipe (both sides of the read/write lock)
// on a client and path.
var kinds = map[string]func(t *testing.T, c *recipe.Client, path string) handle{
	"mutex": func(t *testing.T, c *recipe.Client, path string) handle {
		m, err := mutex.New(c, path)
		must(t, err)
		return handle{m.Lock, m.TryLock, m.Unlock, m.Err, m.Node, m.Participants,
			[]error{mutex.ErrNotAcquired, mutex.ErrLocked, mutex.ErrNotHeld}}
	},
	"rwlock.write": func(t *testing.T, c *recipe.Client, path string) handle {
		rw, err := rwlock.New(c, path)
		must(t, err)
		return handle{rw.Lock, rw.TryLock, rw.Unlock, rw.Err, rw.Node, rwParticipants(rw),
			[]error{rwlock.ErrNotAcquired, rwlock.ErrLocked, rwlock.ErrNotHeld}}
	},
	"rwlock.read": func(t *testing.T, c *recipe.Client, path string) handle {
		rw, err := rwlock.New(c, path)
		must(t, err)
		return handle{rw.RLock, rw.TryRLock, rw.RUnlock, rw.Reader().Err, rw.Reader().Node, rwParticipants(rw),
			[]error{rwlock.ErrNotAcquired, rwlock.ErrLocked, rwlock.ErrNotHeld}}
	},
	"semaphore": func(t *testing.T, c *recipe.Client, path string) handle {
		s, err := semaphore.New(c, path, 1)
		must(t, err)
		var lease *semaphore.Lease
		acquire := func(try bool) func(context.Context) error {
			return func(ctx context.Context) error {
				take := s.Acquire
				if try {
					take = s.TryAcquire
				}
				got, err := take(ctx)
				if err == nil {
					lease = got
				}
				return err
			}
		}
		release := func(ctx context.Context) error {
			if lease == nil {
				// A lease that was never had: releasing a released one is
				// the semaphore's "nothing held".
				return semaphore.ErrNotHeld
			}
			return lease.Release(ctx)
		}
		return handle{acquire(false), acquire(true), release,
			func() error { return lease.Err() }, func() string { return lease.Node() }, s.Participants,
			[]error{semaphore.ErrNotAcquired, semaphore.ErrNoLease, semaphore.ErrNotHeld}}
	},
	"handle": func(t *testing.T, c *recipe.Client, path string) handle {
		lk, err := recipe.NewLock(c, path, recipe.LockSpec{Recipe: "custom", LockName: "lock-", Driver: driver.Mutex(),
			NotAcquired: customNotAcquired, WouldBlock: customWouldBlock, NotHeld: customNotHeld}, recipe.DefaultNodeData())
		must(t, err)
		return viaAcquirer(reentrant.New(lk), lk.Participants,
			[]error{customNotAcquired, customWouldBlock, customNotHeld})
	},
	"rwlock.writer": func(t *testing.T, c *recipe.Client, path string) handle {
		rw, err := rwlock.New(c, path)
		must(t, err)
		return viaAcquirer(rw.Writer(), rwParticipants(rw),
			[]error{rwlock.ErrNotAcquired, rwlock.ErrLocked, rwlock.ErrNotHeld})
	},
	"semaphore.take": func(t *testing.T, c *recipe.Client, path string) handle {
		s, err := semaphore.New(c, path, 1)
		must(t, err)
		return viaAcquirer(s, s.Participants,
			[]error{semaphore.ErrNotAcquired, semaphore.ErrNoLease, semaphore.ErrNotHeld})
	},
	"leader.take": func(t *testing.T, c *recipe.Client, path string) handle {
		e, err := leader.New(c, path)
		must(t, err)
		return viaAcquirer(e, e.Participants,
			[]error{leader.ErrNotElected, leader.ErrLeaderElsewhere, leader.ErrNotLeader})
	},
	"leader": func(t *testing.T, c *recipe.Client, path string) handle {
		e, err := leader.New(c, path)
		must(t, err)
		return handle{e.Campaign, e.TryCampaign, e.Resign, e.Err, e.Node, e.Participants,
			[]error{leader.ErrNotElected, leader.ErrLeaderElsewhere, leader.ErrNotLeader}}
	},
}

// A custom recipe's sentinels, given to its LockSpec.
var (
	customNotAcquired = recipe.Sentinel("custom: not acquired", recipe.ErrNotAcquired)
	customWouldBlock  = recipe.Sentinel("custom: held elsewhere", recipe.ErrWouldBlock)
	customNotHeld     = recipe.Sentinel("custom: not held", recipe.ErrNotHeld)
)

// Every held thing and every handle speaks the two interfaces.
var (
	_ recipe.Held     = (*recipe.Hold)(nil)
	_ recipe.Held     = (*reentrant.Handle)(nil)
	_ recipe.Acquirer = (*reentrant.Handle)(nil)
	_ recipe.Acquirer = (*recipe.Lock)(nil)
	_ recipe.Held     = (*mutex.Mutex)(nil)
	_ recipe.Acquirer = (*mutex.Mutex)(nil)
	_ recipe.Held     = (*rwlock.Side)(nil)
	_ recipe.Acquirer = (*rwlock.Side)(nil)
	_ recipe.Held     = (*semaphore.Lease)(nil)
	_ recipe.Acquirer = (*semaphore.Semaphore)(nil)
	_ recipe.Acquirer = (*leader.Election)(nil)
)

// viaAcquirer is a recipe seen only through recipe.Acquirer and the
// recipe.Held its Take returns. Before anything was taken, a release is
// the acquirer's own when it is a Held too (a handle), else notHeld.
func viaAcquirer(a recipe.Acquirer, participants func(context.Context) ([]recipe.Participant, error), sentinels []error) handle {
	var held recipe.Held
	take := func(wait bool) func(context.Context) error {
		return func(ctx context.Context) error {
			h, err := a.Take(ctx, wait)
			if err == nil {
				held = h
			}
			return err
		}
	}
	release := func(ctx context.Context) error {
		if held != nil {
			return held.Release(ctx)
		}
		if h, ok := a.(recipe.Held); ok {
			return h.Release(ctx)
		}
		return sentinels[2]
	}
	return handle{take(true), take(false), release, func() error { return held.Err() }, func() string { return held.Node() },
		participants, sentinels}
}

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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every recipe speaks the engine's vocabulary: the same situation gives an
// error matching the same engine sentinel (and the recipe's own).
func TestVocabulary(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for name, newHandle := range kinds {
		t.Run(name, func(t *testing.T) {
			path := zktest.UniquePath(t)
			holder := newHandle(t, locktest.Client(t, []string{srv.Addr()}), path)
			other := newHandle(t, locktest.Client(t, []string{srv.Addr()}), path)
			ctx := locktest.Ctx(t, 30*time.Second)
			// The writer excludes readers too; the other side of a read
			// lock must be a writer to be kept out.
			if name == "rwlock.read" {
				holder = kinds["rwlock.write"](t, locktest.Client(t, []string{srv.Addr()}), path)
			}
			notAcquired, wouldBlock, notHeld := other.sentinels[0], other.sentinels[1], other.sentinels[2]

			// Releasing what was never held.
			if err := other.release(ctx); !errors.Is(err, recipe.ErrNotHeld) || !errors.Is(err, notHeld) {
				t.Errorf("release of nothing held = %v, want recipe.ErrNotHeld and %v", err, notHeld)
			}
			must(t, holder.acquire(ctx))

			// A blocking acquire that ends with its ctx.
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := other.acquire(short)
			cancel()
			for _, want := range []error{recipe.ErrNotAcquired, notAcquired, context.DeadlineExceeded} {
				if !errors.Is(err, want) {
					t.Errorf("acquire past its deadline = %v, want it to match %v", err, want)
				}
			}

			// A try that finds it held elsewhere.
			if err := other.try(ctx); !errors.Is(err, recipe.ErrWouldBlock) || !errors.Is(err, wouldBlock) {
				t.Errorf("try while held elsewhere = %v, want recipe.ErrWouldBlock and %v", err, wouldBlock)
			}

			// Nil contexts are errors, not panics.
			// A nil context (held in a variable: the bad input under test).
			var nilCtx context.Context
			if err := other.acquire(nilCtx); !errors.Is(err, recipe.ErrInvalidArgument) {
				t.Errorf("acquire(nil) = %v, want recipe.ErrInvalidArgument", err)
			}
			if _, err := other.participants(nilCtx); !errors.Is(err, recipe.ErrInvalidArgument) {
				t.Errorf("participants(nil) = %v, want recipe.ErrInvalidArgument", err)
			}

			// One Participant shape, holder marked.
			ps, err := other.participants(ctx)
			must(t, err)
			if len(ps) != 1 || ps[0].Node != holder.node() || !ps[0].Holder || ps[0].Token == 0 ||
				ps[0].Session == 0 || len(ps[0].Data) == 0 || ps[0].Created.IsZero() || ps[0].Sequence < 0 {
				t.Errorf("participants = %+v, want the holder %s alone, marked, with its data, token, session and age", ps, holder.node())
			}

			// Err after a loss: someone deletes the holder's node.
			done := holder.node()
			must(t, raw.Delete(path+"/"+done, -1))
			locktest.Eventually(t, 10*time.Second, "loss reported", func() bool { return holder.err() != nil })
			if err := holder.err(); !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
				t.Errorf("Err after the node was deleted = %v, want recipe.ErrLost and recipe.ErrNodeDeleted", err)
			}

			// Released once: a second release holds nothing.
			must(t, other.acquire(ctx))
			must(t, other.release(ctx))
			if err := other.release(ctx); !errors.Is(err, recipe.ErrNotHeld) || !errors.Is(err, notHeld) {
				t.Errorf("second release = %v, want recipe.ErrNotHeld and %v", err, notHeld)
			}
		})
	}
}

// Kinds do not mix: a recipe that finds another kind's nodes ahead of its
// own fails at once with ErrMismatch, leaves nothing behind, and the first
// holder keeps its hold.
func TestKindMismatch(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, pair := range [][2]string{
		{"mutex", "rwlock.read"}, {"mutex", "rwlock.write"}, {"rwlock.write", "semaphore"},
		{"semaphore", "mutex"}, {"mutex", "leader"}, {"leader", "semaphore"},
	} {
		t.Run(pair[0]+"_then_"+pair[1], func(t *testing.T) {
			path := zktest.UniquePath(t)
			first := kinds[pair[0]](t, locktest.Client(t, []string{srv.Addr()}), path)
			c := locktest.Client(t, []string{srv.Addr()})
			second := kinds[pair[1]](t, c, path)
			ctx := locktest.Ctx(t, 30*time.Second)
			must(t, first.acquire(ctx))
			start := time.Now()
			err := second.acquire(ctx) // would wait for ever if it waited
			if !errors.Is(err, recipe.ErrMismatch) || !errors.Is(err, recipe.ErrNotAcquired) {
				t.Fatalf("%s on a path held by a %s = %v, want recipe.ErrMismatch", pair[1], pair[0], err)
			}
			t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
			if err := second.try(ctx); !errors.Is(err, recipe.ErrMismatch) {
				t.Errorf("try form = %v, want recipe.ErrMismatch", err)
			}
			if err := first.err(); err != nil {
				t.Errorf("the first holder lost its hold: %v", err)
			}
			if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != first.node() {
				t.Errorf("directory holds %v, want only the first holder's %s", left, first.node())
			}
			if got := c.Stats().Creates; got > 3 {
				t.Errorf("the refused recipe sent %d creates", got)
			}
		})
	}
}
