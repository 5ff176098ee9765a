package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// LockName is the name part of the semaphore's nodes, the name the
// ZooKeeper recipe uses for leases.
const LockName = "lease-"

// The semaphore's sentinel errors. ErrNotAcquired, ErrNoLease, ErrNotHeld
// and ErrLost also match the engine's sentinel of the same meaning
// (recipe.ErrNotAcquired, recipe.ErrWouldBlock, recipe.ErrNotHeld,
// recipe.ErrLost) with errors.Is, as in every recipe.
var (
	// ErrNotAcquired is wrapped by every error of a failed Acquire, AcquireN
	// or TryAcquire (except [ErrNoLease]), together with the cause: for a
	// timeout, context.DeadlineExceeded; for a cancellation,
	// context.Canceled.
	ErrNotAcquired = recipe.Sentinel("semaphore: not acquired", recipe.ErrNotAcquired)
	// ErrNoLease is returned by TryAcquire when every lease is taken. It
	// wraps no other error.
	ErrNoLease = recipe.Sentinel("semaphore: no lease free", recipe.ErrWouldBlock)
	// ErrMaxLeasesMismatch is wrapped, together with [ErrNotAcquired] and
	// [recipe.ErrMismatch], by the error of an acquire on a path that was
	// set up with another number of leases than this handle's. Every client
	// of one path must use the same maxLeases.
	ErrMaxLeasesMismatch = errors.New("semaphore: path set up with another number of leases")
	// ErrLost is wrapped by Lease.Err (and Lease.Release) once a lease was
	// lost, together with the reason: recipe.ErrSessionExpired,
	// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended or
	// recipe.ErrClosed.
	ErrLost = recipe.ErrLost
	// ErrNotHeld is returned by Lease.Err after a successful release, and
	// wrapped by the error of a Release on a lease already released.
	ErrNotHeld = recipe.Sentinel("semaphore: lease not held", recipe.ErrNotHeld)
)

// Option configures a Semaphore.
type Option func(*options)

type options struct {
	data    []byte
	maxHold time.Duration
}

// WithMaxHold bounds how long a lease may be held: a hold still in force
// after d is ended by the library, which deletes its node (the next in line
// proceeds); its Done closes and Err wraps [ErrLost] and
// recipe.ErrMaxHoldExceeded. It is for processes that hang while holding;
// a hung process that wakes later may still act, so hand the fencing token
// to what it writes. Default: no limit.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

// WithData sets the data stored in the semaphore's nodes, visible to
// [Semaphore.Participants] and to operators. Default:
// "<host name>:<pid>", so an operator can see who holds or waits.
func WithData(data []byte) Option {
	return func(o *options) { o.data = append([]byte(nil), data...) }
}

// Semaphore is a handle on a distributed counting semaphore with a fixed
// number of leases at one path.
//
// A Semaphore is immutable and safe for concurrent use. It is not
// reentrant: every Acquire takes one more lease, also from a handle that
// already holds some, so a goroutine that takes leases one at a time and
// holds them all can wait for itself forever. Use [Semaphore.AcquireN] to
// take several at once.
type Semaphore struct {
	lk        *recipe.Lock
	maxLeases int
}

// New returns a handle on the semaphore with maxLeases leases at path, a
// ZooKeeper path whose directory node is created (as a container) on first
// use and records maxLeases. Every client of one path must pass the same
// maxLeases; an acquire by one that does not fails with an error wrapping
// [ErrMaxLeasesMismatch].
//
// New checks its input and does no I/O: a maxLeases below one, a nil
// client or a nil option give an error wrapping recipe.ErrInvalidArgument,
// a bad path one wrapping recipe.ErrInvalidPath.
func New(c *recipe.Client, path string, maxLeases int, opts ...Option) (*Semaphore, error) {
	if maxLeases < 1 {
		return nil, fmt.Errorf("semaphore: %w: maxLeases = %d, must be at least 1", recipe.ErrInvalidArgument, maxLeases)
	}
	o := options{data: recipe.DefaultNodeData()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("semaphore: %w: nil option", recipe.ErrInvalidArgument)
		}
		opt(&o)
	}
	d, err := driver.Leases(maxLeases)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w: %w", recipe.ErrInvalidArgument, err)
	}
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:      "semaphore",
		LockName:    LockName,
		Driver:      d,
		DirData:     dirData(maxLeases),
		DirMismatch: ErrMaxLeasesMismatch,
		NotAcquired: ErrNotAcquired,
		MaxHold:     o.maxHold,
	}, o.data)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	return &Semaphore{lk: lk, maxLeases: maxLeases}, nil
}

// dirData is the canonical record of the number of leases kept in the
// semaphore's directory node.
func dirData(maxLeases int) []byte {
	return []byte("maxLeases=" + strconv.Itoa(maxLeases))
}

// Path returns the semaphore's path.
func (s *Semaphore) Path() string { return s.lk.Path() }

// MaxLeases returns the number of leases.
func (s *Semaphore) MaxLeases() int { return s.maxLeases }

// Acquire takes one lease, waiting in line (first come, first served) until
// one is free or ctx ends. A deadline on ctx is the timeout.
//
// On failure nothing is held, the node it queued with has been deleted (or
// its deletion goes on in the background while the connection is down),
// and the error wraps [ErrNotAcquired] and the cause, such as ctx.Err(),
// or [ErrMaxLeasesMismatch].
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	h, err := s.lk.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &Lease{s: s, h: h}, nil
}

// AcquireN takes n leases at once, waiting until all n are free or ctx
// ends. Its n nodes are created in one transaction, so they queue next to
// each other with no other node between them: AcquireN is all or nothing,
// and two callers of AcquireN never deadlock by each holding part of what
// the other needs. The leases come in queue order and are released one by
// one.
//
// An n below one or above MaxLeases, or so large that its transaction
// would not fit in one request to the servers (see recipe.WithMaxPacket),
// is refused without I/O with an error wrapping [ErrNotAcquired] and
// recipe.ErrInvalidArgument. On failure no
// lease is held and every node is deleted as for [Semaphore.Acquire].
func (s *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	if n < 1 || n > s.maxLeases {
		return nil, fmt.Errorf("%w: %w: n = %d, must be between 1 and maxLeases = %d",
			ErrNotAcquired, recipe.ErrInvalidArgument, n, s.maxLeases)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	hs, err := s.lk.AcquireN(ctx, n)
	if err != nil {
		return nil, err
	}
	ls := make([]*Lease, len(hs))
	for i, h := range hs {
		ls[i] = &Lease{s: s, h: h}
	}
	return ls, nil
}

// TryAcquire takes one lease if one is free, looking once without waiting.
// When every lease is taken it returns an error wrapping [ErrNoLease] (and
// nothing else); the node it queued with is deleted again. Other failures
// are reported as for [Semaphore.Acquire].
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	h, err := s.lk.TryAcquire(ctx)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return nil, fmt.Errorf("%w: %s has %d leases, all taken", ErrNoLease, s.Path(), s.maxLeases)
	}
	if err != nil {
		return nil, err
	}
	return &Lease{s: s, h: h}, nil
}

// Take is [Semaphore.Acquire] (wait) or [Semaphore.TryAcquire] returning
// the [*Lease] as a [recipe.Held], so that a Semaphore is a
// [recipe.Acquirer].
func (s *Semaphore) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	acquire := s.Acquire
	if !wait {
		acquire = s.TryAcquire
	}
	l, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ recipe.Held = (*Lease)(nil)

// Participant is one node in the semaphore's queue.
type Participant = recipe.Participant

// Participants returns the semaphore's queue in order: the first
// MaxLeases participants hold a lease, the rest wait in the order they will
// get one. Each comes with its node data. Nodes of a client still checking
// the number of leases may appear briefly.
func (s *Semaphore) Participants(ctx context.Context) ([]Participant, error) {
	p, err := s.lk.Participants(ctx)
	if err != nil {
		return nil, fmt.Errorf("semaphore: participants of %s: %w", s.Path(), err)
	}
	return p, nil
}

// ParticipantNode is one node in the semaphore's queue, as a listing tells
// it.
type ParticipantNode = recipe.ParticipantNode

// ParticipantNodes returns the semaphore's queue in order, as Participants
// does (the lease holders first, marked Holder), from one listing of the
// directory: each node's name and sequence number, without its data. It
// costs one request however long the queue; Participants reads every node.
// See [recipe.Lock.ParticipantNodes].
func (s *Semaphore) ParticipantNodes(ctx context.Context) ([]ParticipantNode, error) {
	p, err := s.lk.ParticipantNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("semaphore: participant nodes of %s: %w", s.Path(), err)
	}
	return p, nil
}

// Lease is one lease of a semaphore: a node that holds. It watches its node
// and the session, and tells through Done and Err when it is lost. A Lease
// is safe for concurrent use.
type Lease struct {
	s *Semaphore
	h *recipe.Hold
}

// Release gives the lease back by deleting its node, after which a waiter
// may take it; connection loss is retried until ctx ends. The lease is over
// when Release returns, whatever the outcome.
//
// A nil lease or ctx is refused with an error wrapping
// recipe.ErrInvalidArgument and changes nothing: the lease is still held.
//
// If the lease was lost meanwhile, Release deletes nobody's node and
// returns an error wrapping [ErrLost] and the reason. If ctx ends before
// the node is deleted, the deletion goes on in the background while the
// session lives and the error wraps ctx.Err(). A second Release returns an
// error wrapping [ErrNotHeld] without I/O.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("semaphore: release: %w: nil lease", recipe.ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("semaphore: release: %w: nil context", recipe.ErrInvalidArgument)
	}
	err := l.h.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recipe.ErrNotHeld):
		return fmt.Errorf("semaphore: release %s/%s: %w", l.s.Path(), l.h.Node(), ErrNotHeld)
	default:
		return fmt.Errorf("semaphore: release %s/%s: %w", l.s.Path(), l.h.Node(), err)
	}
}

// Done returns a channel that is closed when the lease ends: when it is
// lost (session expired, node deleted by someone else, connection silent
// past the safe window, client closed) or released.
func (l *Lease) Done() <-chan struct{} { return l.h.Done() }

// Context returns a context derived from parent that is cancelled the
// moment the lease is lost or released, its [context.Cause] saying why
// (see recipe.Hold.Context). It costs no goroutine; call the cancel
// function when done.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.h.Context(parent)
}

// Err returns nil while the lease is held and in force. Once Done is
// closed it returns an error wrapping [ErrLost] and the reason if the lease
// was lost, [ErrNotHeld] after a successful Release, or the error of a
// Release that could not delete the node.
func (l *Lease) Err() error {
	err := l.h.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recipe.ErrNotHeld):
		return ErrNotHeld
	default:
		return fmt.Errorf("semaphore %s/%s: %w", l.s.Path(), l.h.Node(), err)
	}
}

// Commit applies ops in one transaction with a check of the lease's node:
// all of them while the lease is held, or none (see [recipe.Hold.Commit]).
// After a successful Release it returns [ErrNotHeld]; once the lease was
// lost, an error wrapping [ErrLost] and the reason.
func (l *Lease) Commit(ctx context.Context, ops ...recipe.Op) ([]recipe.Result, error) {
	res, err := l.h.Commit(ctx, ops...)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, recipe.ErrNotHeld):
		return nil, ErrNotHeld
	}
	return nil, fmt.Errorf("semaphore %s/%s: %w", l.s.Path(), l.h.Node(), err)
}

// Token returns the lease's fencing token: the czxid of its node, unique
// across the whole ensemble and increasing in the order leases are granted.
// Hand it to the systems the holder writes to. With one lease it fences as
// a mutex's token does: a store that rejects tokens lower than one it has
// seen rejects a stale holder. With several leases, holders at the same
// time have different tokens, which tell grants apart but do not order
// concurrent holders.
func (l *Lease) Token() int64 { return l.h.Token() }

// Suspended returns a channel that is closed while the client's session is
// suspended (only with recipe.WithSuspensionTolerance; see
// [recipe.Hold.Suspended] for the exact contract): the holder must stop
// using the lease until [Lease.Resumed] closes, or Done does. After the
// suspension cleared, call it again for the next one.
func (l *Lease) Suspended() <-chan struct{} { return l.h.Suspended() }

// Resumed returns a channel that is closed when the suspension in progress
// is over and the lease was kept; a closed channel while no suspension is
// in progress. If the lease is lost instead, Done closes and this channel
// never does.
func (l *Lease) Resumed() <-chan struct{} { return l.h.Resumed() }

// Node returns the name of the lease's node, a child of the semaphore's
// path.
func (l *Lease) Node() string { return l.h.Node() }
