package recipe

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// protectedPrefix starts every node name the engine creates, followed by a
// UUID and a dash: Curator's format, so Curator recognises our nodes and a
// lost create reply can be recovered by searching for the UUID.
const protectedPrefix = "_c_"

// maxSetupTries bounds the immediate retries of a create that fails because
// the lock directory vanished (reaped as an empty container) or the session
// changed under it. Each is a normal outcome, not a fault; repeating one
// this often means something else is wrong.
const maxSetupTries = 8

// phase is where an attempt stands. Each phase is one small function that
// does at most one round trip and returns the phase that follows; only the
// loop in attempt.run (and group.run, for the nodes of one AcquireN)
// moves an attempt on:
//
//	enqueuing -> verifying -> deciding -> arming -> waiting -> deciding ...
//	                                  \-> held (or ErrWouldBlock for a try)
//
// relisting reads the queue again when the known one is out of date. Any
// phase may send the attempt back to verifying (our node's standing is in
// doubt) or to enqueuing (our node is gone: start over with a new UUID).
type phase uint8

const (
	enqueuing phase = iota // create our node, or find the one a lost reply created
	verifying              // list the queue, check the directory and our node's owner
	relisting              // list the queue again; our node is known good
	deciding               // ask the driver; no I/O
	arming                 // set watches on the nodes the driver named
	waiting                // block until something watched changes
	held                   // done: the driver says our node holds
)

// turn is what one phase did: the phase that follows, and whether it
// completed a round trip (progress starts the retry schedule afresh).
type turn struct {
	next     phase
	progress bool
}

// creation is what is known of the create behind our node.
type creation uint8

const (
	notCreated    creation = iota // nothing sent under the current UUID
	createUnknown                 // a create was sent and its reply lost
	createdHere                   // our create's reply named the node
	foundAgain                    // found by its UUID after a lost reply
)

// attempt is the state of one node of one acquire. Its phases resume from
// it after every retried error, so a retry never enqueues a second node.
// A queued waiter keeps one, so its fields are ordered to leave no padding.
type attempt struct {
	l    *Lock
	span trace.Span

	// Our node.
	prefix   string          // "_c_<uuid>-"; once node is known, it shares node's bytes
	node     string          // our child name, once known
	session  int64           // session that sent the create
	token    int64           // czxid of our node, 0 until known
	inflight <-chan struct{} // a create abandoned when ctx ended

	// What we know of the queue and what we watch.
	ep      *epoch          // epoch in which our node was verified
	ownW    <-chan zk.Event // watch on our own node
	rewatch <-chan struct{} // closed when go-zookeeper's watches were set again, or an epoch ended, after our last listing (Client.rewatched)
	queue   []string        // the queue as last known, sorted
	watch   []string        // the nodes the driver named
	at      int             // 1 + our index in queue, which the group shares (verifyTogether); 0: unknown
	watches watchSet

	phase   phase    // where run resumes; set by run and group.run only
	created creation // how node came to be known
	try     bool     // look once, do not wait
	// grouped: one of the nodes of an AcquireN, which are enqueued
	// together only (group.regroup).
	grouped bool
	dupRisk bool // a create of unknown outcome was not found: it may yet appear
	missed  bool // a listing lacked our node: verify reads it, whoever created it
	stale   bool // the queue changed since it was listed
	trimmed bool // queue holds only the watched window up to our node
	waited  bool // the driver named nodes to wait for
}

func newAttempt(l *Lock, try bool, span trace.Span) *attempt {
	a := &attempt{l: l, try: try, span: span}
	a.newID()
	return a
}

// newID starts the attempt over under a fresh UUID: our node is gone or
// was never made.
func (a *attempt) newID() {
	a.dropWatches()
	if a.dupRisk {
		// A lost create under the old UUID may still appear: sweep for it.
		a.l.c.cleanup(cleanupJob{dir: a.l.dir, prefix: a.prefix, sweep: true})
		a.dupRisk = false
	}
	*a = attempt{l: a.l, try: a.try, grouped: a.grouped, span: a.span, phase: a.phase, inflight: a.inflight, waited: a.waited,
		prefix: protectedPrefix + a.l.c.newUUID() + "-"}
}

// run takes the attempt through its phases until it holds, retrying
// connection loss under the client's retry policy. Every phase that
// completes a round trip is progress and starts the schedule afresh, so a
// connection loss late in a long wait gets the whole schedule.
func (a *attempt) run(ctx context.Context) error {
	w := a.l.c.waiter(a.l.acquireNote)
	for a.phase != held {
		if err := ctx.Err(); err != nil {
			return err
		}
		if a.grouped && a.phase == enqueuing {
			return errRegroup
		}
		t, err := a.step(ctx)
		a.phase = t.next
		if err != nil {
			if err := a.l.c.waitRetry(ctx, w, err); err != nil {
				return err
			}
			continue
		}
		if t.progress {
			w.Reset()
		}
	}
	return nil
}

// step runs the current phase once.
func (a *attempt) step(ctx context.Context) (turn, error) {
	switch a.phase {
	case enqueuing, verifying, relisting:
		// What this listing shows covers the watches it leads to, until
		// go-zookeeper sets them again on a new connection.
		a.rewatch = a.l.c.rewatchChange()
	}
	switch a.phase {
	case enqueuing:
		return enqueue(ctx, []*attempt{a})
	case verifying:
		return a.verify(ctx)
	case relisting:
		return a.relist(ctx)
	case deciding:
		return a.decide()
	case arming:
		return a.arm(ctx)
	case waiting:
		return a.await(ctx)
	}
	return turn{next: a.phase}, nil
}

// decide asks the driver whether our node holds, from the known queue.
func (a *attempt) decide() (turn, error) {
	if a.stale && a.trimmed {
		// The known queue was trimmed to the watched window: after a
		// change in it, only a fresh listing can decide.
		return turn{next: relisting}, nil
	}
	dec, err := a.decision()
	switch {
	case errors.Is(err, driver.ErrNotInQueue):
		// Our node vanished from the listing: look again, at the node
		// itself (a listing alone would keep missing it).
		a.missed = true
		return turn{next: verifying}, nil
	case err != nil:
		return turn{next: deciding}, err
	case a.ep.ended(), a.l.c.cfg.tolerateSuspension && a.l.c.suspended(a.ep):
		return turn{next: verifying}, nil // wait for a trusted session before holding
	}
	if next, changed := a.ownGone(); changed {
		return turn{next: next}, nil
	}
	switch {
	case dec.Held:
		return turn{next: held}, nil
	case a.try:
		return turn{next: deciding}, ErrWouldBlock
	case a.stale:
		// Woken but not at the front of the known queue: the nodes still
		// listed ahead are probably gone. One listing beats a read per
		// stale node.
		return turn{next: relisting}, nil
	}
	if a.span.IsRecording() {
		a.span.SetAttributes(telemetry.AttrPosition.Int(dec.Position))
	}
	a.trim(dec)
	if a.at > 0 && !a.trimmed {
		// The queue is shared with the rest of the group, and a waiter
		// edits its own.
		a.queue = slices.Clone(a.queue)
	}
	a.at = 0
	a.watch = a.named(dec.Watch)
	a.waited = true
	return turn{next: arming}, nil
}

// decision asks the driver about our node in the known queue: at the
// index the group's shared listing gave it, or by its name.
func (a *attempt) decision() (driver.Decision, error) {
	if i := a.at - 1; i >= 0 && i < len(a.queue) && a.queue[i] == a.node {
		return driver.DecideAt(a.l.spec.Driver, a.queue, i)
	}
	return a.l.spec.Driver.Decide(a.queue, a.node)
}

// ownGone reports, without blocking, whether an event arrived for our
// node, and the phase that follows it.
func (a *attempt) ownGone() (next phase, changed bool) {
	select {
	case ev := <-a.ownW:
		return a.ownChanged(ev), true
	default:
		return a.phase, false
	}
}

// ownChanged applies an event on our own node's watch: our node's standing
// is in doubt (verifying), or it is gone (enqueuing, under a new UUID).
func (a *attempt) ownChanged(ev zk.Event) phase {
	a.ownW = nil
	if ev.Type == zk.EventNodeDeleted {
		a.newID()
		return enqueuing
	}
	return verifying
}

// recheck reports whether a node that held while later nodes of its group
// waited has lost its standing meanwhile (its session expired, or went
// untrusted, or an event came for it), and the phase it resumes from.
func (a *attempt) recheck() (next phase, lost bool) {
	if a.ep.ended() {
		return verifying, true
	}
	return a.ownGone()
}

// hold turns a successful attempt into a Hold watching its node.
func (a *attempt) hold() *Hold {
	return newHold(a.l, a.node, a.prefix, a.token, a.ep, a.dupRisk, a.ownW)
}

// abandon hands whatever node the attempt may have created to cleanup and
// returns a channel closed when it is gone.
func (a *attempt) abandon() <-chan struct{} {
	if a.node == "" && a.created != createUnknown && a.inflight == nil {
		return closedChan
	}
	j := cleanupJob{dir: a.l.dir, prefix: a.prefix, inflight: a.inflight,
		sweep: a.node == "" || a.dupRisk}
	if a.node != "" {
		j.path = join(a.l.dir, a.node)
	}
	return a.l.c.cleanup(j)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// group is one acquire: one attempt, or n enqueued together by AcquireN.
type group []*attempt

func newGroup(l *Lock, n int, try bool, span trace.Span) group {
	g := make(group, n)
	for i := range g {
		g[i] = newAttempt(l, try, span)
		g[i].grouped = n > 1
	}
	return g
}

// run enqueues the group's nodes (in one transaction when there are
// several) and waits for each in turn: the nodes are consecutive, so
// waiting for each waits for all.
func (g group) run(ctx context.Context) error {
	l := g[0].l
	defer g.dropWatches()
	if len(g) > 1 {
		if err := g.enqueue(ctx); err != nil {
			return err
		}
	}
	for {
		regrouped := false
		for _, a := range g {
			err := a.run(ctx)
			if errors.Is(err, errRegroup) {
				if err := g.regroup(ctx); err != nil {
					return err
				}
				regrouped = true
				break
			}
			if err != nil {
				return err
			}
		}
		if regrouped {
			continue
		}
		// A node that held while a later one waited may have been lost
		// meanwhile: hand out no hold that is already over. Such an
		// attempt looks again, in the session trusted now, and the group
		// waits once more.
		again := false
		for _, a := range g {
			if next, lost := a.recheck(); lost {
				a.phase = next
				again = true
			}
		}
		if !again {
			// The directory may have been made again since its ACL was
			// checked; it holds our nodes now, so it stays the one
			// checked. No I/O unless it changed.
			return l.c.retryDo(ctx, l.acquireNote, l.checkDir)
		}
	}
}

// errRegroup ends the run of one node of a group that must be enqueued
// again: group.run enqueues all of them again, together.
var errRegroup = errors.New("recipe: the group's nodes must be enqueued again")

// enqueue creates the group's nodes in one transaction, and verifies them
// together from one listing where it can (verifyTogether).
func (g group) enqueue(ctx context.Context) error {
	l := g[0].l
	rw := l.c.rewatchChange()
	var t turn
	err := l.c.retryDo(ctx, l.acquireNote, func(ctx context.Context) (err error) {
		t, err = enqueue(ctx, g)
		return err
	})
	if err != nil {
		return err
	}
	for _, a := range g {
		a.phase = t.next
		a.rewatch = rw
	}
	if t.next == verifying {
		g.verifyTogether(ctx)
	}
	return nil
}

// regroup enqueues the group's nodes again, all of them and together,
// once one of them is gone (its session expired, or someone deleted it):
// enqueued one by one, they would no longer be consecutive, and two
// AcquireN calls could each hold part of what the other waits for until
// one of them gives up. The nodes left are deleted first.
func (g group) regroup(ctx context.Context) error {
	g.abandon()
	for _, a := range g {
		a.newID()
	}
	return g.enqueue(ctx)
}

// dropWatches hands the watches the group's attempts still have to the
// client once the acquire is over, held or not.
func (g group) dropWatches() {
	for _, a := range g {
		a.dropWatches()
	}
}

// foundTaken reports whether any attempt of the group had to wait.
func (g group) foundTaken() bool {
	for _, a := range g {
		if a.waited {
			return true
		}
	}
	return false
}

func (g group) holds() []*Hold {
	hs := make([]*Hold, len(g))
	for i, a := range g {
		hs[i] = a.hold()
	}
	return hs
}

// abandon cleans up every node of a failed acquire, waiting up to the
// client's cleanup grace for the deletions before leaving them to the
// background.
func (g group) abandon() {
	cleaned := make([]<-chan struct{}, len(g))
	for i, a := range g {
		cleaned[i] = a.abandon()
	}
	grace := g[0].l.c.cfg.cleanupGrace
	if grace <= 0 {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, ch := range cleaned {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}
