package recipe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/retry"
)

// ProtectedPrefix starts every node name the engine creates, followed by a
// UUID and a dash: Curator's format, so Curator recognises our nodes and a
// lost create reply can be recovered by searching for the UUID.
const ProtectedPrefix = "_c_"

// LockSpec describes one kind of contender in a lock directory: the name of
// its nodes and the driver that decides when it holds.
type LockSpec struct {
	// Recipe names the primitive in spans and logs, e.g. "mutex".
	Recipe string
	// LockName is the name part of our nodes, e.g. "lock-"; ZooKeeper
	// appends the sequence number.
	LockName string
	// Queue lists every lock name whose nodes take part in the directory's
	// queue. Nil means just LockName; a read/write lock lists both names.
	Queue []string
	// Driver decides, from the sorted queue, whether our node holds.
	Driver driver.Driver
	// DirData, when set, is stored in the lock directory when the engine
	// creates it, and every acquire checks, in the same round trip as its
	// first listing, that the directory carries it (a directory without
	// data is accepted). A mismatch fails the acquire with [ErrMismatch].
	// The semaphore keeps its number of leases there.
	DirData []byte
	// SpanName names the acquire span; default Recipe + ".acquire".
	SpanName string
}

// Lock is the shared engine behind every recipe: it enqueues a protected
// ephemeral sequential node in a directory, waits herd-free until its driver
// says the node holds, and hands out a [Hold]. A Lock is immutable and safe
// for concurrent use; each Acquire is independent (reentrancy is the
// recipes' business).
type Lock struct {
	c        *Client
	dir      string
	spec     LockSpec
	queue    []string
	data     []byte
	spanName string

	attrs        metric.MeasurementOption            // recipe attribute
	outcomeAttrs map[string]metric.MeasurementOption // recipe + outcome
}

var outcomes = []string{"acquired", "timeout", "cancelled", "held_elsewhere", "error"}

// NewLock validates its input, without I/O, and returns an engine for the
// lock directory dir. data is stored in every node this Lock creates.
func NewLock(c *Client, dir string, spec LockSpec, data []byte) (*Lock, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidArgument)
	}
	if err := ValidatePath(dir); err != nil {
		return nil, err
	}
	if spec.LockName == "" || strings.ContainsRune(spec.LockName, '/') {
		return nil, fmt.Errorf("%w: lock name %q", ErrInvalidArgument, spec.LockName)
	}
	if spec.Driver == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalidArgument)
	}
	if spec.Recipe == "" {
		spec.Recipe = "lock"
	}
	q := spec.Queue
	if len(q) == 0 {
		q = []string{spec.LockName}
	}
	l := &Lock{c: c, dir: dir, spec: spec, queue: q, data: append([]byte(nil), data...),
		spanName: spec.SpanName, attrs: recipeAttrs(spec.Recipe),
		outcomeAttrs: make(map[string]metric.MeasurementOption, len(outcomes))}
	if l.spanName == "" {
		l.spanName = spec.Recipe + ".acquire"
	}
	for _, o := range outcomes {
		l.outcomeAttrs[o] = metric.WithAttributeSet(attribute.NewSet(AttrRecipe.String(spec.Recipe), AttrOutcome.String(o)))
	}
	return l, nil
}

// Path returns the lock directory.
func (l *Lock) Path() string { return l.dir }

// Client returns the client the lock uses.
func (l *Lock) Client() *Client { return l.c }

// Acquire enqueues a node and, when wait is true, waits until the driver
// says it holds or ctx ends. With wait false it looks once and returns
// [ErrWouldBlock] when the lock is held elsewhere.
//
// Connection-loss errors are retried under the client's retry policy,
// keeping the same node: a create whose reply was lost is found again by its
// UUID rather than made twice. If the session expires meanwhile, a new node
// is enqueued in the new session.
//
// On failure nothing is held: the node is deleted before Acquire returns, or
// (if the connection is down) in the background for as long as the session
// that owns it lives. The error wraps ctx.Err() when ctx ended.
func (l *Lock) Acquire(ctx context.Context, wait bool) (*Hold, error) {
	hs, err := l.acquire(ctx, 1, wait)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// AcquireN enqueues n nodes in one transaction, so they take n consecutive
// places in the queue with no other client's node between them, and waits
// (or, with wait false, looks once) until all of them hold. It is all or
// nothing: on failure none is held and every node is cleaned up as for
// [Lock.Acquire]. With the N-lease driver, n must not exceed N or it waits
// forever; recipes check that before calling.
func (l *Lock) AcquireN(ctx context.Context, n int, wait bool) ([]*Hold, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: n = %d, must be at least 1", ErrInvalidArgument, n)
	}
	return l.acquire(ctx, n, wait)
}

func (l *Lock) acquire(ctx context.Context, n int, wait bool) ([]*Hold, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	start := time.Now()
	ctx, span := l.c.tracer.Start(ctx, l.spanName,
		trace.WithAttributes(AttrRecipe.String(l.spec.Recipe), AttrPath.String(l.dir)))
	defer span.End()
	l.c.ins.waiters.Add(ctx, int64(n), l.attrs)
	defer l.c.ins.waiters.Add(ctx, -int64(n), l.attrs)
	if n > 1 {
		span.SetAttributes(AttrCount.Int(n))
	}
	as := make([]*attempt, n)
	for i := range as {
		as[i] = &attempt{l: l, wait: wait, span: span}
		as[i].newID()
	}
	var err error
	if n > 1 {
		err = l.retryWithProgress(ctx, as[0], func(ctx context.Context) error { return l.enqueueAll(ctx, as) })
	}
	// The nodes are consecutive: waiting for each in turn waits for all.
	for _, a := range as {
		if err != nil {
			break
		}
		err = l.retryWithProgress(ctx, a, a.step)
	}
	waited := time.Since(start)
	span.SetAttributes(AttrWaitMs.Int64(waited.Milliseconds()))
	if err == nil {
		hs := make([]*Hold, n)
		for i, a := range as {
			hs[i] = a.hold()
		}
		l.c.stats.acquired.Add(int64(n))
		l.c.ins.acquisitions.Add(ctx, int64(n), l.attrs)
		l.c.ins.holders.Add(ctx, int64(n), l.attrs)
		l.c.ins.acquireDuration.Record(ctx, waited.Seconds(), l.outcomeAttrs["acquired"])
		span.SetAttributes(
			AttrNode.String(hs[0].node),
			AttrToken.Int64(hs[0].token),
			AttrOutcome.String("acquired"))
		l.c.log.Debug("acquired", "recipe", l.spec.Recipe, "path", l.dir, "node", hs[0].node, "token", hs[0].token, "count", n, "waited", waited)
		return hs, nil
	}
	cleaned := make([]<-chan struct{}, n)
	for i, a := range as {
		cleaned[i] = a.abandon()
	}
	if g := l.c.cfg.cleanupGrace; g > 0 {
		t := time.NewTimer(g)
	wait:
		for _, ch := range cleaned {
			select {
			case <-ch:
			case <-t.C:
				break wait
			}
		}
		t.Stop()
	}
	outcome := "error"
	switch {
	case errors.Is(err, ErrWouldBlock):
		outcome = "held_elsewhere"
	case errors.Is(err, context.DeadlineExceeded):
		outcome = "timeout"
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	l.c.ins.acquireDuration.Record(ctx, waited.Seconds(), l.outcomeAttrs[outcome])
	if outcome == "timeout" {
		l.c.ins.timeouts.Add(ctx, 1, l.attrs)
	}
	if outcome == "error" {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	l.c.log.Debug("acquire failed", "recipe", l.spec.Recipe, "path", l.dir, "outcome", outcome, "err", err)
	return nil, err
}

// retryWithProgress runs fn under the client's retry policy. The schedule
// covers one stretch without progress: after any successful round trip a
// later connection loss gets a fresh schedule, however long the wait in the
// queue has been.
func (l *Lock) retryWithProgress(ctx context.Context, a *attempt, fn func(context.Context) error) error {
	for {
		a.progressed = false
		err := l.c.retryDo(ctx, l.spec.Recipe+".acquire", fn)
		if err == nil || !a.progressed || !errors.Is(err, retry.ErrGaveUp) {
			return err
		}
	}
}

// enqueueAll creates the nodes of all attempts in one transaction, or finds
// them if an earlier transaction's reply was lost (all or none exist).
func (l *Lock) enqueueAll(ctx context.Context, as []*attempt) error {
	c, dir := l.c, l.dir
	if as[0].maybe {
		names, err := c.children(ctx, dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrSessionExpired) {
			return opError("list", dir, err)
		}
		found := 0
		for _, a := range as {
			for _, n := range names {
				if strings.HasPrefix(n, a.prefix) {
					a.node = n
					found++
				}
			}
			a.maybe = false
		}
		if found == len(as) {
			c.stats.recovered.Add(int64(found))
			return nil
		}
		if found != 0 {
			return fmt.Errorf("recipe: %d of %d nodes of one transaction found in %s", found, len(as), dir)
		}
		for _, a := range as {
			a.dupRisk = true // see enqueue
		}
	}
	paths := make([]string, len(as))
	for i, a := range as {
		paths[i] = join(dir, a.prefix+l.spec.LockName)
	}
	for tries := 0; ; tries++ {
		sid := c.conn.SessionID()
		for _, a := range as {
			a.maybe, a.session = true, sid
		}
		created, inflight, err := c.createEphemeralSeqMulti(ctx, paths, l.data)
		if inflight != nil {
			for _, a := range as {
				a.inflight = inflight
			}
			return err
		}
		if err == nil || !retry.Retryable(err) {
			for _, a := range as {
				a.maybe = false
			}
		}
		switch {
		case err == nil:
			as[0].progressed = true
			for i, a := range as {
				a.node = baseOf(created[i])
			}
			return nil
		case errors.Is(err, zk.ErrNoNode) && tries < 8:
			if err := c.ensureDir(ctx, dir, l.spec.DirData); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrSessionExpired) && tries < 8:
		default:
			return opError("create", dir, err)
		}
	}
}

// errNoTrustedSession is retried: it means "wait for the connection".
var errNoTrustedSession = fmt.Errorf("recipe: no trusted session yet: %w", zk.ErrConnectionClosed)

// attempt is the state of one Acquire. step resumes from it after every
// retried error, so a retry never enqueues a second node.
type attempt struct {
	l          *Lock
	wait       bool
	span       trace.Span
	progressed bool // a round trip succeeded since the retry schedule began

	prefix   string          // "_c_<uuid>-"
	node     string          // our child name, once known
	maybe    bool            // a create was sent whose outcome is unknown
	dupRisk  bool            // a create of unknown outcome was not found: it may yet appear
	fresh    bool            // node came from this attempt's own successful create
	inflight <-chan struct{} // a create abandoned when ctx ended
	session  int64           // session that sent the create

	ep      *epoch          // epoch in which our node was verified; nil: verify again
	ownW    <-chan zk.Event // watch on our own node
	token   int64           // czxid of our node
	sorted  []string        // the queue as last known
	watches map[string]<-chan zk.Event
	stale   bool // sorted is older than the last wake-up
	partial bool // sorted was trimmed: nodes ahead of the watched window are unknown
}

func (a *attempt) newID() {
	if a.dupRisk {
		// A lost create under the old UUID may still appear: sweep for it.
		a.l.c.cleanup(cleanupJob{dir: a.l.dir, prefix: a.prefix, sweep: true})
		a.dupRisk = false
	}
	a.prefix = ProtectedPrefix + uuid.NewString() + "-"
	a.node, a.maybe, a.fresh, a.token = "", false, false, 0
	a.ep, a.ownW, a.sorted, a.watches, a.stale, a.partial = nil, nil, nil, nil, false, false
}

// step runs the acquire state machine until held, a non-retryable error, or
// a retryable one (which retryDo answers by calling step again).
func (a *attempt) step(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if a.node == "" {
			if err := a.enqueue(ctx); err != nil {
				return err
			}
			continue
		}
		if a.ep == nil {
			if err := a.verify(ctx); err != nil {
				return err
			}
			continue
		}
		if a.stale && a.partial {
			// The known queue was trimmed to the watched window: after a
			// change in it, only a fresh listing can decide.
			if err := a.relist(ctx); err != nil {
				return err
			}
			continue
		}
		dec, err := a.l.spec.Driver.Decide(a.sorted, a.node)
		if errors.Is(err, driver.ErrNotInQueue) {
			a.ep = nil // our node vanished from the listing: look again
			continue
		}
		if err != nil {
			return err
		}
		if a.ep.ended() || a.ownGone() {
			a.ep = nil
			continue
		}
		if dec.Held {
			return nil
		}
		if !a.wait {
			return ErrWouldBlock
		}
		if a.stale {
			// Woken but not at the front of the known queue: the nodes
			// still listed ahead are probably gone. One listing beats a
			// read per stale node.
			if err := a.relist(ctx); err != nil {
				return err
			}
			continue
		}
		a.span.SetAttributes(AttrPosition.Int(dec.Position))
		a.trim(dec)
		gone, err := a.arm(ctx, dec.Watch)
		if err != nil {
			return err
		}
		if !gone {
			if err := a.await(ctx, dec.Watch); err != nil {
				return err
			}
		}
	}
}

// enqueue creates our node, or finds the one an earlier create made.
func (a *attempt) enqueue(ctx context.Context) error {
	c, dir := a.l.c, a.l.dir
	if a.maybe {
		names, err := c.children(ctx, dir)
		switch {
		case err == nil:
			for _, n := range names {
				if strings.HasPrefix(n, a.prefix) {
					a.node, a.maybe = n, false
					c.stats.recovered.Add(1)
					a.span.AddEvent("recovered node after lost create reply", trace.WithAttributes(AttrNode.String(n)))
					c.log.Debug("recovered node after lost create reply", "path", dir, "node", n)
					return nil
				}
			}
		case errors.Is(err, zk.ErrNoNode):
		case errors.Is(err, zk.ErrSessionExpired):
			// The node, if any, died with the session.
		default:
			return opError("list", dir, err)
		}
		// Not found. Within one session the server orders requests, so the
		// lost create has failed; through another ensemble member it might
		// still be applied later. Sweep for it whenever this attempt ends.
		a.maybe, a.dupRisk = false, true
	}
	path := join(dir, a.prefix+a.l.spec.LockName)
	for tries := 0; ; tries++ {
		a.maybe = true
		a.session = c.conn.SessionID()
		p, zxid, inflight, err := c.createEphemeralSeq(ctx, path, a.l.data)
		if inflight != nil {
			a.inflight = inflight
			return err
		}
		switch {
		case err == nil:
			a.progressed = true
			a.node, a.maybe, a.fresh, a.token = baseOf(p), false, true, zxid
			return nil
		case errors.Is(err, zk.ErrNoNode) && tries < 8:
			a.maybe = false
			if err := c.ensureDir(ctx, dir, a.l.spec.DirData); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrSessionExpired) && tries < 8:
			a.maybe = false // nothing of the old session survives
		case retry.Retryable(err):
			return opError("create", path, err)
		default:
			a.maybe = false
			return opError("create", path, err)
		}
	}
}

// verify reads the queue, checks the directory's parameters and makes sure
// our node belongs to the session the client trusts now, all in one round
// trip.
//
// A node this attempt created in the trusted session, whose create reply
// carried its zxid (the token), needs no read of its own: the listing shows
// it. Its watch is armed with the first watch the attempt sets, or by the
// hold. Any other node (found again after a lost reply, or created while the
// session changed) is read, watched and checked for its owner in the same
// round trip as the listing.
func (a *attempt) verify(ctx context.Context) error {
	c, dir := a.l.c, a.l.dir
	own := join(dir, a.node)
	ep := c.currentEpoch()
	if ep == nil {
		if c.isClosed() {
			return ErrClosed
		}
		return errNoTrustedSession
	}
	readOwn := !a.fresh || a.token == 0 || a.session != ep.session
	var (
		st      *zk.Stat
		ownW    <-chan zk.Event
		names   []string
		dirData []byte
		errW    error
		errL    error
		errD    error
		wg      sync.WaitGroup
	)
	if readOwn {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, ownW, errW = c.getW(ctx, own)
		}()
	}
	if a.l.spec.DirData != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirData, _, errD = c.get(ctx, dir)
		}()
	}
	names, errL = c.children(ctx, dir)
	wg.Wait()
	switch {
	case errors.Is(errW, zk.ErrNoNode), errors.Is(errW, zk.ErrSessionExpired),
		errors.Is(errL, zk.ErrNoNode), errors.Is(errL, zk.ErrSessionExpired):
		a.newID() // gone (session expired or deleted by someone): enqueue anew
		return nil
	case errW != nil:
		return opError("read", own, errW)
	case errL != nil:
		return opError("list", dir, errL)
	case errD != nil && !errors.Is(errD, zk.ErrNoNode):
		return opError("read", dir, errD)
	case len(dirData) > 0 && string(dirData) != string(a.l.spec.DirData):
		return fmt.Errorf("%w: %s carries %q, this client expects %q", ErrMismatch, dir, dirData, a.l.spec.DirData)
	}
	if c.currentEpoch() != ep {
		if c.isClosed() {
			return ErrClosed
		}
		return errNoTrustedSession
	}
	if readOwn {
		if st.EphemeralOwner != ep.session {
			// A node with our UUID from a session that is no longer
			// ours: delete it and start over with a fresh UUID.
			c.log.Warn("deleting stale node of an earlier session", "node", own, "owner", fmt.Sprintf("0x%x", st.EphemeralOwner))
			if err := c.delete(ctx, own); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return opError("delete stale", own, err)
			}
			a.newID()
			return nil
		}
		a.ownW, a.token = ownW, st.Czxid
	}
	a.progressed = true
	a.ep = ep
	a.watches = make(map[string]<-chan zk.Event)
	a.setQueue(names)
	return nil
}

// relist reads the queue again (our node and its watch are unchanged).
func (a *attempt) relist(ctx context.Context) error {
	names, err := a.l.c.children(ctx, a.l.dir)
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		a.newID()
		return nil
	case err != nil:
		return opError("list", a.l.dir, err)
	}
	a.progressed = true
	a.setQueue(names)
	return nil
}

// setQueue records a fresh listing as the known queue.
func (a *attempt) setQueue(names []string) {
	names = a.dropDuplicates(names)
	a.sorted = driver.Sort(driver.Filter(names, a.l.queue...), a.l.queue...)
	a.stale, a.partial = false, false
}

// trim keeps, of the known queue, only the window from the first watched
// node to our own, so that a waiter's memory does not grow with the length
// of the queue ahead of it. A trimmed queue cannot vouch for what is ahead
// of the window: after any change in it the attempt lists again.
func (a *attempt) trim(dec driver.Decision) {
	first := dec.Position
	for _, w := range dec.Watch {
		for i := 0; i < first; i++ {
			if a.sorted[i] == w {
				first = i
				break
			}
		}
	}
	if first == 0 {
		return
	}
	a.sorted = append([]string(nil), a.sorted[first:dec.Position+1]...)
	a.partial = true
}

// dropDuplicates removes from names, and deletes in the background, any
// other node carrying this attempt's UUID: the late effect of a create whose
// reply was lost. It would otherwise sit in the queue until the session ends.
func (a *attempt) dropDuplicates(names []string) []string {
	out := names[:0]
	for _, n := range names {
		if n != a.node && strings.HasPrefix(n, a.prefix) {
			a.l.c.log.Warn("deleting duplicate node of a lost create", "path", a.l.dir, "node", n)
			a.l.c.cleanup(cleanupJob{dir: a.l.dir, path: join(a.l.dir, n)})
			continue
		}
		out = append(out, n)
	}
	return out
}

// ownGone reports, without blocking, whether an event arrived for our node.
func (a *attempt) ownGone() bool {
	select {
	case ev := <-a.ownW:
		a.ownW = nil
		if ev.Type == zk.EventNodeDeleted {
			a.newID()
		}
		return true
	default:
		return false
	}
}

// arm sets a data watch on every node in names not watched yet, all in one
// round trip. A node that is already gone is removed from the known queue
// and gone is true: the driver can then decide again without waiting.
func (a *attempt) arm(ctx context.Context, names []string) (gone bool, err error) {
	var todo []string
	if a.ownW == nil && !a.partial {
		// Our own node's watch goes in the same round trip. It matters
		// only where a deletion event alone can make us hold; a trimmed
		// queue is listed again first, which shows whether our node is
		// still there.
		todo = append(todo, a.node)
	}
	for _, n := range names {
		if _, ok := a.watches[n]; !ok {
			todo = append(todo, n)
		}
	}
	chans := make([]<-chan zk.Event, len(todo))
	errs := make([]error, len(todo))
	if len(todo) == 1 {
		_, chans[0], errs[0] = a.l.c.getW(ctx, join(a.l.dir, todo[0]))
	} else {
		var wg sync.WaitGroup
		for i, n := range todo {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, chans[i], errs[i] = a.l.c.getW(ctx, join(a.l.dir, n))
			}()
		}
		wg.Wait()
	}
	for i, n := range todo {
		if n == a.node {
			switch err := errs[i]; {
			case err == nil:
				a.ownW = chans[i]
			case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
				a.newID()
				return true, nil
			default:
				return false, opError("watch", join(a.l.dir, n), err)
			}
			continue
		}
		switch err := errs[i]; {
		case err == nil:
			a.progressed = true
			a.watches[n] = chans[i]
		case errors.Is(err, zk.ErrNoNode):
			a.sorted = without(a.sorted, n)
			a.stale, gone = true, true
		case errors.Is(err, zk.ErrSessionExpired):
			a.newID()
			return true, nil
		default:
			return false, opError("watch", join(a.l.dir, n), err)
		}
	}
	return gone, nil
}

// await blocks until a watched node changes, our node changes, the epoch
// ends or ctx ends, and updates the attempt accordingly.
//
// Deleting a watched node removes it from the known queue without listing
// the children again: drivers only look at nodes ordered before ours, and
// sequence numbers only grow, so the known queue minus the deleted node
// decides correctly (nodes deleted meanwhile are found when watched).
func (a *attempt) await(ctx context.Context, names []string) error {
	cases := make([]reflect.SelectCase, 0, len(names)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a.ep.done)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a.ownW)},
	)
	for _, n := range names {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a.watches[n])})
	}
	a.l.c.log.Debug("waiting", "recipe", a.l.spec.Recipe, "path", a.l.dir, "node", a.node, "watch", names)
	i, v, _ := reflect.Select(cases)
	switch i {
	case 0:
		return ctx.Err()
	case 1:
		a.ep = nil
		return nil
	case 2:
		ev, _ := v.Interface().(zk.Event)
		a.ownW = nil
		a.ep = nil
		if ev.Type == zk.EventNodeDeleted {
			a.span.AddEvent("own node deleted while waiting")
			a.newID()
		}
		return nil
	}
	n := names[i-3]
	ev, _ := v.Interface().(zk.Event)
	delete(a.watches, n)
	a.progressed = true
	a.l.c.stats.wakeups.Add(1)
	a.l.c.log.Debug("woken", "recipe", a.l.spec.Recipe, "path", a.l.dir, "node", a.node, "watched", n, "event", ev.Type.String())
	a.span.AddEvent("wake-up", trace.WithAttributes(
		attribute.String("zkrecipes.lock.watched", n),
		attribute.String("zkrecipes.zk.event", ev.Type.String())))
	switch ev.Type {
	case zk.EventNodeDeleted:
		a.sorted = without(a.sorted, n)
		a.stale = true
	case zk.EventNotWatching:
		a.ep = nil // session trouble: verify again
	}
	return nil
}

// abandon hands whatever node the attempt may have created to cleanup and
// returns a channel closed when it is gone.
func (a *attempt) abandon() <-chan struct{} {
	if a.node == "" && !a.maybe && a.inflight == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	j := cleanupJob{dir: a.l.dir, prefix: a.prefix, inflight: a.inflight,
		sweep: a.node == "" || a.dupRisk}
	if a.node != "" {
		j.path = join(a.l.dir, a.node)
	}
	return a.l.c.cleanup(j)
}

// hold turns a successful attempt into a Hold watching its node.
func (a *attempt) hold() *Hold {
	c := a.l.c
	h := &Hold{
		l:       a.l,
		node:    a.node,
		path:    join(a.l.dir, a.node),
		token:   a.token,
		session: a.ep.session,
		prefix:  a.prefix,
		sweep:   a.dupRisk,
		ep:      a.ep,
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
	}
	h.ctx, h.cancel = context.WithCancel(c.lifetime)
	if !c.enter() {
		h.end(lostError(ErrClosed))
		close(h.exited)
		return h
	}
	go func() {
		defer c.wg.Done()
		h.monitor(a.ownW)
	}()
	return h
}

func without(names []string, n string) []string {
	out := make([]string, 0, len(names))
	for _, m := range names {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}
