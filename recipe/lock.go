package recipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// LockSpec describes one kind of contender in a lock directory: the name of
// its nodes and the driver that decides when it holds.
type LockSpec struct {
	// Recipe names the primitive in spans, metrics and logs, e.g. "mutex";
	// the acquire span is Recipe + ".acquire". Default: "lock".
	Recipe string
	// LockName is the name part of our nodes, e.g. "lock-"; ZooKeeper
	// appends the sequence number. It must not contain "/".
	LockName string
	// Queue lists every lock name whose nodes take part in the directory's
	// queue. Nil means just LockName; a read/write lock lists both names,
	// the mutex "lock-" and kazoo's "__lock__". Nodes of the library's
	// other kinds (see [driver.KindOf]) found ahead of ours, and foreign or
	// unknown lock nodes ([driver.Classify]) found anywhere, make an
	// acquire fail with [ErrMismatch].
	Queue []string
	// Driver decides, from the sorted queue, whether our node holds and
	// which nodes to watch when it does not. See [driver.Driver] for the
	// rules it must keep.
	Driver driver.Driver
	// DirData, when set, is stored in the lock directory when the engine
	// creates it, and every acquire checks, in the same round trip as its
	// first listing, that the directory carries it. A directory without
	// data (made by someone else) gets it, with a set conditional on the
	// data version read, so that of two clients with other DirData only
	// the first records its own. A mismatch fails the acquire with
	// [ErrMismatch].
	// The semaphore keeps its number of leases there.
	DirData []byte
	// DirMismatch, when set, is wrapped (with [ErrMismatch]) by the error
	// of an acquire that finds other DirData in the directory, so that a
	// recipe can tell its own parameters differing (the semaphore's
	// ErrMaxLeasesMismatch) from another kind of lock in the directory.
	DirMismatch error
	// NotAcquired, when set, labels the error of every failed acquire in
	// place of [ErrNotAcquired]: the recipe's own sentinel, made with
	// [Sentinel] to match ErrNotAcquired, so the error names the recipe
	// once ("mutex: not acquired: /p: context deadline exceeded").
	NotAcquired error
	// WouldBlock, when set, labels the error of a reentrant.Handle's Take that
	// finds the lock held elsewhere, in place of [ErrWouldBlock]: the
	// recipe's own sentinel, made with [Sentinel] to match ErrWouldBlock.
	WouldBlock error
	// NotHeld, when set, is what a reentrant.Handle returns in place of
	// [ErrNotHeld] when it holds nothing: the recipe's own sentinel, made
	// with [Sentinel] to match ErrNotHeld.
	NotHeld error
	// Revocable makes every hold watch its node's data for the revoke
	// marker: [Hold.Revoked] closes when someone asks the holder to let go
	// ([Lock.Revoke], or Curator's Revoker).
	Revocable bool
	// MaxHold, when positive, bounds how long a hold may last: after it,
	// the engine deletes the node and the hold ends with [ErrLost] and
	// [ErrMaxHoldExceeded], for processes that hang while holding. The
	// holder is told through Done and Err like for any loss, and must use
	// fencing tokens: a hung holder that wakes later may still act.
	MaxHold time.Duration
}

// Lock is the engine behind every recipe: it enqueues a protected ephemeral
// sequential node in a directory, waits herd-free until its driver says the
// node holds, and hands out a [Hold]. A Lock is immutable and safe for
// concurrent use; each acquire is independent (reentrancy is the recipes'
// business).
type Lock struct {
	c    *Client
	dir  string
	data []byte
	// *lockKind is what the Lock shares with every other of the same
	// LockSpec: a recipe makes a Lock per handle, and a queued waiter
	// keeps its handle.
	*lockKind

	// busy is set when the last acquire found the lock taken. An acquire
	// then sends its listing after its create's reply rather than behind
	// the create: it will wait for a predecessor anyway, and a burst of
	// requests from every re-queuing holder slows the server's answers to
	// the waiters being handed the lock.
	busy atomic.Bool
}

// errDirData is DirMismatch's default.
var errDirData = errors.New("other directory data")

// DefaultNodeData is the data the recipes store in their nodes unless given
// some: "<host name>:<pid>", so an operator listing a lock's queue sees
// which process holds or waits.
func DefaultNodeData() []byte {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	b := append(append(make([]byte, 0, len(host)+12), host...), ':')
	return strconv.AppendInt(b, int64(os.Getpid()), 10)
}

// NewLock validates its input, without I/O, and returns an engine for the
// lock directory path. data is stored in every node this Lock creates (nil:
// none; recipes default to [DefaultNodeData]).
func NewLock(c *Client, path string, spec LockSpec, data []byte) (*Lock, error) {
	if err := checkLock(c, path, &spec, data); err != nil {
		return nil, err
	}
	k := kindOf(&spec, data)
	if !bytes.Equal(data, k.data) {
		data = append([]byte(nil), data...)
	} else {
		data = k.data // the same node data as the last Lock of the kind: shared, as neither changes it
	}
	return &Lock{c: c, dir: path, data: data, lockKind: k}, nil
}

// checkLock is NewLock's input check, a list of rules.
func checkLock(c *Client, path string, spec *LockSpec, data []byte) error {
	if c == nil {
		return fmt.Errorf("%w: nil client", ErrInvalidArgument)
	}
	if err := ValidatePath(path); err != nil {
		return err
	}
	if spec.LockName == "" || strings.ContainsRune(spec.LockName, '/') {
		return fmt.Errorf("%w: lock name %q", ErrInvalidArgument, spec.LockName)
	}
	if spec.Driver == nil {
		return fmt.Errorf("%w: nil driver", ErrInvalidArgument)
	}
	if spec.MaxHold < 0 {
		return fmt.Errorf("%w: negative maximum hold time %v", ErrInvalidArgument, spec.MaxHold)
	}
	return c.lockFits(path, spec.LockName, spec.DirData, data)
}

// lockFits checks, by their encoded size, that the requests of a lock
// fit in a request to the servers: the create of its nodes (path and
// data) and of its directory (with dirData). The error names the part
// that does not fit.
func (c *Client) lockFits(path, lockName string, dirData, data []byte) error {
	node := path + "/" + protectedPrefix + "00000000-0000-0000-0000-000000000000-" + lockName
	sizes := [...]int{
		frameLen(createLen(node, nil, c.cfg.acl)),
		frameLen(createLen(node, data, c.cfg.acl)),
		frameLen(createLen(path, dirData, c.cfg.acl)),
	}
	for i, size := range sizes {
		if size > c.cfg.maxPacket {
			return c.lockTooLarge(i, path, len(dirData), len(data), size)
		}
	}
	return nil
}

// lockTooLarge is lockFits' error for its request i, of size bytes; it is
// made apart, so that a handle made in a goroutine that later waits in
// line does not grow that goroutine's stack for a message it never needs.
//
//go:noinline
func (c *Client) lockTooLarge(i int, path string, dirData, data, size int) error {
	what := [...]string{
		fmt.Sprintf("lock path of %d bytes (the create of its nodes, without data)", len(path)),
		fmt.Sprintf("node data of %d bytes (the create of a node at %s)", data, path),
		fmt.Sprintf("directory data of %d bytes (the create of %s)", dirData, path),
	}[i]
	return c.tooLarge(what, size)
}

// lockKind is a LockSpec with its defaults filled in, and what follows
// from it.
type lockKind struct {
	spec       LockSpec
	queue      []string // spec.Queue, or just LockName
	data       []byte   // the node data of the first Lock of the kind
	*recipeTel          // names and attribute sets of the recipe's telemetry
}

// newKind fills in spec's defaults and copies what the caller could
// change; data is the node data of its first Lock.
func newKind(s *LockSpec, data []byte) *lockKind {
	spec := s.withDefaults()
	spec.Queue = slices.Clone(spec.Queue)
	spec.DirData = slices.Clone(spec.DirData)
	q := spec.Queue
	if len(q) == 0 {
		q = []string{spec.LockName}
	}
	return &lockKind{spec: spec, queue: q, data: bytes.Clone(data), recipeTel: telemetryOf(spec.Recipe)}
}

// kindKey is a LockSpec as a map key: equal keys, equal specs.
type kindKey struct {
	recipe, lockName, queue, dirData              string
	driver                                        driver.Driver
	dirMismatch, notAcquired, wouldBlock, notHeld error
	revocable                                     bool
	dirDataSet                                    bool // DirData is not nil (even if empty)
	maxHold                                       time.Duration
}

// queueKey encodes a queue's lock names, each after its length, so that
// no two queues have the same key.
func queueKey(q []string) string {
	var b []byte
	for _, n := range q {
		b = strconv.AppendInt(b, int64(len(n)), 10)
		b = append(append(b, ':'), n...)
	}
	return string(b)
}

// kinds interns the kinds of lock (kindKey -> *lockKind), so that the
// Locks of one LockSpec share one; at most maxKinds of them.
var (
	kinds     sync.Map
	kindCount atomic.Int32
)

const maxKinds = 1024

// kindOf returns the shared kind of spec (data: the node data of the
// Lock that asks, kept by a new kind), or a kind of its own when spec
// cannot be a map key (a driver or sentinel of a type that does not
// compare) or there are too many kinds already.
func kindOf(spec *LockSpec, data []byte) (k *lockKind) {
	key := kindKey{recipe: spec.Recipe, lockName: spec.LockName, queue: queueKey(spec.Queue),
		dirData: string(spec.DirData), driver: spec.Driver, dirMismatch: spec.DirMismatch,
		notAcquired: spec.NotAcquired, wouldBlock: spec.WouldBlock, notHeld: spec.NotHeld,
		revocable: spec.Revocable, dirDataSet: spec.DirData != nil, maxHold: spec.MaxHold}
	if !allComparable(spec.Driver, spec.DirMismatch, spec.NotAcquired, spec.WouldBlock, spec.NotHeld) {
		return newKind(spec, data)
	}
	defer func() {
		if recover() != nil { // a value inside a comparable type that is not
			k = newKind(spec, data)
		}
	}()
	if got, ok := kinds.Load(key); ok {
		return got.(*lockKind)
	}
	k = newKind(spec, data)
	if kindCount.Load() >= maxKinds {
		return k
	}
	got, loaded := kinds.LoadOrStore(key, k)
	if !loaded {
		kindCount.Add(1)
	}
	return got.(*lockKind)
}

// allComparable reports whether every value is nil or of a type that
// compares.
func allComparable(vs ...any) bool {
	for _, v := range vs {
		if t := reflect.TypeOf(v); t != nil && !t.Comparable() {
			return false
		}
	}
	return true
}

// withDefaults fills in the name and the sentinels left unset.
func (spec LockSpec) withDefaults() LockSpec {
	if spec.Recipe == "" {
		spec.Recipe = "lock"
	}
	if spec.NotAcquired == nil {
		spec.NotAcquired = ErrNotAcquired
	}
	if spec.WouldBlock == nil {
		spec.WouldBlock = ErrWouldBlock
	}
	if spec.NotHeld == nil {
		spec.NotHeld = ErrNotHeld
	}
	if spec.DirMismatch == nil {
		spec.DirMismatch = errDirData
	}
	return spec
}

// acquireNote counts and logs an acquire's retries.
func (l *Lock) acquireNote(err error, wait time.Duration) { l.c.retried(l.spanName, err, wait) }

// releaseNote counts and logs a release's retries.
func (l *Lock) releaseNote(err error, wait time.Duration) { l.c.retried(l.releaseSpan, err, wait) }

// Path returns the lock directory.
func (l *Lock) Path() string { return l.dir }

// Spec returns the lock's LockSpec with its defaults filled in (Recipe,
// Queue and the sentinels), for a handle built on the lock (see package
// reentrant).
func (l *Lock) Spec() LockSpec {
	s := l.spec
	s.Queue = append([]string(nil), l.queue...)
	s.DirData = append([]byte(nil), s.DirData...)
	return s
}

// Acquire enqueues a node and waits until the driver says it holds, or ctx
// ends.
//
// Connection-loss errors are retried under the client's retry policy,
// keeping the same node: a create whose reply was lost is found again by its
// UUID rather than made twice. If the session expires meanwhile, a new node
// is enqueued in the new session.
//
// On failure nothing is held: the node is deleted before Acquire returns, or
// (if the connection is down) in the background for as long as the session
// that owns it lives. The error wraps [ErrNotAcquired] and the cause:
// ctx.Err() when ctx ended, [ErrMismatch] when the directory is used by
// another kind of lock, [ErrPermission], ...
func (l *Lock) Acquire(ctx context.Context) (*Hold, error) {
	// Not through acquireOne: one frame less on a queued waiter's stack.
	hs, err := l.acquire(ctx, 1, false)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// TryAcquire is [Lock.Acquire] without the wait: it enqueues, looks once,
// and either holds or deletes its node again and returns an error wrapping
// [ErrWouldBlock] (and [ErrNotAcquired]).
func (l *Lock) TryAcquire(ctx context.Context) (*Hold, error) {
	return l.acquireOne(ctx, true)
}

func (l *Lock) acquireOne(ctx context.Context, try bool) (*Hold, error) {
	hs, err := l.acquire(ctx, 1, try)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// AcquireN enqueues n nodes in one transaction, so they take n consecutive
// places in the queue with no other client's node between them, and waits
// until all of them hold. It is all or nothing: on failure none is held and
// every node is cleaned up as for [Lock.Acquire]. With the N-lease driver,
// n must not exceed N or it waits until ctx ends; recipes check that first.
// A transaction that would not fit in one request to the servers (see
// [WithMaxPacket]) is refused before any I/O with [ErrInvalidArgument].
func (l *Lock) AcquireN(ctx context.Context, n int) ([]*Hold, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: n = %d, must be at least 1", ErrInvalidArgument, n)
	}
	if err := l.fitsN(n); err != nil {
		return nil, &notAcquired{l.spec.NotAcquired, l.dir, err}
	}
	return l.acquire(ctx, n, false)
}

// fitsN checks that the transaction that enqueues n nodes fits in a
// request to the servers.
func (l *Lock) fitsN(n int) error {
	if n == 1 {
		return nil // checked by NewLock
	}
	return l.c.tooLarge(fmt.Sprintf("AcquireN(%d) at %s (%d creates in one transaction)", n, l.dir, n), l.nSize(n))
}

// nSize is the length of the frame of the transaction that enqueues n
// nodes.
func (l *Lock) nSize(n int) int {
	node := createLen(l.dir+"/"+protectedPrefix+"00000000-0000-0000-0000-000000000000-"+l.spec.LockName, l.data, l.c.cfg.acl)
	return frameLen(multiHeaderLen + n*(multiHeaderLen+node))
}

func (l *Lock) acquire(ctx context.Context, n int, try bool) ([]*Hold, error) {
	if ctx == nil {
		return nil, l.nilContext()
	}
	// The telemetry is begun and ended in functions of their own, so
	// that this frame, which a queued waiter keeps on its stack, holds
	// none of their state.
	start := time.Now()
	ctx, span := l.beginAcquire(ctx, n)
	g := newGroup(l, n, try, span)
	err := g.run(ctx)
	return l.endAcquire(ctx, g, err, start)
}

// nilContext is the error of an acquire given a nil context.
//
//go:noinline
func (l *Lock) nilContext() error {
	return &notAcquired{l.spec.NotAcquired, l.dir, fmt.Errorf("%w: nil context", ErrInvalidArgument)}
}

// beginAcquire starts the span of an acquire of n nodes and counts them
// as waiters.
//
//go:noinline
func (l *Lock) beginAcquire(ctx context.Context, n int) (context.Context, trace.Span) {
	ctx, span := l.startSpan(ctx, l.spanName)
	if span.IsRecording() { // attributes are built only for a span that keeps them
		span.SetAttributes(telemetry.AttrRecipe.String(l.spec.Recipe), telemetry.AttrPath.String(l.dir))
		if n > 1 {
			span.SetAttributes(telemetry.AttrCount.Int(n))
		}
	}
	l.c.ins.waiters.Add(ctx, int64(n), l.attrs)
	return ctx, span
}

// endAcquire records the outcome err of the acquire of g that began at
// start, ends its span (the attempts'), and returns its holds or its error (abandoning
// its nodes).
//
//go:noinline
func (l *Lock) endAcquire(ctx context.Context, g group, err error, start time.Time) ([]*Hold, error) {
	span := g[0].span
	defer span.End()
	l.c.ins.waiters.Add(ctx, -int64(len(g)), l.attrs)
	l.busy.Store(g.foundTaken() || errors.Is(err, ErrWouldBlock))
	waited := time.Since(start)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrWaitMs.Int64(waited.Milliseconds()))
	}
	if err == nil {
		hs := g.holds()
		l.recordAcquired(ctx, span, hs, waited)
		return hs, nil
	}
	g.abandon()
	l.recordFailed(ctx, span, err, waited)
	return nil, &notAcquired{l.spec.NotAcquired, l.dir, err}
}

// startSpan starts the span named name. When nothing records it and it
// carries no trace to pass on (no tracer provider installed), the caller
// keeps neither the span nor the context derived for it: a queued waiter
// then holds no tracing state.
func (l *Lock) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	sctx, span := l.c.tracer.Start(ctx, name)
	if !span.IsRecording() && !span.SpanContext().IsValid() {
		span.End()
		return ctx, noSpan
	}
	return sctx, span
}

// noSpan is a span that records nothing and costs nothing.
var noSpan = trace.SpanFromContext(context.Background())

// recordAcquired notes a successful acquire in the span, metrics and log.
func (l *Lock) recordAcquired(ctx context.Context, span trace.Span, hs []*Hold, waited time.Duration) {
	n := int64(len(hs))
	l.c.stats.acquired.Add(n)
	l.c.ins.acquisitions.Add(ctx, n, l.attrs)
	l.c.ins.holders.Add(ctx, n, l.attrs)
	l.c.ins.acquireDuration.Record(ctx, waited.Seconds(), l.outcomeAttrs["acquired"])
	if span.IsRecording() {
		span.SetAttributes(
			telemetry.AttrNode.String(hs[0].node),
			telemetry.AttrToken.Int64(hs[0].token),
			telemetry.AttrOutcome.String("acquired"))
	}
	if l.c.debugging() {
		l.c.log.Debug("acquired", "recipe", l.spec.Recipe, "path", l.dir, "node", hs[0].node,
			"token", hs[0].token, "count", n, "waited", waited)
	}
}

// recordFailed notes a failed acquire in the span, metrics and log.
func (l *Lock) recordFailed(ctx context.Context, span trace.Span, err error, waited time.Duration) {
	outcome := "error"
	switch {
	case errors.Is(err, ErrWouldBlock):
		outcome = "held_elsewhere"
	case errors.Is(err, context.DeadlineExceeded):
		outcome = "timeout"
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	}
	span.SetAttributes(telemetry.AttrOutcome.String(outcome))
	l.c.ins.acquireDuration.Record(ctx, waited.Seconds(), l.outcomeAttrs[outcome])
	switch outcome {
	case "timeout":
		l.c.ins.timeouts.Add(ctx, 1, l.attrs)
	case "error":
		recordError(span, err)
	}
	if l.c.debugging() {
		l.c.log.Debug("acquire failed", "recipe", l.spec.Recipe, "path", l.dir, "outcome", outcome, "err", err)
	}
}
