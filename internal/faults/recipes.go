package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/multilock"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// Mode is how a hold counts toward its recipe's rule.
type Mode uint8

// The modes of a hold.
const (
	// Exclusive: nobody else may hold at the same time (mutex, leader,
	// write lock).
	Exclusive Mode = iota + 1
	// Shared: any number of Shared holds at once, but no Exclusive one
	// (read lock).
	Shared
	// Lease: at most the recipe's MaxLeases at once (semaphore).
	Lease
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "excl"
	case Shared:
		return "read"
	case Lease:
		return "lease"
	}
	return "?"
}

// Part is one node held: a mutex hold has one part, an AcquireN of two
// semaphore leases two.
type Part struct {
	Done  <-chan struct{}
	Err   func() error
	Token int64
	Node  string
	// Suspended and Resumed are the part's suspension signals (see
	// recipe.Hold.Suspended), asked for anew each time.
	Suspended, Resumed func() <-chan struct{}
	// Commit is the part's guarded write (recipe.Held.Commit); nil when
	// the adapter has none for this part.
	Commit func(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error)
}

// Held is what an adapter's acquire returns.
type Held struct {
	Mode  Mode
	Parts []Part
	// Release releases every part and returns one error per part (nil if
	// that part was released).
	Release func(ctx context.Context) []error
}

// Acquirer acquires once: the recipe call a worker repeats.
type Acquirer func(ctx context.Context, rng *rand.Rand) (*Held, error)

// Adapter describes one recipe to the harness.
type Adapter struct {
	Name string
	// NotAcquired is the sentinel every failed acquire's error wraps.
	NotAcquired error
	// MaxLeases bounds Lease holds (semaphore only).
	MaxLeases int
	// AcquireLosses: an acquire may fail with the recipe's loss error
	// (ErrLost and its reason), as a multilock's does when a member taken
	// is lost while it waits for the next.
	AcquireLosses bool
	// New makes the acquirer of one worker, on its own handle.
	New func(c *recipe.Client, path string) (Acquirer, error)
}

// Mutex is the adapter of mutex.Mutex: Lock, hold, Unlock.
var Mutex = &Adapter{
	Name:        "mutex",
	NotAcquired: mutex.ErrNotAcquired,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		m, err := mutex.New(c, path)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ *rand.Rand) (*Held, error) { return take(ctx, m, Exclusive) }, nil
	},
}

// RWLock is the adapter of rwlock.RWLock: seven cycles in ten take the
// read lock, the others the write lock.
var RWLock = &Adapter{
	Name:        "rwlock",
	NotAcquired: rwlock.ErrNotAcquired,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		rw, err := rwlock.New(c, path)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, rng *rand.Rand) (*Held, error) {
			if rng.IntN(10) < 7 {
				return readLock(ctx, rw)
			}
			return writeLock(ctx, rw)
		}, nil
	},
}

// RWLockRead is the adapter of rwlock.RWLock that always takes the read
// lock.
var RWLockRead = rwAdapter("rwlock-read", readLock)

// RWLockWrite is the adapter of rwlock.RWLock that always takes the write
// lock.
var RWLockWrite = rwAdapter("rwlock-write", writeLock)

// rwAdapter is the adapter of rwlock.RWLock that takes the lock with take.
func rwAdapter(name string, take func(context.Context, *rwlock.RWLock) (*Held, error)) *Adapter {
	return &Adapter{
		Name:        name,
		NotAcquired: rwlock.ErrNotAcquired,
		New: func(c *recipe.Client, path string) (Acquirer, error) {
			rw, err := rwlock.New(c, path)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, _ *rand.Rand) (*Held, error) { return take(ctx, rw) }, nil
		},
	}
}

// readLock takes rw's read lock.
func readLock(ctx context.Context, rw *rwlock.RWLock) (*Held, error) {
	return take(ctx, rw.Reader(), Shared)
}

// writeLock takes rw's write lock.
func writeLock(ctx context.Context, rw *rwlock.RWLock) (*Held, error) {
	return take(ctx, rw.Writer(), Exclusive)
}

// take takes a, waiting, and describes the hold as one part of mode.
func take(ctx context.Context, a recipe.Acquirer, mode Mode) (*Held, error) {
	h, err := a.Take(ctx, true)
	if err != nil {
		return nil, err
	}
	return &Held{
		Mode:    mode,
		Parts:   []Part{part(h)},
		Release: func(ctx context.Context) []error { return []error{h.Release(ctx)} },
	}, nil
}

// suspender is what a recipe.Held has when it reports suspensions (all of
// this module's do).
type suspender interface {
	Suspended() <-chan struct{}
	Resumed() <-chan struct{}
}

// part describes h as it is now.
func part(h recipe.Held) Part {
	p := Part{Done: h.Done(), Err: h.Err, Token: h.Token(), Node: h.Node(), Commit: h.Commit}
	if s, ok := h.(suspender); ok {
		p.Suspended, p.Resumed = s.Suspended, s.Resumed
	}
	return p
}

// Semaphore is the adapter of a 2-lease semaphore.Semaphore: one cycle in
// four takes both leases at once with AcquireN (one transaction), the
// others one lease.
var Semaphore = semAdapter("semaphore", 2, func(ctx context.Context, s *semaphore.Semaphore, rng *rand.Rand) ([]*semaphore.Lease, error) {
	if rng.IntN(4) == 0 {
		return s.AcquireN(ctx, 2)
	}
	l, err := s.Acquire(ctx)
	return []*semaphore.Lease{l}, err
})

// Semaphore1 is the adapter of a 1-lease semaphore.Semaphore: Acquire,
// hold, Release.
var Semaphore1 = semAdapter("semaphore-1", 1, func(ctx context.Context, s *semaphore.Semaphore, _ *rand.Rand) ([]*semaphore.Lease, error) {
	l, err := s.Acquire(ctx)
	return []*semaphore.Lease{l}, err
})

// SemaphoreOne and SemaphoreBoth are a 2-lease semaphore.Semaphore taking
// one lease with Acquire, or both at once with AcquireN.
var (
	SemaphoreOne = semAdapter("semaphore Acquire", 2, func(ctx context.Context, s *semaphore.Semaphore, _ *rand.Rand) ([]*semaphore.Lease, error) {
		l, err := s.Acquire(ctx)
		return []*semaphore.Lease{l}, err
	})
	SemaphoreBoth = semAdapter("semaphore AcquireN", 2, func(ctx context.Context, s *semaphore.Semaphore, _ *rand.Rand) ([]*semaphore.Lease, error) {
		return s.AcquireN(ctx, 2)
	})
)

// semAdapter is the adapter of a semaphore.Semaphore with maxLeases leases
// that takes leases with take.
func semAdapter(name string, maxLeases int, take func(context.Context, *semaphore.Semaphore, *rand.Rand) ([]*semaphore.Lease, error)) *Adapter {
	return &Adapter{
		Name:        name,
		NotAcquired: semaphore.ErrNotAcquired,
		MaxLeases:   maxLeases,
		New: func(c *recipe.Client, path string) (Acquirer, error) {
			s, err := semaphore.New(c, path, maxLeases)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, rng *rand.Rand) (*Held, error) {
				ls, err := take(ctx, s, rng)
				if err != nil {
					return nil, err
				}
				return leases(ls), nil
			}, nil
		},
	}
}

// leases is the hold of the leases ls.
func leases(ls []*semaphore.Lease) *Held {
	h := &Held{Mode: Lease}
	for _, l := range ls {
		h.Parts = append(h.Parts, part(l))
	}
	h.Release = func(ctx context.Context) []error {
		errs := make([]error, len(ls))
		for i, l := range ls {
			errs[i] = l.Release(ctx)
		}
		return errs
	}
	return h
}

// Leader is the adapter of leader.Election: Campaign, lead, resign the
// term (Take and the term's Release).
var Leader = &Adapter{
	Name:        "leader",
	NotAcquired: leader.ErrNotElected,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		e, err := leader.New(c, path)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ *rand.Rand) (*Held, error) { return take(ctx, e, Exclusive) }, nil
	},
}

// LeaderRun is leader.Election.Run as an acquire: the hold is one term
// (Done is the term's context), and Release cancels Run's context, so
// that the term function returns and Run resigns and returns. An acquire
// whose context ends before the term began cancels Run too and fails with
// leader.ErrNotElected and the context's error.
var LeaderRun = &Adapter{
	Name:        "leader Run",
	NotAcquired: leader.ErrNotElected,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		e, err := leader.New(c, path)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ *rand.Rand) (*Held, error) {
			type term struct {
				ctx   context.Context
				token int64
				node  string
			}
			runCtx, stop := context.WithCancel(context.Background())
			terms := make(chan term, 1)
			ran := make(chan error, 1)
			go func() {
				ran <- e.Run(runCtx, func(tctx context.Context) error {
					select {
					case terms <- term{tctx, e.Token(), e.Node()}:
					default: // a second term after a loss: not counted
					}
					<-tctx.Done()
					return nil
				})
			}()
			var tm term
			select {
			case tm = <-terms:
			case err := <-ran: // Run gave up: the client closed, say
				stop()
				return nil, fmt.Errorf("%w: run: %w", leader.ErrNotElected, err)
			case <-ctx.Done():
				stop()
				if err := <-ran; !errors.Is(err, context.Canceled) {
					return nil, fmt.Errorf("%w: run: %w", leader.ErrNotElected, err)
				}
				return nil, fmt.Errorf("%w: %w", leader.ErrNotElected, ctx.Err())
			}
			release := func(rctx context.Context) []error {
				stop()
				select {
				case err := <-ran:
					if errors.Is(err, context.Canceled) {
						err = nil
					}
					return []error{err}
				case <-rctx.Done():
					go func() { <-ran }() // Run returns within the session timeout
					return []error{rctx.Err()}
				}
			}
			return &Held{
				Mode: Exclusive,
				Parts: []Part{{Done: tm.ctx.Done(), Err: func() error { return context.Cause(tm.ctx) }, Token: tm.token, Node: tm.node,
					Suspended: e.Suspended, Resumed: e.Resumed}},
				Release: release,
			}, nil
		}, nil
	},
}

// Recipes lists every adapter, in the order of the results table.
var Recipes = []*Adapter{Mutex, RWLock, Semaphore, Leader}

// Named returns the adapter called name (from Recipes, RWLockRead,
// RWLockWrite and Semaphore1), or nil.
func Named(name string) *Adapter {
	for _, a := range append([]*Adapter{RWLockRead, RWLockWrite, Semaphore1}, Recipes...) {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// lossReason names the documented reason a lost hold's error wraps, or ""
// when it wraps none (or is not a loss).
func lossReason(err error) string {
	if !errors.Is(err, recipe.ErrLost) {
		return ""
	}
	switch {
	case errors.Is(err, recipe.ErrConnectionSuspended):
		return "suspended"
	case errors.Is(err, recipe.ErrSessionExpired):
		return "expired"
	case errors.Is(err, recipe.ErrNodeDeleted):
		return "deleted"
	case errors.Is(err, recipe.ErrClosed):
		return "closed"
	}
	return ""
}

// Multilock is the adapter of a multilock.Set of two mutexes, one on the
// cell's path and one beside it (path + "-b"), held as one part: Done
// closes when either member is lost, and the suspension signals are the
// first member's (both are on one client). A member lost while Lock waits for the
// other is a documented failure of Lock (ErrLost with ErrNotAcquired).
var Multilock = &Adapter{
	Name:          "multilock",
	NotAcquired:   multilock.ErrNotAcquired,
	AcquireLosses: true,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		a, err := mutex.New(c, path)
		if err != nil {
			return nil, err
		}
		b, err := mutex.New(c, path+"-b")
		if err != nil {
			return nil, err
		}
		s, err := multilock.New(a, b)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ *rand.Rand) (*Held, error) {
			if err := s.Lock(ctx); err != nil {
				return nil, err
			}
			return &Held{
				Mode: Exclusive,
				// A Set reports no suspensions of its own: its members,
				// on one client, are suspended together, so the first
				// member's signals are the set's.
				Parts: []Part{{Done: s.Done(), Err: s.Err, Token: s.Tokens()[0], Node: a.Node(), Commit: s.Commit,
					Suspended: a.Suspended, Resumed: a.Resumed}},
				Release: func(ctx context.Context) []error { return []error{s.Unlock(ctx)} },
			}, nil
		}, nil
	},
}

// Custom is the adapter of a recipe built on the engine's public surface
// alone, as a user would (recipe.NewLock, a driver.DriverFunc): a mutex
// with nodes of its own name, "ticket-".
var Custom = &Adapter{
	Name:        "custom",
	NotAcquired: recipe.ErrNotAcquired,
	New: func(c *recipe.Client, path string) (Acquirer, error) {
		first := driver.Mutex()
		l, err := recipe.NewLock(c, path, recipe.LockSpec{
			Recipe:   "ticket",
			LockName: "ticket-",
			Driver: driver.DriverFunc(func(sorted []string, self string) (driver.Decision, error) {
				return first.Decide(sorted, self)
			}),
		}, nil)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ *rand.Rand) (*Held, error) { return take(ctx, l, Exclusive) }, nil
	},
}

// LivenessRecipes are the recipes of the liveness grid.
var LivenessRecipes = []*Adapter{Mutex, RWLock, Semaphore, Leader, LeaderRun, Multilock, Custom}
