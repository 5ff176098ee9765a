package recipe

import (
	"context"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// verifyTogether verifies every node of a group that one transaction just
// created, with one listing of the directory and one read of the first
// node (a transaction's nodes share its zxid, their czxid, the fencing
// token), instead of a listing and a read for each node: an AcquireN of n
// nodes costs the same two reads whatever n, and deciding for all of them
// is linear in the listing. Each attempt then decides at its index in the
// shared queue.
//
// It vouches only for what it can: nodes this session created in the
// epoch trusted now, each listed exactly once. Otherwise, or on any error,
// it leaves the attempts verifying, each on its own, as before.
func (g group) verifyTogether(ctx context.Context) {
	c := g[0].l.c
	ep := c.currentEpoch()
	if ep == nil || !g.createdIn(ep) {
		return
	}
	names, token, dirData, ok := g.readTogether(ctx, ep)
	if !ok || !g.eachListedOnce(names) {
		return
	}
	last := g[len(g)-1]
	if err := last.accept(ep, names, dirData); err != nil {
		return // each attempt finds the same on its own, and says so
	}
	at := make(map[string]int, len(g))
	for i, n := range last.queue {
		if strings.HasPrefix(n, protectedPrefix) {
			at[n] = i
		}
	}
	for _, a := range g {
		if _, ok := at[a.node]; !ok {
			return
		}
	}
	for _, a := range g {
		i := at[a.node]
		a.ep, a.token = ep, token
		a.dropWatches()
		a.queue = last.queue[: i+1 : i+1]
		a.stale, a.trimmed, a.at = false, false, i+1
		a.phase = deciding
	}
}

// createdIn reports whether every node of the group was created here, by
// the session of ep, with no create of it missed.
func (g group) createdIn(ep *epoch) bool {
	for _, a := range g {
		if a.created != createdHere || a.session != ep.session || a.missed {
			return false
		}
	}
	return true
}

// readTogether lists the directory and reads the first node (and the
// directory's data, where the lock keeps it) at once; ok is false when a
// read failed, the first node is not ep's session's, the epoch changed,
// or the directory's data is missing (verify records it first).
func (g group) readTogether(ctx context.Context, ep *epoch) (names []string, token int64, dirData []byte, ok bool) {
	l, c := g[0].l, g[0].l.c
	var (
		st           *zk.Stat
		errL, errR   error
		errD         error
		concurrently sync.WaitGroup
	)
	concurrently.Go(func() { _, st, errR = c.get(ctx, join(l.dir, g[0].node)) })
	if l.spec.DirData != nil {
		concurrently.Go(func() { dirData, _, errD = c.get(ctx, l.dir) })
	}
	names, errL = c.children(ctx, l.dir)
	concurrently.Wait()
	switch {
	case errL != nil, errR != nil, errD != nil:
		return nil, 0, nil, false
	case st.EphemeralOwner != ep.session, c.currentEpoch() != ep:
		return nil, 0, nil, false
	case l.spec.DirData != nil && len(dirData) == 0:
		return nil, 0, nil, false
	}
	return names, st.Czxid, dirData, true
}

// eachListedOnce reports whether names holds every node of the group, and
// no other node with the UUID of one of them (the late effect of a lost
// create, which the attempt's own listing would clean up).
func (g group) eachListedOnce(names []string) bool {
	byPrefix := make(map[string]int, len(g))
	for _, a := range g {
		byPrefix[a.prefix] = 0
	}
	for _, n := range names {
		if len(n) < len(g[0].prefix) {
			continue
		}
		p := n[:len(g[0].prefix)]
		if k, ok := byPrefix[p]; ok {
			byPrefix[p] = k + 1
		}
	}
	for _, k := range byPrefix {
		if k != 1 {
			return false
		}
	}
	return true
}
