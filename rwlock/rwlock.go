package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// Lock names of the nodes, ZooKeeper's read/write lock recipe's by default
// and Curator's InterProcessReadWriteLock's with [WithCuratorNames]. All the
// processes using one path must use the same names: nodes named otherwise
// are not part of the queue.
const (
	ReadLockName         = "read-"
	WriteLockName        = "write-"
	CuratorReadLockName  = "__READ__"
	CuratorWriteLockName = "__WRIT__"
)

// The read/write lock's sentinel errors. Each of the first four also
// matches the engine's sentinel of the same meaning (recipe.ErrNotAcquired,
// recipe.ErrWouldBlock, recipe.ErrNotHeld, recipe.ErrLost) with errors.Is,
// as in every recipe.
var (
	// ErrNotAcquired is wrapped by every error of a failed RLock or Lock,
	// together with the cause (for a timeout, context.DeadlineExceeded).
	ErrNotAcquired = recipe.Sentinel("rwlock: not acquired", recipe.ErrNotAcquired)
	// ErrLocked is returned by TryRLock and TryLock when the lock cannot be
	// had at once: a writer holds it or, for TryLock, anybody holds it or is
	// queued ahead.
	ErrLocked = recipe.Sentinel("rwlock: locked elsewhere", recipe.ErrWouldBlock)
	// ErrNotHeld is returned by RUnlock and Unlock on a handle that holds
	// nothing in that mode, with no I/O, and by RErr and Err when nothing is
	// held in that mode.
	ErrNotHeld = recipe.Sentinel("rwlock: not held", recipe.ErrNotHeld)
	// ErrUpgrade is wrapped (with ErrNotAcquired) by the error of Lock and
	// TryLock on a handle that holds the read lock but not the write lock.
	// Waiting would deadlock: the write would wait for this handle's own read
	// node. It is returned at once, without I/O; release the read lock first.
	ErrUpgrade = errors.New("rwlock: cannot upgrade a read lock to the write lock")
	// ErrLost is wrapped by RErr, Err, RUnlock and Unlock once a held lock
	// was lost, together with the reason: recipe.ErrSessionExpired,
	// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended or
	// recipe.ErrClosed.
	ErrLost = recipe.ErrLost
)

// Option configures an RWLock.
type Option func(*options)

type options struct {
	data        []byte
	read, write string
	maxHold     time.Duration
	revocable   bool
}

// WithMaxHold bounds how long the lock, in either mode, may be held: a hold still in force
// after d is ended by the library, which deletes its node (the next in line
// proceeds); its Done closes and Err wraps [ErrLost] and
// recipe.ErrMaxHoldExceeded. It is for processes that hang while holding;
// a hung process that wakes later may still act, so hand the fencing token
// to what it writes. Default: no limit.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

// WithRevocable lets others ask the holder to let go ([Revoke], or
// Curator's Revoker): [RWLock.Revoked] and [RWLock.RRevoked] close when they
// do. Releasing is up to the holder. Default: not revocable.
func WithRevocable() Option {
	return func(o *options) { o.revocable = true }
}

// Revoke asks the holder of node (a name from [RWLock.Participants]) of
// the read/write lock at path to let go: a revocable holder's Revoked (or
// RRevoked) channel closes; any other holder ignores it. It is compatible
// with Curator's Revoker both ways. An error wrapping recipe.ErrNotHeld
// means node is not there.
func Revoke(ctx context.Context, c *recipe.Client, path, node string) error {
	rw, err := New(c, path)
	if err != nil {
		return err
	}
	if err := rw.write.Revoke(ctx, node); err != nil {
		return fmt.Errorf("rwlock: %w", err)
	}
	return nil
}

// WithData sets the data stored in the lock's nodes, visible to
// [RWLock.Participants] and to operators. Default:
// "<host name>:<pid>", so an operator can see who holds or waits.
func WithData(data []byte) Option {
	return func(o *options) { o.data = append([]byte(nil), data...) }
}

// WithCuratorNames names the nodes like Curator's InterProcessReadWriteLock
// ([CuratorReadLockName], [CuratorWriteLockName]) instead of the ZooKeeper
// recipe's [ReadLockName] and [WriteLockName], so that Go and Curator
// clients on the same path queue together.
func WithCuratorNames() Option {
	return func(o *options) { o.read, o.write = CuratorReadLockName, CuratorWriteLockName }
}

// Mode is the mode of a node in the queue: [Read] or [Write].
type Mode uint8

// The modes of a read/write lock's nodes.
const (
	Read Mode = iota + 1
	Write
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// RWLock is a handle on a distributed, reentrant, fair read/write lock at one
// path: any number of readers, or one writer.
//
// Reentrancy is per handle and per mode: RLock on a handle that holds the
// read lock, and Lock on one that holds the write lock, only count, and the
// lock is released in that mode when RUnlock (or Unlock) has been called as
// many times. The write holder may also take the read lock (downgrade); a
// reader may not take the write lock (Lock fails with [ErrUpgrade]).
//
// Done, Err, Token and Node report on the handle's write lock; RDone, RErr,
// RToken and RNode on its read lock.
//
// A handle is safe for concurrent use, but goroutines that must exclude
// each other need handles of their own.
type RWLock struct {
	c           *recipe.Client
	read, write *recipe.Lock
	readName    string
	writeName   string
	data        []byte
	turn        recipe.Turn // serialises the lock and unlock calls on this handle

	mu sync.Mutex
	// w is the write node's hold. It stays after the last Unlock while read
	// holds ride on it (rn > 0 and r == nil), and goes when neither mode
	// needs it.
	w  *recipe.Hold
	wn int // write holds
	// r is the read node's hold; nil while the read holds ride on w.
	r  *recipe.Hold
	rn int // read holds
}

// New returns a handle on the read/write lock at path, a ZooKeeper path
// whose directory node is created (as a container) on first use. It checks
// its input and does no I/O.
func New(c *recipe.Client, path string, opts ...Option) (*RWLock, error) {
	o := options{data: recipe.DefaultNodeData(), read: ReadLockName, write: WriteLockName}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("rwlock: %w: nil option", recipe.ErrInvalidArgument)
		}
		opt(&o)
	}
	queue := []string{o.read, o.write}
	read, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:      "rwlock.read",
		LockName:    o.read,
		NotAcquired: ErrNotAcquired,
		Queue:       queue,
		Driver:      driver.Read(o.write),
		MaxHold:     o.maxHold, Revocable: o.revocable,
	}, o.data)
	if err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	write, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:      "rwlock.write",
		LockName:    o.write,
		NotAcquired: ErrNotAcquired,
		Queue:       queue,
		Driver:      driver.Write(),
		MaxHold:     o.maxHold, Revocable: o.revocable,
	}, o.data)
	if err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	return &RWLock{c: c, read: read, write: write, readName: o.read, writeName: o.write, data: o.data}, nil
}

// Path returns the lock's path.
func (rw *RWLock) Path() string { return rw.read.Path() }

// enter takes the handle's semaphore, or fails when ctx ends first.
func (rw *RWLock) enter(ctx context.Context) error { return rw.turn.Take(ctx) }

func (rw *RWLock) leave() { rw.turn.Give() }

// RLock acquires the read lock, waiting until no writer holds the lock or
// is queued ahead of this handle's read node, or until ctx ends. A deadline
// on ctx is the timeout. Readers share the lock; a reader waits only for the
// writers queued before it, and writers queued after it wait for it.
//
// If the handle already holds the read lock, RLock only increments its read
// count, without I/O. If the handle holds the write lock, RLock does not
// wait (see Downgrade in the package documentation).
//
// On failure nothing more is held, the node RLock queued has been deleted
// (or its deletion goes on in the background while the connection is down),
// and the error wraps [ErrNotAcquired] and the cause, such as ctx.Err().
// RLock on a handle whose read lock was lost fails with an error wrapping
// [ErrLost]; call RUnlock first.
func (rw *RWLock) RLock(ctx context.Context) error { return rw.rlock(ctx, true) }

// TryRLock acquires the read lock if no writer holds it or is queued,
// looking once without waiting. It returns an error wrapping [ErrLocked]
// otherwise (the node it queued with is deleted again). Reentrant like
// [RWLock.RLock].
func (rw *RWLock) TryRLock(ctx context.Context) error { return rw.rlock(ctx, false) }

func (rw *RWLock) rlock(ctx context.Context, wait bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	if err := rw.enter(ctx); err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	defer rw.leave()
	rw.mu.Lock()
	if rw.rn > 0 {
		defer rw.mu.Unlock()
		if err := rw.readHold().Err(); err != nil {
			return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
		}
		rw.rn++
		return nil
	}
	w := rw.w
	rw.mu.Unlock()
	if w != nil {
		return rw.downgrade(ctx, w)
	}
	h, err := acquire(ctx, rw.read, wait)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return fmt.Errorf("%w: read lock on %s", ErrLocked, rw.Path())
	}
	if err != nil {
		return err
	}
	rw.mu.Lock()
	rw.r, rw.rn = h, 1
	rw.mu.Unlock()
	return nil
}

// downgrade takes the read lock while the handle holds the write lock w:
// a read node that ignores w holds at once unless a writer is queued
// between w and it; then the read hold rides on w instead.
func (rw *RWLock) downgrade(ctx context.Context, w *recipe.Hold) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	lk, err := recipe.NewLock(rw.c, rw.Path(), recipe.LockSpec{
		Recipe:      "rwlock.read",
		LockName:    rw.readName,
		NotAcquired: ErrNotAcquired,
		Queue:       []string{rw.readName, rw.writeName},
		Driver:      readBeside(rw.writeName, w.Node()),
	}, rw.data)
	if err != nil {
		return fmt.Errorf("%w: read lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	h, err := lk.TryAcquire(ctx)
	switch {
	case errors.Is(err, recipe.ErrWouldBlock):
		h = nil // a writer is queued behind w: ride on w
	case err != nil:
		return err
	}
	rw.mu.Lock()
	rw.r, rw.rn = h, 1
	rw.mu.Unlock()
	return nil
}

// readHold returns the hold the read locks rest on. rw.mu must be held.
func (rw *RWLock) readHold() *recipe.Hold {
	if rw.rn == 0 {
		return nil
	}
	if rw.r != nil {
		return rw.r
	}
	return rw.w
}

// RUnlock undoes one RLock. When the read count reaches zero it deletes the
// read node (retrying connection loss until ctx ends) and the handle holds
// no read lock, whatever the outcome. On a handle that holds no read lock it
// returns [ErrNotHeld] without I/O.
//
// A nil ctx is refused with an error wrapping recipe.ErrInvalidArgument
// and changes nothing.
//
// If the read lock was lost meanwhile, RUnlock deletes nobody's node and
// returns an error wrapping [ErrLost] and the reason. If ctx ends before the
// node is deleted, the deletion goes on in the background while the session
// lives and the error wraps ctx.Err().
func (rw *RWLock) RUnlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("rwlock: read unlock: %w: nil context", recipe.ErrInvalidArgument)
	}
	if err := rw.enter(ctx); err != nil {
		return fmt.Errorf("rwlock: read unlock %s: %w", rw.Path(), err)
	}
	defer rw.leave()
	rw.mu.Lock()
	if rw.rn == 0 {
		rw.mu.Unlock()
		return ErrNotHeld
	}
	rw.rn--
	if rw.rn > 0 {
		rw.mu.Unlock()
		return nil
	}
	var h *recipe.Hold
	switch {
	case rw.r != nil:
		h, rw.r = rw.r, nil
	case rw.wn == 0:
		h, rw.w = rw.w, nil // the last read hold riding on the write node
	}
	rw.mu.Unlock()
	if h == nil {
		return nil // the write lock, still held, carried the read hold
	}
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("rwlock: read unlock %s: %w", rw.Path(), err)
	}
	return nil
}

// Lock acquires the write lock, waiting in line (first come, first served,
// behind every reader and writer queued before it) until it is alone or ctx
// ends. A deadline on ctx is the timeout. If the handle already holds the
// write lock, Lock only increments its write count, without I/O.
//
// On a handle that holds the read lock but not the write lock, Lock fails at
// once, without I/O, with an error wrapping [ErrUpgrade] and
// [ErrNotAcquired].
//
// On failure nothing more is held, the handle's write node has been deleted
// (or its deletion goes on in the background while the connection is down),
// and the error wraps [ErrNotAcquired] and the cause, such as ctx.Err().
// Lock on a handle whose write lock was lost fails with an error wrapping
// [ErrLost]; call Unlock first.
func (rw *RWLock) Lock(ctx context.Context) error { return rw.lock(ctx, true) }

// TryLock acquires the write lock if nobody holds the lock or is queued,
// looking once without waiting. It returns an error wrapping [ErrLocked]
// otherwise (the node it queued with is deleted again). Reentrant, and
// refusing an upgrade, like [RWLock.Lock].
func (rw *RWLock) TryLock(ctx context.Context) error { return rw.lock(ctx, false) }

func (rw *RWLock) lock(ctx context.Context, wait bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	if err := rw.enter(ctx); err != nil {
		return fmt.Errorf("%w: write lock on %s: %w", ErrNotAcquired, rw.Path(), err)
	}
	defer rw.leave()
	rw.mu.Lock()
	switch {
	case rw.wn > 0:
		defer rw.mu.Unlock()
		if err := rw.w.Err(); err != nil {
			return fmt.Errorf("%w: write lock on %s: %w", ErrNotAcquired, rw.Path(), err)
		}
		rw.wn++
		return nil
	case rw.rn > 0:
		rw.mu.Unlock()
		return fmt.Errorf("%w: %w: %s", ErrNotAcquired, ErrUpgrade, rw.Path())
	}
	rw.mu.Unlock()
	h, err := acquire(ctx, rw.write, wait)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return fmt.Errorf("%w: write lock on %s", ErrLocked, rw.Path())
	}
	if err != nil {
		return err
	}
	rw.mu.Lock()
	rw.w, rw.wn = h, 1
	rw.mu.Unlock()
	return nil
}

// Unlock undoes one Lock. When the write count reaches zero it deletes the
// write node (retrying connection loss until ctx ends) and the handle holds
// no write lock, whatever the outcome. On a handle that holds no write lock
// it returns [ErrNotHeld] without I/O.
//
// If the handle took the read lock while writing and its read hold rides on
// the write node (see Downgrade in the package documentation), the node
// stays, as a read hold, until the last RUnlock; Unlock then does no I/O.
//
// A nil ctx is refused with an error wrapping recipe.ErrInvalidArgument
// and changes nothing.
//
// If the write lock was lost meanwhile, Unlock deletes nobody's node and
// returns an error wrapping [ErrLost] and the reason. If ctx ends before the
// node is deleted, the deletion goes on in the background while the session
// lives and the error wraps ctx.Err().
func (rw *RWLock) Unlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("rwlock: unlock: %w: nil context", recipe.ErrInvalidArgument)
	}
	if err := rw.enter(ctx); err != nil {
		return fmt.Errorf("rwlock: unlock %s: %w", rw.Path(), err)
	}
	defer rw.leave()
	rw.mu.Lock()
	if rw.wn == 0 {
		rw.mu.Unlock()
		return ErrNotHeld
	}
	rw.wn--
	if rw.wn > 0 {
		rw.mu.Unlock()
		return nil
	}
	h := rw.w
	if rw.rn > 0 && rw.r == nil {
		// Read holds ride on the write node: keep it for them.
		rw.mu.Unlock()
		if err := h.Err(); err != nil {
			return fmt.Errorf("rwlock: unlock %s: %w", rw.Path(), err)
		}
		return nil
	}
	rw.w = nil
	rw.mu.Unlock()
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("rwlock: unlock %s: %w", rw.Path(), err)
	}
	return nil
}

// acquire waits for lk, or with wait false only looks once.
func acquire(ctx context.Context, lk *recipe.Lock, wait bool) (*recipe.Hold, error) {
	if wait {
		return lk.Acquire(ctx)
	}
	return lk.TryAcquire(ctx)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// hold returns the hold behind mode m, nil when the handle holds nothing in
// that mode.
func (rw *RWLock) hold(m Mode) *recipe.Hold {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if m == Read {
		return rw.readHold()
	}
	if rw.wn == 0 {
		return nil
	}
	return rw.w
}

func (rw *RWLock) done(m Mode) <-chan struct{} {
	if h := rw.hold(m); h != nil {
		return h.Done()
	}
	return closedChan
}

func (rw *RWLock) err(m Mode) error {
	h := rw.hold(m)
	if h == nil {
		return ErrNotHeld
	}
	if err := h.Err(); err != nil {
		return fmt.Errorf("rwlock %s (%s): %w", rw.Path(), m, err)
	}
	return nil
}

func (rw *RWLock) token(m Mode) int64 {
	if h := rw.hold(m); h != nil {
		return h.Token()
	}
	return 0
}

func (rw *RWLock) revoked(m Mode) <-chan struct{} {
	if h := rw.hold(m); h != nil {
		return h.Revoked()
	}
	return nil
}

func (rw *RWLock) suspended(m Mode) <-chan struct{} {
	if h := rw.hold(m); h != nil {
		return h.Suspended()
	}
	return nil
}

func (rw *RWLock) resumed(m Mode) <-chan struct{} {
	if h := rw.hold(m); h != nil {
		return h.Resumed()
	}
	return nil
}

func (rw *RWLock) node(m Mode) string {
	if h := rw.hold(m); h != nil {
		return h.Node()
	}
	return ""
}

// Done returns a channel that is closed when the write lock held by this
// handle is lost (session expired, node deleted by someone else, connection
// silent past the safe window, client closed) or released. When no write
// lock is held it returns a closed channel. (A channel obtained while
// writing stays open after Unlock while the handle's read holds ride on the
// write node; see Downgrade in the package documentation.)
func (rw *RWLock) Done() <-chan struct{} { return rw.done(Write) }

// Err returns nil while the write lock is held and in force; an error
// wrapping [ErrLost] and the reason once it was lost; [ErrNotHeld] when the
// handle holds no write lock.
func (rw *RWLock) Err() error { return rw.err(Write) }

// Token returns the fencing token of the write hold (the czxid of its node,
// strictly increasing from one holder to the next across the whole
// ensemble), or 0 when no write lock is held. Hand it to every system the
// writer writes to, and have them reject tokens lower than one they have
// seen.
func (rw *RWLock) Token() int64 { return rw.token(Write) }

// Revoked returns a channel closed when someone asks the write holder to
// let go (see [WithRevocable] and [Revoke]); nil (never ready) when no
// write lock is held.
func (rw *RWLock) Revoked() <-chan struct{} { return rw.revoked(Write) }

// RRevoked is [RWLock.Revoked] for the read lock.
func (rw *RWLock) RRevoked() <-chan struct{} { return rw.revoked(Read) }

// Suspended returns a channel that is closed while the client's session is
// suspended (only with recipe.WithSuspensionTolerance; see
// [recipe.Hold.Suspended] for the exact contract): the writer must stop
// acting as writer until [RWLock.Resumed] closes, or Done does. After the
// suspension cleared, call it again for the next one. nil (never ready)
// when no write lock is held.
func (rw *RWLock) Suspended() <-chan struct{} { return rw.suspended(Write) }

// Resumed returns a channel that is closed when the suspension in progress
// is over and the write lock was kept; a closed channel while no suspension
// is in progress; nil (never ready) when no write lock is held. If the lock
// is lost instead, Done closes and this channel never does.
func (rw *RWLock) Resumed() <-chan struct{} { return rw.resumed(Write) }

// RSuspended is [RWLock.Suspended] for the read lock.
func (rw *RWLock) RSuspended() <-chan struct{} { return rw.suspended(Read) }

// RResumed is [RWLock.Resumed] for the read lock.
func (rw *RWLock) RResumed() <-chan struct{} { return rw.resumed(Read) }

// Node returns the name of the write node, "" when no write lock is held.
func (rw *RWLock) Node() string { return rw.node(Write) }

// RDone is [RWLock.Done] for the read lock: closed when the read lock held
// by this handle is lost or released, and closed when none is held.
func (rw *RWLock) RDone() <-chan struct{} { return rw.done(Read) }

// RErr is [RWLock.Err] for the read lock: nil while it is held and in force,
// an error wrapping [ErrLost] once it was lost, [ErrNotHeld] when the handle
// holds no read lock.
func (rw *RWLock) RErr() error { return rw.err(Read) }

// RToken returns the fencing token of the node the read lock rests on, or 0
// when no read lock is held. Every write hold granted after it has a greater
// token, so a store can use it to tell a reader's view from a later
// writer's.
func (rw *RWLock) RToken() int64 { return rw.token(Read) }

// RNode returns the name of the node the read lock rests on (the write node
// while the read hold rides on it), "" when no read lock is held.
func (rw *RWLock) RNode() string { return rw.node(Read) }

// Participant is one node in the lock's queue, with its mode.
type Participant struct {
	recipe.Participant
	// Mode is Read or Write, from the node's lock name.
	Mode Mode
}

// Participants returns the lock's queue in order, readers and writers
// together, each with its mode and node data: the holders first (the leading
// readers, or one writer, marked Holder), then the waiters. Readers queued
// behind a writer wait for it; a writer waits for every node ahead of it.
func (rw *RWLock) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, fmt.Errorf("rwlock: participants: %w: nil context", recipe.ErrInvalidArgument)
	}
	ps, err := rw.write.Participants(ctx)
	if err != nil {
		return nil, fmt.Errorf("rwlock: participants of %s: %w", rw.Path(), err)
	}
	out := make([]Participant, len(ps))
	writerAhead := false
	for i, p := range ps {
		m := Read
		if p.LockName == rw.writeName {
			m = Write
		}
		// A reader holds while no writer is ahead of it; a writer holds
		// at the head of the queue.
		p.Holder = (m == Read && !writerAhead) || (m == Write && i == 0)
		writerAhead = writerAhead || m == Write
		out[i] = Participant{Participant: p, Mode: m}
	}
	return out, nil
}
