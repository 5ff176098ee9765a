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
// attempt moves on to verifying.
func enqueue(ctx context.Context, as []*attempt) (progress bool, err error) {
	l := as[0].l
	if as[0].created == createUnknown {
		found, err := recoverLost(ctx, as)
		if err != nil || found {
			return err == nil, err
		}
	}
	paths := make([]string, len(as))
	for i, a := range as {
		paths[i] = join(l.dir, a.prefix+l.spec.LockName)
	}
	for tries := 0; ; tries++ {
		sid, ep := l.c.zk.SessionID(), l.c.currentEpoch()
		for _, a := range as {
			a.created, a.session = createUnknown, sid
		}
		created, zxids, read, inflight, err := l.c.createNodes(ctx, paths, l.data, !l.busy.Load(), l.dir, l.spec.DirData != nil)
		switch {
		case inflight != nil:
			// ctx ended with the create in flight: cleanup will wait for it.
			for _, a := range as {
				a.inflight = inflight
			}
			return false, err
		case err == nil:
			for i, a := range as {
				a.node, a.token, a.created, a.phase = baseOf(created[i]), zxids[i], createdHere, verifying
			}
			if read != nil {
				return true, as[0].takeRead(ep, read)
			}
			return true, nil
		case retry.Retryable(err):
			return false, opError("create", paths[0], err) // outcome unknown
		}
		for _, a := range as {
			a.created = notCreated
		}
		switch {
		case errors.Is(err, zk.ErrNoNode) && tries < maxSetupTries:
			// The directory is missing, or was reaped as an empty container.
			if err := l.c.ensureDir(ctx, l.dir, l.spec.DirData); err != nil {
				return false, err
			}
		case errors.Is(err, zk.ErrSessionExpired) && tries < maxSetupTries:
			// Nothing of the old session survives: create in the new one.
		default:
			return false, opError("create", paths[0], err)
		}
	}
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
	n := 0
	for _, a := range as {
		for _, name := range names {
			if strings.HasPrefix(name, a.prefix) {
				a.node, a.created, a.phase = name, foundAgain, verifying
				n++
				break
			}
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
