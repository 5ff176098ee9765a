package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
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
	// nothing in that mode, with no I/O, and by the Err of a [Side] (and
	// [RWLock.Err]) when nothing is held in that mode.
	ErrNotHeld = recipe.Sentinel("rwlock: not held", recipe.ErrNotHeld)
	// ErrUpgrade is wrapped (with ErrNotAcquired) by the error of Lock and
	// TryLock called with a context carrying the handle's read hold (see
	// RWLock.REnter) while it holds no write lock. Waiting would deadlock:
	// the write would wait for this handle's own read node. It is returned
	// at once, without I/O; release the read lock first.
	ErrUpgrade = errors.New("rwlock: cannot upgrade a read lock to the write lock")
	// ErrLost is wrapped by Err, RUnlock and Unlock once a held lock
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
// Curator's Revoker): the Revoked channel of [RWLock.Writer] or [RWLock.Reader] closes when
// they
// do. Releasing is up to the holder. Default: not revocable.
func WithRevocable() Option {
	return func(o *options) { o.revocable = true }
}

// Revoke asks the holder of node (a name from [RWLock.Participants]) of
// the read/write lock at path to let go: a revocable holder's Revoked channel (of
// its [Side]) closes; any other holder ignores it. It is compatible
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
// A handle excludes like a [sync.RWMutex]: goroutines sharing it share its
// read lock, and Lock waits until the handle holds nothing while RLock
// waits until it holds no write lock (each then queues like any other
// contender), so two goroutines sharing a handle never both write, nor
// read while another writes. Reentrancy is explicit: [RWLock.Enter] and
// [RWLock.REnter] return a context that carries the hold, and a call
// given it (or a context derived from it) only counts in the same mode,
// without I/O; the lock is released in that mode when RUnlock (or Unlock)
// has been called as many times. The write holder may also take the read
// lock through the write hold's context (downgrade); a reader may not take
// the write lock (Lock with the read hold's context fails with
// [ErrUpgrade]).
//
// Each mode is also a handle of its own, [RWLock.Reader] and
// [RWLock.Writer], which report on what the handle holds in that mode
// (Done, Err, Token, Node, Revoked, Suspended, Resumed). Done, Err, Token
// and Node on the RWLock are the write side's. A handle is safe for
// concurrent use.
type RWLock struct {
	c              *recipe.Client
	read, write    *recipe.Lock
	readName       string
	writeName      string
	data           []byte
	turn           reentrant.Turn // serialises the calls of both sides of this handle
	reader, writer Side

	mu sync.Mutex
	// w is the write node's hold. It stays after the last Unlock while read
	// holds ride on it (rn > 0 and r == nil), and goes when neither mode
	// needs it.
	w  *recipe.Hold
	wn int // write holds
	// r is the read node's hold; nil while the read holds ride on w.
	r  *recipe.Hold
	rn int // read holds
	// wgen and rgen name the current write and read holds (nil without
	// one) in the contexts that carry them; changed is closed, and
	// replaced, whenever a count reaches zero.
	wgen, rgen *byte
	changed    chan struct{}
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
	spec := func(m Mode, name string) (recipe.LockSpec, error) {
		k, _ := driver.KindNamed(name) // o.read and o.write are names of the table
		d, err := k.Driver(0)
		return recipe.LockSpec{Recipe: "rwlock." + m.String(), LockName: name, NotAcquired: ErrNotAcquired,
			Queue: k.Queue(), Driver: d, MaxHold: o.maxHold, Revocable: o.revocable}, err
	}
	var read, write *recipe.Lock
	rs, err := spec(Read, o.read)
	if err == nil {
		read, err = recipe.NewLock(c, path, rs, o.data)
	}
	if err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	ws, err := spec(Write, o.write)
	if err == nil {
		write, err = recipe.NewLock(c, path, ws, o.data)
	}
	if err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	rw := &RWLock{c: c, read: read, write: write, readName: o.read, writeName: o.write, data: o.data,
		changed: make(chan struct{})}
	rw.reader, rw.writer = newSide(rw, Read), newSide(rw, Write)
	return rw, nil
}

// Path returns the lock's path.
func (rw *RWLock) Path() string { return rw.read.Path() }

// Reader returns the handle's read side: its Take is RLock (or TryRLock),
// its Release RUnlock, and its accessors report on the read lock.
func (rw *RWLock) Reader() *Side { return &rw.reader }

// Writer returns the handle's write side: its Take is Lock (or TryLock),
// its Release Unlock, and its accessors report on the write lock.
func (rw *RWLock) Writer() *Side { return &rw.writer }

// RLock acquires the read lock, waiting until no writer holds the lock or
// is queued ahead of this handle's read node, or until ctx ends. A deadline
// on ctx is the timeout. Readers share the lock; a reader waits only for the
// writers queued before it, and writers queued after it wait for it.
//
// If the handle holds the write lock, RLock first waits for it to be
// released on the handle. If the handle holds the read lock, RLock shares
// it: it only increments the read count, without I/O. If ctx carries the
// handle's write hold (see [RWLock.Enter]), RLock does not wait (see
// Downgrade in the package documentation).
//
// On failure nothing more is held, the node RLock queued has been deleted
// (or its deletion goes on in the background while the connection is down),
// and the error wraps [ErrNotAcquired] and the cause, such as ctx.Err().
// RLock on a handle whose read lock was lost fails with an error wrapping
// [ErrLost]; call RUnlock first.
func (rw *RWLock) RLock(ctx context.Context) error { _, err := rw.reader.Take(ctx, true); return err }

// REnter is [RWLock.RLock] that also returns a child of ctx carrying the
// read hold: RLock and REnter called with it (or a context derived from
// it) re-enter without I/O, and Lock with it fails with [ErrUpgrade].
func (rw *RWLock) REnter(ctx context.Context) (context.Context, error) {
	return rw.reader.Enter(ctx, true)
}

// TryRLock acquires the read lock if no writer holds it or is queued,
// looking once without waiting. It returns an error wrapping [ErrLocked]
// otherwise (the node it queued with is deleted again), and at once,
// without I/O, while the handle holds the write lock for another caller.
// Reentrant like [RWLock.RLock].
func (rw *RWLock) TryRLock(ctx context.Context) error {
	_, err := rw.reader.Take(ctx, false)
	return err
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
func (rw *RWLock) RUnlock(ctx context.Context) error { return rw.reader.Release(ctx) }

// Lock acquires the write lock, waiting in line (first come, first served,
// behind every reader and writer queued before it) until it is alone or ctx
// ends. A deadline on ctx is the timeout. If the handle holds the lock in
// either mode, Lock first waits for it to be released on the handle, as
// [sync.RWMutex.Lock] does. If ctx carries the handle's write hold (see
// [RWLock.Enter]), Lock only increments its write count, without I/O.
//
// If ctx carries the handle's read hold (see [RWLock.REnter]) and the
// handle does not hold the write lock, Lock fails at once, without I/O,
// with an error wrapping [ErrUpgrade] and [ErrNotAcquired].
//
// On failure nothing more is held, the handle's write node has been deleted
// (or its deletion goes on in the background while the connection is down),
// and the error wraps [ErrNotAcquired] and the cause, such as ctx.Err().
// Lock on a handle whose write lock was lost fails with an error wrapping
// [ErrLost]; call Unlock first.
func (rw *RWLock) Lock(ctx context.Context) error { _, err := rw.writer.Take(ctx, true); return err }

// Enter is [RWLock.Lock] that also returns a child of ctx carrying the
// write hold: Lock and Enter called with it (or a context derived from
// it) re-enter without I/O, and RLock with it takes the read lock at once
// (downgrade).
func (rw *RWLock) Enter(ctx context.Context) (context.Context, error) {
	return rw.writer.Enter(ctx, true)
}

// TryLock acquires the write lock if nobody holds the lock or is queued,
// looking once without waiting. It returns an error wrapping [ErrLocked]
// otherwise (the node it queued with is deleted again), and at once,
// without I/O, while the handle holds the lock for another caller.
// Reentrant, and refusing an upgrade, like [RWLock.Lock].
func (rw *RWLock) TryLock(ctx context.Context) error {
	_, err := rw.writer.Take(ctx, false)
	return err
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
func (rw *RWLock) Unlock(ctx context.Context) error { return rw.writer.Release(ctx) }

// Done is the write side's [Side.Done]: closed when the write lock held by
// this handle is lost or released, closed when none is held. (A channel
// obtained while writing stays open after Unlock while the handle's read
// holds ride on the write node; see Downgrade in the package documentation.)
func (rw *RWLock) Done() <-chan struct{} { return rw.writer.Done() }

// Err is the write side's [Side.Err]: nil while the write lock is held and
// in force, an error wrapping [ErrLost] once it was lost, [ErrNotHeld]
// when the handle holds no write lock.
func (rw *RWLock) Err() error { return rw.writer.Err() }

// Token is the write side's [Side.Token]: the write hold's fencing token,
// 0 when no write lock is held.
func (rw *RWLock) Token() int64 { return rw.writer.Token() }

// Node is the write side's [Side.Node]: the write node's name, "" when no
// write lock is held.
func (rw *RWLock) Node() string { return rw.writer.Node() }

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
	for i, p := range ps {
		m := Read
		if p.LockName == rw.writeName {
			m = Write
		}
		out[i] = Participant{Participant: p, Mode: m}
	}
	return out, nil
}

// ParticipantNode is one node in the lock's queue, as a listing tells it,
// with its mode.
type ParticipantNode struct {
	recipe.ParticipantNode
	// Mode is Read or Write, from the node's lock name.
	Mode Mode
}

// ParticipantNodes returns the lock's queue in order, readers and writers
// together, as Participants does (the holders marked Holder), from one
// listing of the directory: each node's name, sequence number and mode,
// without its data. It costs one request however long the queue;
// Participants reads every node. See [recipe.Lock.ParticipantNodes].
func (rw *RWLock) ParticipantNodes(ctx context.Context) ([]ParticipantNode, error) {
	if ctx == nil {
		return nil, fmt.Errorf("rwlock: participant nodes: %w: nil context", recipe.ErrInvalidArgument)
	}
	ps, err := rw.write.ParticipantNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("rwlock: participant nodes of %s: %w", rw.Path(), err)
	}
	out := make([]ParticipantNode, len(ps))
	for i, p := range ps {
		m := Read
		if p.LockName == rw.writeName {
			m = Write
		}
		out[i] = ParticipantNode{ParticipantNode: p, Mode: m}
	}
	return out, nil
}
