package multilock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// The multi-lock's sentinel errors. Each also matches the engine's
// sentinel of the same meaning (recipe.ErrNotAcquired, recipe.ErrWouldBlock,
// recipe.ErrNotHeld, recipe.ErrLost) with errors.Is, as in every recipe.
var (
	// ErrNotAcquired is wrapped by every error of a failed Lock or TryLock
	// (except [ErrLocked]), together with the member that failed (a
	// [*MemberError]) and the cause, such as context.DeadlineExceeded.
	ErrNotAcquired error = &sentinel{"multilock: not acquired", recipe.ErrNotAcquired}
	// ErrLocked is wrapped by the error of TryLock when a member is held
	// elsewhere, together with that member's own error (mutex.ErrLocked,
	// rwlock.ErrLocked or semaphore.ErrNoLease).
	ErrLocked error = &sentinel{"multilock: a member is held elsewhere", recipe.ErrWouldBlock}
	// ErrNotHeld is returned by Unlock on a set that holds nothing, with no
	// I/O, and by Err when nothing is held.
	ErrNotHeld error = &sentinel{"multilock: not held", recipe.ErrNotHeld}
	// ErrLost is wrapped by Err (and Unlock) once a member was lost,
	// together with the member and the reason: recipe.ErrSessionExpired,
	// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended or
	// recipe.ErrClosed.
	ErrLost = recipe.ErrLost
)

// sentinel is an error of this package that also matches one of the
// engine's.
type sentinel struct {
	msg  string
	base error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.base }

// MemberError names the member an error is about. The errors of Lock,
// TryLock, Err and Unlock wrap one per member concerned; find it with
// [errors.As].
type MemberError struct {
	// Index is the member's position in the arguments of [New].
	Index int
	// Member is the member itself.
	Member recipe.Acquirer
	// Err is the member's own error.
	Err error
}

// Error returns the member's position, kind and path, and its error.
func (e *MemberError) Error() string {
	return fmt.Sprintf("member %d (%s): %v", e.Index, describe(e.Member), e.Err)
}

// Unwrap returns the member's own error.
func (e *MemberError) Unwrap() error { return e.Err }

// releaseGrace bounds the release of one member once the caller's context
// has ended: the member is released before Lock or Unlock returns if the
// server answers within it, and in the background otherwise.
const releaseGrace = 500 * time.Millisecond

// Set is a handle on a set of locks taken all or none. Make one with [New].
//
// Reentrancy is per set, as for a mutex handle: Lock on a set that holds
// only counts, without I/O, and the members are released when Unlock has
// been called as many times. A Set is safe for concurrent use.
type Set struct {
	members []recipe.Acquirer // in the order given to New
	order   []int             // indices into members, in the order they are taken
	sem     chan struct{}

	mu    sync.Mutex
	cur   *holding
	count int
}

// holding is one acquisition of every member.
type holding struct {
	parts   []held          // by index into Set.members
	ctx     context.Context // ends when any member ends, or at unwatch
	cancels []context.CancelFunc
}

// New returns a set of the given members, taken all or none by
// [Set.Lock]. A member is anything a [recipe.Acquirer] is: a
// [mutex.Mutex], a side of a read/write lock ([rwlock.RWLock.Writer],
// [rwlock.RWLock.Reader]), a [semaphore.Semaphore] (one lease), or a custom
// recipe's [recipe.Lock] or [reentrant.Handle]. It checks its input and does
// no I/O: no member, a nil one, two members of the same kind on one path,
// or two members on one path that cannot be held together give an error
// wrapping recipe.ErrInvalidArgument. A read and the write lock of one path
// may be members together only when they are the two sides of one
// [rwlock.RWLock] handle (the write lock is taken first, then the read
// lock, which the writer's downgrade rule grants at once); other kinds
// never share a path, and such an error also wraps recipe.ErrMismatch.
//
// The members may use different clients.
func New(members ...recipe.Acquirer) (*Set, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("multilock: %w: no members", recipe.ErrInvalidArgument)
	}
	for i, mb := range members {
		if k, isNil := kindOf(mb); isNil {
			return nil, fmt.Errorf("multilock: %w: member %d: a nil %s", recipe.ErrInvalidArgument, i, k)
		}
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ka, _ := kindOf(members[a])
		kb, _ := kindOf(members[b])
		return cmp.Or(cmp.Compare(members[a].Path(), members[b].Path()), cmp.Compare(ka, kb))
	})
	for k := 1; k < len(order); k++ {
		a, b := order[k-1], order[k]
		if members[a].Path() != members[b].Path() {
			continue
		}
		if err := compatible(members[a], members[b]); err != nil {
			return nil, fmt.Errorf("multilock: %w: members %d (%s) and %d (%s): %w",
				recipe.ErrInvalidArgument, a, describe(members[a]), b, describe(members[b]), err)
		}
	}
	return &Set{
		members: slices.Clone(members),
		order:   order,
		sem:     make(chan struct{}, 1),
	}, nil
}

// Members returns the set's members, in the order given to [New].
func (s *Set) Members() []recipe.Acquirer { return slices.Clone(s.members) }

// Lock takes every member, one by one in the global order (by path, then by
// kind: mutex, write, read, lease, other), each waiting in its own line as
// its recipe does, until all are held or ctx ends. A deadline on ctx is the timeout for the whole set. If
// the set already holds, Lock only increments its hold count, without I/O.
//
// On failure nothing is held: the members already taken have been
// released, newest first, and their nodes deleted (each within 500 ms after
// ctx ended, or in the background while the connection is down), the node
// of the member that failed was deleted by its recipe, and the error wraps
// [ErrNotAcquired], a [*MemberError] naming that member, and the cause, such
// as ctx.Err(). A member lost while Lock waits for a later one makes Lock
// fail in the same way, with an error wrapping [ErrLost] and naming it, so
// a set is never returned broken. Lock on a set with a lost member fails
// with an error wrapping [ErrLost]; call Unlock first.
func (s *Set) Lock(ctx context.Context) error { return s.lock(ctx, true) }

// TryLock takes every member if each is free, looking once at each without
// waiting, in the same order as [Set.Lock]. When one is held elsewhere, the
// members already taken are released and the error wraps [ErrLocked] and a
// [*MemberError] naming that member. Other failures are reported as for
// Lock. Reentrant like Lock.
func (s *Set) TryLock(ctx context.Context) error { return s.lock(ctx, false) }

func (s *Set) lock(ctx context.Context, wait bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: %w: nil context", ErrNotAcquired, recipe.ErrInvalidArgument)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	if h := s.cur; h != nil {
		defer s.mu.Unlock()
		if err := s.lost(h); err != nil {
			return fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		s.count++
		return nil
	}
	s.mu.Unlock()

	parts := make([]held, len(s.members))
	mctx := ctx // carries the holds of the members taken so far
	for n, i := range s.order {
		p, next, err := take(mctx, s.members[i], wait)
		if err != nil {
			label := ErrNotAcquired
			if errors.Is(err, recipe.ErrWouldBlock) {
				label = ErrLocked
			}
			err = fmt.Errorf("%w: %w", label, &MemberError{i, s.members[i], err})
			return withReleases(err, s.release(ctx, parts, s.order[:n]))
		}
		parts[i], mctx = p, next
	}
	h := &holding{parts: parts}
	if err := s.lost(h); err != nil {
		// A member taken early was lost while a later one was awaited.
		err = fmt.Errorf("%w: %w", ErrNotAcquired, err)
		return withReleases(err, s.release(ctx, parts, s.order))
	}
	h.watch()
	s.mu.Lock()
	s.cur, s.count = h, 1
	s.mu.Unlock()
	return nil
}

// withReleases adds to a failed acquire's error those of releasing what it
// had taken.
func withReleases(err, rel error) error {
	if rel == nil {
		return err
	}
	return fmt.Errorf("%w (and releasing the members taken: %w)", err, rel)
}

// watch makes h.ctx, which ends as soon as any member's hold does, with
// that member's error as its cause: a chain of the members' contexts, one
// derived from the other, so that no goroutine watches them.
func (h *holding) watch() {
	h.ctx, h.cancels = chain(context.Background(), h.parts)
}

// chain derives from parent the context of each part in turn, and returns
// the last, which ends when parent or any part's hold ends, and the cancel
// functions.
func chain(parent context.Context, parts []held) (context.Context, []context.CancelFunc) {
	ctx := parent
	cancels := make([]context.CancelFunc, 0, len(parts))
	for _, p := range parts {
		var cancel context.CancelFunc
		ctx, cancel = p.Context(ctx)
		cancels = append(cancels, cancel)
	}
	return ctx, cancels
}

// unwatch ends h.ctx, and with it Done.
func (h *holding) unwatch() {
	for _, cancel := range slices.Backward(h.cancels) {
		cancel()
	}
}

// lost returns the errors of every member of h not in force, joined, or
// nil.
func (s *Set) lost(h *holding) error {
	var errs []error
	for i, p := range h.parts {
		if err := p.Err(); err != nil {
			errs = append(errs, &MemberError{i, s.members[i], err})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("multilock: %w", errors.Join(errs...))
}

// release releases parts[i] for each i of idx, last first, and returns
// their errors joined. A member whose release starts after ctx ended gets
// a context of its own, bounded by releaseGrace.
func (s *Set) release(ctx context.Context, parts []held, idx []int) error {
	var errs []error
	for k := len(idx) - 1; k >= 0; k-- {
		i := idx[k]
		if err := releaseOne(ctx, parts[i]); err != nil {
			errs = append(errs, &MemberError{i, s.members[i], err})
		}
	}
	return errors.Join(errs...)
}

func releaseOne(ctx context.Context, p held) error {
	if ctx.Err() != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
		defer cancel()
		ctx = gctx
	}
	return p.Release(ctx)
}

// Unlock undoes one Lock. When the hold count reaches zero it releases
// every member, last taken first, and returns every member's error, joined
// (each a [*MemberError]); the set holds nothing afterwards, whatever the
// outcome, and its Done channel is closed before the first member is
// released. On a set that holds nothing it returns [ErrNotHeld] without I/O.
//
// A nil ctx is refused with an error wrapping recipe.ErrInvalidArgument and
// changes nothing.
//
// A member that was lost is not released (nobody's node is deleted) and
// its error wraps [ErrLost] and the reason. If ctx ends before a member is
// released, that member is still released within 500 ms, or in the
// background while its session lives, and its error wraps ctx.Err().
func (s *Set) Unlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("multilock: unlock: %w: nil context", recipe.ErrInvalidArgument)
	}
	select {
	case s.sem <- struct{}{}:
	default:
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("multilock: unlock: %w", ctx.Err())
		}
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	h := s.cur
	if h == nil {
		s.mu.Unlock()
		return ErrNotHeld
	}
	s.count--
	if s.count > 0 {
		s.mu.Unlock()
		return nil
	}
	s.cur = nil
	s.mu.Unlock()
	h.unwatch()
	if err := s.release(ctx, h.parts, s.order); err != nil {
		return fmt.Errorf("multilock: unlock: %w", err)
	}
	return nil
}

// current returns the set's holding, if any.
func (s *Set) current() *holding {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel that is closed when any member of the set is lost
// (session expired, node deleted by someone else, connection silent past
// the safe window, client closed) or the set is unlocked. When nothing is
// held it returns a closed channel.
func (s *Set) Done() <-chan struct{} {
	if h := s.current(); h != nil {
		return h.ctx.Done()
	}
	return closedChan
}

// Context returns a context derived from parent that is cancelled the
// moment any member of the set is lost, or the set is unlocked; its
// [context.Cause] is then the lost member's error (wrapping [ErrLost] and
// the reason). When nothing is held, it is cancelled at once with
// [ErrNotHeld] as its cause. It is a chain of the members' contexts and
// costs no goroutine; call the cancel function when done.
func (s *Set) Context(parent context.Context) (context.Context, context.CancelFunc) {
	h := s.current()
	if h == nil {
		ctx, cancel := context.WithCancelCause(parent)
		cancel(ErrNotHeld)
		return ctx, func() {}
	}
	ctx, cancels := chain(parent, h.parts)
	return ctx, func() {
		for _, cancel := range slices.Backward(cancels) {
			cancel()
		}
	}
}

// Err returns nil while every member is held and in force; once a member
// is lost, an error wrapping [ErrLost], the reason, and a [*MemberError]
// for each member lost; [ErrNotHeld] when the set holds nothing.
func (s *Set) Err() error {
	h := s.current()
	if h == nil {
		return ErrNotHeld
	}
	return s.lost(h)
}

// Tokens returns the fencing token of each member (the czxid of the node it
// rests on, see each recipe's Token) in the order the members were given
// to [New], or nil when nothing is held.
func (s *Set) Tokens() []int64 {
	h := s.current()
	if h == nil {
		return nil
	}
	out := make([]int64, len(h.parts))
	for i, p := range h.parts {
		out[i] = p.token
	}
	return out
}
