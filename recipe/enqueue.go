package recipe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/telemetry"
)

// enqueue creates the nodes of the attempts (one create, or one transaction
// for several: all or none, with consecutive sequence numbers), or finds the
// ones an earlier create made if its reply was lost. On success every
// attempt moves on to verifying (or, when the reads sent behind a single
// create already vouch for its node, to deciding).
func enqueue(ctx context.Context, as []*attempt) (turn, error) {
	stay := turn{next: enqueuing}
	if as[0].created == createUnknown {
		found, err := recoverLost(ctx, as)
		switch {
		case err != nil:
			return stay, err
		case found:
			return turn{next: verifying, progress: true}, nil
		}
	}
	l := as[0].l
	// The reads sent behind a create save a round trip to a lone acquire;
	// with other creates of the client in flight in the directory, each
	// would carry a listing of its own: they share theirs instead (list).
	alone := l.c.listings.beginEnqueue(l.dir)
	defer l.c.listings.endEnqueue(l.dir)
	req := createRequest{paths: make([]string, len(as)), data: l.data,
		dir: l.dir, behind: alone && !l.busy.Load(), readDir: l.spec.DirData != nil}
	for i, a := range as {
		req.paths[i] = join(l.dir, a.prefix+l.spec.LockName)
	}
	for tries := 0; ; tries++ {
		if err := l.checkDir(ctx); err != nil {
			return stay, err // before the create: nothing to clean up
		}
		sid, ep := l.c.zk.SessionID(), l.c.currentEpoch()
		for _, a := range as {
			a.created, a.session = createUnknown, sid
		}
		res, err := l.c.createNodes(ctx, req)
		switch {
		case res.inflight != nil:
			// ctx ended with the create in flight: cleanup will wait for it.
			for _, a := range as {
				a.inflight = res.inflight
			}
			return stay, err
		case err == nil:
			return enqueued(as, ep, res)
		}
		if err := l.unknownOutcome(len(as), req.paths[0], err); err != nil {
			return stay, err
		}
		for _, a := range as {
			a.created = notCreated
		}
		if err := l.mendSetup(ctx, err, tries, req.paths[0]); err != nil {
			return stay, err
		}
	}
}

// unknownOutcome is the error of a create of n nodes whose outcome is
// unknown (the connection was lost under it), nil for a create the server
// refused.
func (l *Lock) unknownOutcome(n int, path string, err error) error {
	switch {
	case !retry.Retryable(err):
		return nil
	case n > 1 && l.nSize(n) > defaultMaxPacket:
		// Past ZooKeeper's default limit, the lost connection may be the
		// server refusing the request for its size: sending it again
		// would cut the connection again. What it may have created is
		// swept when the attempts end.
		return fmt.Errorf("%w: the connection closed under a transaction of %d bytes, more than ZooKeeper's default limit of %d: "+
			"a server whose jute.maxbuffer is below WithMaxPacket drops such requests; not sent again: %w",
			ErrInvalidArgument, l.nSize(n), defaultMaxPacket, err)
	}
	return opError("create", path, err) // outcome unknown
}

// enqueued records the nodes a create made, in epoch ep. The reads sent
// behind a single create may already vouch for its node.
func enqueued(as []*attempt, ep *epoch, res createResult) (turn, error) {
	for i, a := range as {
		a.token, a.created = res.zxids[i], createdHere
		a.setNode(res.nodes[i])
	}
	if res.read == nil {
		return turn{next: verifying, progress: true}, nil
	}
	next, err := as[0].takeRead(ep, res.read)
	return turn{next: next, progress: true}, err
}

// setNode records the path a create returned as our node. Only its last
// element is kept, in memory of its own (the reply's path would stay whole
// behind it), and the prefix shares the node's bytes: a waiter keeps one
// copy of its name, not three.
func (a *attempt) setNode(path string) {
	a.node = strings.Clone(baseOf(path))
	if strings.HasPrefix(a.node, a.prefix) {
		a.prefix = a.node[:len(a.prefix)]
	}
}

// mendSetup handles a create the server refused for a normal reason, so
// that it can be sent again (nil), or returns the error that ends it: the
// lock directory is missing, or was reaped as an empty container (it is
// created again), or the session changed under the create (nothing of the
// old one survives: create in the new one).
func (l *Lock) mendSetup(ctx context.Context, err error, tries int, path string) error {
	switch {
	case tries >= maxSetupTries:
	case errors.Is(err, zk.ErrNoNode):
		return l.c.ensureDir(ctx, l.dir, l.spec.DirData)
	case errors.Is(err, zk.ErrSessionExpired):
		return nil
	}
	return opError("create", path, err)
}

// recoverLost looks for the nodes of a create whose reply was lost, by
// their UUIDs. found is true when all of them exist (a transaction creates
// all or none); when none does, the create failed, or, through another
// ensemble member, might still be applied later: every attempt then sweeps
// for it when it ends, and enqueue creates anew.
func recoverLost(ctx context.Context, as []*attempt) (found bool, err error) {
	l := as[0].l
	names, err := l.c.children(ctx, l.dir)
	switch {
	case err == nil:
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		// No directory, or the node died with its session.
	default:
		return false, opError("list", l.dir, err)
	}
	// One pass over the listing, whatever the number of nodes: every
	// prefix has the same length.
	byPrefix := make(map[string]*attempt, len(as))
	for _, a := range as {
		byPrefix[a.prefix] = a
	}
	n := 0
	for _, name := range names {
		if len(name) < len(as[0].prefix) {
			continue
		}
		if a := byPrefix[name[:len(as[0].prefix)]]; a != nil && a.created != foundAgain {
			a.node, a.created = name, foundAgain
			n++
		}
	}
	switch n {
	case len(as):
		l.c.stats.recovered.Add(int64(n))
		as[0].span.AddEvent("recovered node after lost create reply",
			trace.WithAttributes(telemetry.AttrNode.String(as[0].node)))
		l.c.log.Debug("recovered node after lost create reply", "path", l.dir, "node", as[0].node, "count", n)
		return true, nil
	case 0:
		for _, a := range as {
			a.created, a.dupRisk = notCreated, true
		}
		return false, nil
	}
	return false, fmt.Errorf("recipe: %d of %d nodes of one transaction found in %s", n, len(as), l.dir)
}
