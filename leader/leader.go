package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/reentrant"
)

// LockName is the name part of the election's nodes, the one Curator's
// LeaderLatch gives its nodes.
const LockName = "latch-"

// The election's sentinel errors. ErrNotElected, ErrLeaderElsewhere,
// ErrNotLeader and ErrLost also match the engine's sentinel of the same
// meaning (recipe.ErrNotAcquired, recipe.ErrWouldBlock, recipe.ErrNotHeld,
// recipe.ErrLost) with errors.Is, as in every recipe.
var (
	// ErrNotElected is wrapped by every error of a failed Campaign or
	// TryCampaign, together with the cause (for a timeout,
	// context.DeadlineExceeded).
	ErrNotElected = recipe.Sentinel("leader: not elected", recipe.ErrNotAcquired)
	// ErrLeaderElsewhere is returned by TryCampaign when another
	// participant leads or is in line first.
	ErrLeaderElsewhere = recipe.Sentinel("leader: another participant leads", recipe.ErrWouldBlock)
	// ErrNotLeader is returned by Resign, with no I/O, and by Err when the
	// handle has no term: it never campaigned, or it resigned.
	ErrNotLeader = recipe.Sentinel("leader: not the leader", recipe.ErrNotHeld)
	// ErrNoLeader is wrapped by the error of Leader when nobody campaigns
	// on the path.
	ErrNoLeader = errors.New("leader: no leader")
	// ErrResigned is the cause (see [context.Cause]) of the cancellation of
	// a term's context when the term ended by [Election.Resign].
	ErrResigned = errors.New("leader: resigned")
	// ErrLost is wrapped by Err (and Resign) once leadership was lost,
	// together with the reason: recipe.ErrSessionExpired,
	// recipe.ErrNodeDeleted, recipe.ErrConnectionSuspended or
	// recipe.ErrClosed. It is also the cause of the cancellation of a
	// term's context in [Election.Run] when leadership is lost.
	ErrLost = recipe.ErrLost
)

// Option configures an Election.
type Option func(*options)

type options struct {
	data       []byte
	log        *slog.Logger
	logSet     bool
	maxHold    time.Duration
	mutexNodes bool
}

// WithMutexNodes makes the election queue with the mutex's nodes
// ("_c_<uuid>-lock-<sequence>", [MutexLockName]) instead of LeaderLatch's
// "latch-" nodes: the layout of a singleton built on a lock, such as
// go-zookeeper's zk.Lock held for the life of a process, Curator's
// LeaderSelector (which takes an InterProcessMutex) or a mutex.Mutex,
// which then exclude the election's participants on the same path. It is
// how such a singleton is replaced in place by Run, one process at a
// time (docs/migrating.md). The election keeps its rules: the first node
// in line leads, and nodes of other kinds on the path fail a campaign
// with recipe.ErrMismatch. Every participant of one election must use
// the same layout. Default: "latch-" nodes.
func WithMutexNodes() Option {
	return func(o *options) { o.mutexNodes = true }
}

// MutexLockName is the name part of the election's nodes made
// [WithMutexNodes]: the mutex's, go-zookeeper's zk.Lock's and Curator's
// InterProcessMutex's lock name.
const MutexLockName = "lock-"

// mutexQueue holds the lock names of the mutex's queue (ours and
// kazoo's), which an election made WithMutexNodes queues with.
var mutexQueue = func() []string {
	k, _ := driver.KindNamed(MutexLockName)
	return k.Queue()
}()

// WithMaxHold bounds how long leadership (one term) may be held: a hold still in force
// after d is ended by the library, which deletes its node (the next in line
// leads); its Done closes and Err wraps [ErrLost] and
// recipe.ErrMaxHoldExceeded. It is for processes that hang while holding;
// a hung process that wakes later may still act, so hand the fencing token
// to what it writes. Default: no limit.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

// WithData sets the participant's identity, stored as the data of its node
// and reported to every observer by [Election.Leader],
// [Election.Participants] and [Election.Observe] (Participant.Data). It
// must not be empty. Default: the host name and pid ("host:1234"), as for
// every recipe.
func WithData(data []byte) Option {
	return func(o *options) { o.data = append([]byte(nil), data...) }
}

// WithLogger sets the logger to which [Election.Run] reports terms (at
// info level), errors returned by its function and failed campaigns (at
// warn level). Default: the client's logger (see recipe.WithLogger), which
// is silent unless set.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log, o.logSet = l, true }
}

// Participant is one participant of an election; the first in queue order
// (marked Holder) is the leader. Its Data is the identity set with
// [WithData], and its Token the fencing token of its term while it leads.
type Participant = recipe.Participant

// ParticipantNode is one participant in line, as a listing tells it: the
// first (marked Holder) is the leader.
type ParticipantNode = recipe.ParticipantNode

// Election is one participant's handle on a leader election at a path,
// which can also watch the election without taking part ([Election.Leader],
// [Election.Participants], [Election.Observe]).
//
// A participant holds at most one node, so at most one term at a time:
// Campaign on a handle that leads does nothing. An Election is safe for
// concurrent use; processes (or goroutines) that must compete with each
// other need handles of their own.
type Election struct {
	lk  *recipe.Lock
	c   *recipe.Client
	id  string // the node data, as a string
	log *slog.Logger

	turn    reentrant.Turn // serialises campaigns on this handle
	view    reentrant.View // of the current term
	running atomic.Bool    // Run is in progress

	mu         sync.Mutex
	hold       *recipe.Hold
	termCancel context.CancelCauseFunc // cancels Run's term context
}

// New returns a handle on the election at path, a ZooKeeper path whose
// directory node is created (as a container) when the first participant
// campaigns. It checks its input and does no I/O: a nil client, an empty
// id or a nil option give an error wrapping recipe.ErrInvalidArgument, a
// bad path one wrapping recipe.ErrInvalidPath.
func New(c *recipe.Client, path string, opts ...Option) (*Election, error) {
	o := options{data: recipe.DefaultNodeData(), log: slog.New(slog.DiscardHandler)}
	if c != nil {
		o.log = c.Logger()
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("leader: %w: nil option", recipe.ErrInvalidArgument)
		}
		opt(&o)
	}
	if len(o.data) == 0 {
		return nil, fmt.Errorf("leader: %w: empty data (identity)", recipe.ErrInvalidArgument)
	}
	if o.log == nil {
		return nil, fmt.Errorf("leader: %w: nil logger", recipe.ErrInvalidArgument)
	}
	name, queue := LockName, []string(nil)
	if o.mutexNodes {
		name, queue = MutexLockName, mutexQueue
	}
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:      "leader",
		LockName:    name,
		Queue:       queue,
		NotAcquired: ErrNotElected,
		Driver:      driver.Mutex(),
		MaxHold:     o.maxHold,
	}, o.data)
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	e := &Election{
		lk:  lk,
		c:   c,
		id:  string(o.data),
		log: o.log.With("election", path, "id", string(o.data)),
	}
	e.view = reentrant.NewView(e.current, ErrNotLeader, "leader "+path)
	return e, nil
}

// Path returns the election's path.
func (e *Election) Path() string { return e.lk.Path() }

// ID returns this participant's identity (see [WithData]) as a string.
func (e *Election) ID() string { return e.id }

// Campaign joins the election and waits until this participant leads or
// ctx ends. Participants lead in the order they joined; a deadline on ctx
// is the timeout. On a handle that leads, Campaign does nothing and returns
// nil. A handle whose term was lost starts a new campaign (the lost term is
// over; [Election.Err] no longer reports it).
//
// While leading, [Election.Done] is the loss signal and [Election.Token]
// the term's fencing token. Leadership lasts until [Election.Resign] or
// until it is lost: session expiry, the node deleted by someone else, the
// client closed, or the connection silent long enough that the server might
// expire the session.
//
// On failure the handle does not lead, its node has been deleted (or its
// deletion goes on in the background while the connection is down), and
// the error wraps [ErrNotElected] and the cause, such as ctx.Err().
func (e *Election) Campaign(ctx context.Context) error {
	_, err := e.campaign(ctx, true)
	return err
}

// TryCampaign is [Election.Campaign] without the wait: it joins the
// election and leads at once if nobody else leads or is in line first;
// otherwise it leaves again (its node is deleted) and returns an error
// wrapping [ErrLeaderElsewhere].
func (e *Election) TryCampaign(ctx context.Context) error {
	_, err := e.campaign(ctx, false)
	return err
}

// campaign is Campaign (or, with wait false, TryCampaign) returning the
// term's hold.
func (e *Election) campaign(ctx context.Context, wait bool) (*recipe.Hold, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: %w: nil context", ErrNotElected, recipe.ErrInvalidArgument)
	}
	if err := e.turn.Take(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotElected, e.Path(), err)
	}
	defer e.turn.Give()
	e.mu.Lock()
	if h := e.hold; h != nil {
		if h.Err() == nil {
			e.mu.Unlock()
			return h, nil
		}
		// The term was lost: end it (no I/O; the engine already deletes
		// the node if the session may still own it) and campaign anew.
		e.hold = nil
		e.mu.Unlock()
		_ = h.Release(context.Background())
	} else {
		e.mu.Unlock()
	}
	acquire := e.lk.Acquire
	if !wait {
		acquire = e.lk.TryAcquire
	}
	h, err := acquire(ctx)
	if errors.Is(err, recipe.ErrWouldBlock) {
		return nil, fmt.Errorf("%w: %s", ErrLeaderElsewhere, e.Path())
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.hold = h
	e.mu.Unlock()
	return h, nil
}

// Resign ends this participant's term: it deletes its node, after which
// the next participant in line leads. In [Election.Run] the term's context
// is cancelled (with cause [ErrResigned]) before the node is deleted, and
// Run campaigns again. Connection loss is retried under the client's retry
// policy until ctx ends; if the node cannot be deleted by then, its
// deletion goes on in the background for as long as the session lives,
// and the error wraps ctx.Err().
//
// The handle does not lead when Resign returns, whatever the outcome, but
// for a nil ctx, which is refused with an error wrapping
// recipe.ErrInvalidArgument and changes nothing. If
// leadership was already lost, Resign deletes nobody's node and returns an
// error wrapping [ErrLost] and the reason. On a handle without a term
// (including one whose Campaign is still waiting) it returns
// [ErrNotLeader] without I/O.
func (e *Election) Resign(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("leader: resign: %w: nil context", recipe.ErrInvalidArgument)
	}
	h := e.current()
	if h == nil {
		return ErrNotLeader
	}
	return e.resign(ctx, h)
}

// resign ends the term of h: if it is still the handle's term, the handle
// no longer leads and Run's term context is cancelled; then h's node is
// deleted.
func (e *Election) resign(ctx context.Context, h *recipe.Hold) error {
	e.mu.Lock()
	var cancel context.CancelCauseFunc
	if e.hold == h {
		cancel = e.termCancel
		e.hold, e.termCancel = nil, nil
	}
	e.mu.Unlock()
	if cancel != nil {
		cancel(ErrResigned)
	}
	err := h.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recipe.ErrNotHeld):
		return ErrNotLeader
	}
	return fmt.Errorf("leader: resign %s: %w", e.Path(), err)
}

// resignTerm ends the term of h if it is still the handle's term.
func (e *Election) resignTerm(ctx context.Context, h *recipe.Hold) error {
	e.mu.Lock()
	if e.hold != h {
		e.mu.Unlock()
		return nil
	}
	e.hold, e.termCancel = nil, nil
	e.mu.Unlock()
	return h.Release(ctx)
}

// Take is [Election.Campaign] (wait) or [Election.TryCampaign] returning
// the term as a [recipe.Held], so that an Election is a
// [recipe.Acquirer]. On a handle that leads it returns the current term.
// The term's Release resigns that term, as [Election.Resign] does, and
// no later one: once the term is over it returns [ErrNotLeader] (or the
// loss) without touching the handle's next term. Its Done, Err, Token and
// Node are those of that term; it also has Suspended and Resumed.
func (e *Election) Take(ctx context.Context, wait bool) (recipe.Held, error) {
	h, err := e.campaign(ctx, wait)
	if err != nil {
		return nil, err
	}
	return &term{Hold: h, e: e}, nil
}

// term is one term of leadership, as Take returns it: its hold, with the
// election's sentinels and a Release that resigns it.
type term struct {
	*recipe.Hold
	e *Election
}

func (t *term) Err() error {
	err := t.Hold.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recipe.ErrNotHeld):
		return ErrNotLeader
	}
	return fmt.Errorf("leader %s: %w", t.e.Path(), err)
}

func (t *term) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("leader: resign: %w: nil context", recipe.ErrInvalidArgument)
	}
	return t.e.resign(ctx, t.Hold)
}

// current returns the hold of the current term, if any.
func (e *Election) current() *recipe.Hold {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hold
}

// IsLeader reports whether this participant leads now: it won a campaign,
// has not resigned, and has not been told of a loss. Decisions that must
// not be taken by two leaders need the fencing token too (see the package
// documentation).
func (e *Election) IsLeader() bool {
	h := e.current()
	return h != nil && h.Err() == nil
}

// Context returns a context derived from parent that is cancelled the
// moment the current term ends, its [context.Cause] saying why (an error
// wrapping [ErrLost] and the reason, or recipe.ErrNotHeld once resigned);
// without a term, a context cancelled at once with [ErrNotLeader]. It is
// the mechanism of Run's term context, and costs no goroutine; call the
// cancel function when done.
func (e *Election) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return e.view.Context(parent)
}

// Done returns a channel that is closed when the current term ends:
// leadership lost (session expired, node deleted by someone else, client
// closed, connection silent past the safe window) or resigned. Without a
// term it returns a closed channel.
func (e *Election) Done() <-chan struct{} {
	return e.view.Done()
}

// Err returns nil while this participant leads; an error wrapping [ErrLost]
// and the reason once its term was lost; [ErrNotLeader] when it has no
// term (it never led, or it resigned).
func (e *Election) Err() error {
	return e.view.Err()
}

// Token returns the fencing token of the current term (the czxid of the
// participant's node, strictly increasing from one term to the next across
// the whole ensemble), or 0 without a term. After a loss it still returns
// the lost term's token, until the next Campaign or Resign. Hand it to
// every system the leader writes to, and have them reject tokens lower than
// one they have seen.
func (e *Election) Token() int64 {
	return e.view.Token()
}

// Suspended returns a channel that is closed while the client's session is
// suspended (only with recipe.WithSuspensionTolerance; see
// [recipe.Hold.Suspended] for the exact contract): the leader must stop
// acting as leader until [Election.Resumed] closes, or Done does. In that
// mode a suspension does not end the term, and the context [Election.Run]
// hands to its function is not cancelled by it: the function must watch
// Suspended itself. After the suspension cleared, call it again for the
// next one. nil (never ready) without a term.
func (e *Election) Suspended() <-chan struct{} {
	return e.view.Suspended()
}

// Resumed returns a channel that is closed when the suspension in progress
// is over and the term goes on; a closed channel while no suspension is in
// progress; nil (never ready) without a term. If leadership is lost
// instead, Done closes and this channel never does.
func (e *Election) Resumed() <-chan struct{} {
	return e.view.Resumed()
}

// Node returns the name of the node of the current term, "" without one.
func (e *Election) Node() string {
	return e.view.Node()
}

// Leader returns the current leader: the first participant in line. It
// works on any handle, whether it campaigns or not. When nobody campaigns
// the error wraps [ErrNoLeader].
//
// The answer is ZooKeeper's view at the time of the read: the participant
// it names may not have learned yet that it leads, or may have been told
// it lost leadership while its node waits for the server to expire its
// session.
func (e *Election) Leader(ctx context.Context) (Participant, error) {
	ps, err := e.Participants(ctx)
	if err != nil {
		return Participant{}, err
	}
	if len(ps) == 0 {
		return Participant{}, fmt.Errorf("%w at %s", ErrNoLeader, e.Path())
	}
	return ps[0], nil
}

// Participants returns every participant in line, the leader first, then
// the others in the order in which they will lead. It works on any handle,
// whether it campaigns or not.
func (e *Election) Participants(ctx context.Context) ([]Participant, error) {
	ps, err := e.lk.Participants(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: participants of %s: %w", e.Path(), err)
	}
	return ps, nil
}

// ParticipantNodes returns every participant in line, as Participants does
// (the leader first, marked Holder), from one listing of the directory:
// each node's name and sequence number, without its data. It costs one
// request however long the line; Participants reads every node. See
// [recipe.Lock.ParticipantNodes]. It works on any handle, whether it
// campaigns or not.
func (e *Election) ParticipantNodes(ctx context.Context) ([]ParticipantNode, error) {
	ps, err := e.lk.ParticipantNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: participant nodes of %s: %w", e.Path(), err)
	}
	return ps, nil
}
