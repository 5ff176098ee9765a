package mutex

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
)

// LockName is the name part of the mutex's nodes, the same as Curator's
// InterProcessMutex, so the two exclude each other on the same path.
// The mutex also queues kazoo's Lock nodes ("__lock__"; see the package
// documentation).
const LockName = "lock-"

// queue holds the lock names of the mutex's queue: ours and kazoo's.
var queue = func() []string {
	k, _ := driver.KindNamed(LockName)
	return k.Queue()
}()

// The mutex's sentinel errors. Each also matches the engine's sentinel of
// the same meaning (recipe.ErrNotAcquired, recipe.ErrWouldBlock,
// recipe.ErrNotHeld, recipe.ErrLost) with errors.Is, as in every recipe.
var (
	// ErrNotAcquired is wrapped by every error of a failed Lock, together
	// with the cause (for a timeout, context.DeadlineExceeded).
	ErrNotAcquired = recipe.Sentinel("mutex: not acquired", recipe.ErrNotAcquired)
	// ErrLocked is returned by TryLock when another session holds the
	// lock, or this handle holds it or is acquiring it for another caller.
	ErrLocked = recipe.Sentinel("mutex: locked elsewhere", recipe.ErrWouldBlock)
	// ErrNotHeld is returned by Unlock on a handle that holds nothing, with
	// no I/O, and by Err when nothing is held.
	ErrNotHeld = recipe.Sentinel("mutex: not held", recipe.ErrNotHeld)
	// ErrLost is wrapped by Err (and Unlock) once a held lock was lost,
	// together with the reason: recipe.ErrSessionExpired,
	// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended or recipe.ErrClosed.
	ErrLost = recipe.ErrLost
)

// Option configures a Mutex.
type Option func(*options)

type options struct {
	data      []byte
	maxHold   time.Duration
	revocable bool
}

// WithData sets the data stored in the mutex's node, visible to
// [Mutex.Participants] and to operators. Default: "<host name>:<pid>".
func WithData(data []byte) Option {
	return func(o *options) { o.data = append([]byte(nil), data...) }
}

// WithMaxHold bounds how long the lock may be held: a hold still in force
// after d is ended by the library, which deletes its node (the next waiter
// proceeds); Done closes and Err wraps [ErrLost] and
// recipe.ErrMaxHoldExceeded. It is for processes that hang while holding;
// a hung process that wakes later may still act, so hand the fencing token
// to what it writes. Default: no limit.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

// WithRevocable lets others ask the holder to let go ([Revoke], or
// Curator's Revoker): [Mutex.Revoked] closes when they do. Releasing is up
// to the holder. Default: not revocable (requests are ignored).
func WithRevocable() Option {
	return func(o *options) { o.revocable = true }
}

// Revoke asks the holder of node (a name from [Mutex.Participants]) of the
// mutex at path to let go: a revocable holder's Revoked channel closes; any
// other holder ignores it. It is compatible with Curator's Revoker both
// ways. An error wrapping recipe.ErrNotHeld means node is not there.
func Revoke(ctx context.Context, c *recipe.Client, path, node string) error {
	m, err := New(c, path)
	if err != nil {
		return err
	}
	if err := m.lk.Revoke(ctx, node); err != nil {
		return fmt.Errorf("mutex: %w", err)
	}
	return nil
}

// Mutex is a handle on a distributed, reentrant, fair mutex at one path.
//
// A handle excludes like a [sync.Mutex]: Lock on a handle that holds the
// lock, or is acquiring it for another caller, waits until that hold is
// released on the handle, then queues like any other contender. Two
// goroutines sharing a handle never both hold. Reentrancy is explicit:
// [Mutex.Enter] locks and returns a context that carries the hold, and
// Lock, TryLock and Enter called with that context (or one derived from
// it) only count, without I/O. The lock is released when Unlock has been
// called as many times. A handle is safe for concurrent use.
//
// Done, Err, Token, Node, Revoked, Suspended and Resumed report on the lock
// the handle holds (Err returns [ErrNotHeld] and Token 0 when it holds
// nothing), and Commit writes only while it holds, whichever goroutine
// calls them; Unlock, like [sync.Mutex.Unlock], may be called from any
// goroutine. Take and Release are Lock (or TryLock) and Unlock for code
// that takes any [recipe.Acquirer] or [recipe.Held], such as package
// multilock.
type Mutex struct {
	h  *reentrant.Handle
	lk *recipe.Lock
}

// New returns a handle on the mutex at path, a ZooKeeper path whose
// directory node is created (as a container) on first use. It checks its
// input and does no I/O.
func New(c *recipe.Client, path string, opts ...Option) (*Mutex, error) {
	o := options{data: recipe.DefaultNodeData()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("mutex: %w: nil option", recipe.ErrInvalidArgument)
		}
		opt(&o)
	}
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:      "mutex",
		LockName:    LockName,
		Queue:       queue,
		NotAcquired: ErrNotAcquired,
		WouldBlock:  ErrLocked,
		NotHeld:     ErrNotHeld,
		Driver:      driver.Mutex(),
		MaxHold:     o.maxHold,
		Revocable:   o.revocable,
	}, o.data)
	if err != nil {
		return nil, fmt.Errorf("mutex: %w", err)
	}
	return &Mutex{h: reentrant.New(lk), lk: lk}, nil
}

// Lock acquires the mutex, waiting in line (first come, first served) until
// it is free or ctx ends. A deadline on ctx is the timeout. If the handle
// holds the lock, or another call on it is acquiring it, Lock first waits
// for that hold to be released on the handle, as [sync.Mutex.Lock] does
// (so one goroutine locking twice with a plain context waits until its
// ctx ends). If ctx carries the handle's current hold (see
// [Mutex.Enter]), Lock only increments the hold count, without I/O.
//
// On failure nothing more is held, the node Lock queued has been deleted
// (or its deletion goes on in the background while the connection is
// down), and the error wraps [ErrNotAcquired] and the cause, such as
// ctx.Err(). A re-entry into a hold that was lost fails with an error
// wrapping [ErrLost]; call Unlock first.
func (m *Mutex) Lock(ctx context.Context) error { _, err := m.h.Enter(ctx, true); return err }

// Enter is [Mutex.Lock] that also returns a child of ctx carrying the
// hold: Lock, TryLock and Enter called with it, or with a context derived
// from it, re-enter the hold (they only count, without I/O), and each
// needs its Unlock. Pass it down a call chain that may lock again. A
// goroutine handed it shares the hold, as one handed the lock would. When
// ctx already carries the current hold, Enter counts and returns ctx.
func (m *Mutex) Enter(ctx context.Context) (context.Context, error) { return m.h.Enter(ctx, true) }

// TryLock acquires the mutex if it is free, looking once without waiting.
// It returns an error wrapping [ErrLocked] when another session holds it
// (the node it queued with is deleted again), and at once, without I/O,
// when this handle holds it or is acquiring it for another caller (unless
// ctx carries the handle's current hold: then it re-enters, as
// [Mutex.Lock] does).
func (m *Mutex) TryLock(ctx context.Context) error { _, err := m.h.Enter(ctx, false); return err }

// TryEnter is [Mutex.TryLock] that returns a context carrying the hold,
// as [Mutex.Enter] does.
func (m *Mutex) TryEnter(ctx context.Context) (context.Context, error) {
	return m.h.Enter(ctx, false)
}

// Unlock undoes one Lock. When the hold count reaches zero it deletes the
// node (retrying connection loss until ctx ends) and the handle holds
// nothing, whatever the outcome. On a handle that holds nothing it returns
// [ErrNotHeld] without I/O.
//
// A nil ctx is refused with an error wrapping recipe.ErrInvalidArgument
// and changes nothing: the lock is still held, with the same count.
//
// If the lock was lost meanwhile, Unlock deletes nobody's node and returns
// an error wrapping [ErrLost] and the reason. If ctx ends before the node is
// deleted, the deletion goes on in the background while the session lives
// and the error wraps ctx.Err().
func (m *Mutex) Unlock(ctx context.Context) error { return m.h.Release(ctx) }

// Participant is one node in the mutex's queue.
type Participant = recipe.Participant

// Participants returns the mutex's queue in order: the holder first, then
// the waiters in the order they will hold, each with its node data.
func (m *Mutex) Participants(ctx context.Context) ([]Participant, error) {
	p, err := m.lk.Participants(ctx)
	if err != nil {
		return nil, fmt.Errorf("mutex: participants of %s: %w", m.Path(), err)
	}
	return p, nil
}

// ParticipantNode is one node in the mutex's queue, as a listing tells it.
type ParticipantNode = recipe.ParticipantNode

// ParticipantNodes returns the mutex's queue in order, as Participants does
// (the holder first, marked Holder), from one listing of the directory:
// each node's name and sequence number, without its data. It costs one
// request however long the queue; Participants reads every node. See
// [recipe.Lock.ParticipantNodes].
func (m *Mutex) ParticipantNodes(ctx context.Context) ([]ParticipantNode, error) {
	p, err := m.lk.ParticipantNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("mutex: participant nodes of %s: %w", m.Path(), err)
	}
	return p, nil
}
