package recipe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// Participant is one node in a lock directory's queue.
type Participant struct {
	// Node is the node's name, a child of the lock directory.
	Node string
	// LockName is the lock name the node carries (e.g. "lock-", "read-").
	LockName string
	// Sequence is the sequence number ZooKeeper gave the node, -1 if the
	// name does not parse.
	Sequence int64
	// Data is the node's data: by default the host name and pid of the
	// process that created it.
	Data []byte
	// Session is the id of the session that owns the (ephemeral) node.
	Session int64
	// Persistent reports that no session owns the node (its
	// ephemeralOwner is 0): made by hand or by a program that is not a
	// lock. It is not a holder, and nothing will delete it; an acquire
	// that waits on it fails with [ErrMismatch].
	Persistent bool
	// Token is the node's czxid, the fencing token it has when it holds.
	Token int64
	// Created is when the node was created (its ctime, by the server's
	// clock).
	Created time.Time
	// Holder reports whether the node holds (the lock, a lease, the
	// leadership), as of the listing: by the lock's driver for its own
	// nodes, by the driver of their kind ([driver.Kind]) for the other
	// names of its queue (a read/write lock's other side).
	Holder bool
}

// ParticipantNode is one node of a lock directory's queue as one listing
// of the directory tells it, without reading the node: what
// [Lock.ParticipantNodes] returns. It is a type of its own, not a
// [Participant] with fields left empty, because the fields a read gives
// would be wrong there, not missing: a Session of 0 reads as a persistent
// node, a Token of 0 as a node without one. [Participant] keeps its own
// copy of these fields, so that code which builds Participants (fakes in
// tests) compiles as before.
type ParticipantNode struct {
	// Node is the node's name, a child of the lock directory.
	Node string
	// LockName is the lock name the node carries (e.g. "lock-", "read-").
	LockName string
	// Sequence is the sequence number ZooKeeper gave the node, -1 if the
	// name does not parse.
	Sequence int64
	// Holder reports whether the node holds (the lock, a lease, the
	// leadership), as of the listing, judged as [Lock.Participants]
	// judges it.
	Holder bool
}

// Participants returns the nodes of the lock's queue (those carrying one
// of the names of [LockSpec.Queue]) in queue order, the order in which
// they hold or will hold, with their data; Holder is set by the driver of
// each node's kind (the lock's own driver for its own nodes). Nodes that
// leave while it reads are left out. A missing directory yields no
// participants. Connection loss is retried under the client's policy until
// ctx ends.
//
// It lists the directory once and then reads every node of the queue (64
// reads in flight): the server answers a session's reads one after the
// other, so a queue of 100,000 nodes takes seconds. When the names, the
// order and who holds are enough, [Lock.ParticipantNodes] gives them from
// the listing alone.
func (l *Lock) Participants(ctx context.Context) ([]Participant, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	queue, err := l.listQueue(ctx)
	if err != nil || queue == nil {
		return nil, err
	}
	res, err := l.readParticipants(ctx, queue)
	if err != nil {
		return nil, err
	}
	// Judged again on the nodes still there: a node that left while the
	// others were read no longer stands in anyone's way.
	nodes := make([]ParticipantNode, len(res))
	for i, p := range res {
		nodes[i] = ParticipantNode{Node: p.Node, LockName: p.LockName, Sequence: p.Sequence}
	}
	if err := l.judgeHolders(ctx, nodes); err != nil {
		return nil, err
	}
	for i := range res {
		res[i].Holder = nodes[i].Holder
	}
	return res, nil
}

// ParticipantNodes returns the lock's queue as [Lock.Participants] does,
// in the same order with the same judgement of who holds, but from one
// listing of the directory (one request) and nothing else: each node's
// name, lock name, sequence number and whether it holds, not its data,
// session, token or creation time. Its cost is that of the listing, linear
// in the queue: use it to count, order or find the holders of a long
// queue, and Participants (a read per node: seconds at 100,000 nodes) when
// the data of each node is wanted. A missing directory yields no nodes and
// no error. Connection loss is retried under the client's policy until ctx
// ends; on any other error it returns nil and the error.
func (l *Lock) ParticipantNodes(ctx context.Context) ([]ParticipantNode, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	queue, err := l.listQueue(ctx)
	if err != nil || queue == nil {
		return nil, err
	}
	if err := l.judgeHolders(ctx, queue); err != nil {
		return nil, err
	}
	return queue, nil
}

// listQueue lists the lock's directory once and returns the nodes of its
// queue in order, Holder not yet judged; nil when the directory is
// missing.
func (l *Lock) listQueue(ctx context.Context) ([]ParticipantNode, error) {
	var names []string
	err := l.c.retryDo(ctx, l.acquireNote, func(ctx context.Context) (err error) {
		names, err = l.c.children(ctx, l.dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, opError("list", l.dir, err)
	}
	sorted := driver.Sort(driver.Filter(names, l.queue...), l.queue...)
	out := make([]ParticipantNode, len(sorted))
	for i, n := range sorted {
		seq, parsed := driver.Sequence(n, l.queue...)
		if !parsed {
			seq = -1
		}
		lockName := l.queue[0] // the filter kept only names that carry it
		if len(l.queue) > 1 {
			lockName = lockNameOf(n, l.queue)
		}
		out[i] = ParticipantNode{Node: n, LockName: lockName, Sequence: seq}
	}
	return out, nil
}

// judgeHolders sets Holder on each of nodes, the queue in order: each node
// is judged at its index, by the driver of its kind, so the whole queue
// costs time linear in its length.
func (l *Lock) judgeHolders(ctx context.Context, nodes []ParticipantNode) error {
	names := make([]string, len(nodes))
	for i, p := range nodes {
		names[i] = p.Node
	}
	deciders := map[string]driver.Driver{}
	for i := range nodes {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d, ok := deciders[nodes[i].LockName]
		if !ok {
			d = l.deciderOf(nodes[i].LockName)
			deciders[nodes[i].LockName] = d
		}
		dec, err := driver.DecideAt(d, names, i)
		nodes[i].Holder = err == nil && dec.Held
	}
	return nil
}

// deciderOf returns the driver that judges the nodes named lockName: the
// lock's own for its nodes, the driver of their kind (see [driver.Kind])
// for the other names of its queue, such as the write nodes of a read
// lock's queue.
func (l *Lock) deciderOf(lockName string) driver.Driver {
	if lockName != l.spec.LockName {
		if k, ok := driver.KindNamed(lockName); ok {
			if d, err := k.Driver(0); err == nil {
				return d
			}
		}
	}
	return l.spec.Driver
}

// participantReaders is how many reads of participants are in flight at
// once.
const participantReaders = 64

// readParticipants reads the nodes of sorted, participantReaders at a
// time, and returns those still there, in order. It stops at the first
// error, or when ctx ends, and returns it.
func (l *Lock) readParticipants(ctx context.Context, sorted []ParticipantNode) ([]Participant, error) {
	out := make([]Participant, len(sorted))
	ok := make([]bool, len(sorted))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(participantReaders, len(sorted)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(sorted) {
					return
				}
				var err error
				if out[i], ok[i], err = l.readParticipant(ctx, sorted[i]); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	res := out[:0]
	for i := range out {
		if ok[i] {
			res = append(res, out[i])
		}
	}
	return res, nil
}

// readParticipant reads the node of q; ok is false when it is gone.
func (l *Lock) readParticipant(ctx context.Context, q ParticipantNode) (p Participant, ok bool, err error) {
	n := q.Node
	var data []byte
	var st *zk.Stat
	err = l.c.retryDo(ctx, l.acquireNote, func(ctx context.Context) (err error) {
		data, st, err = l.c.get(ctx, join(l.dir, n))
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return p, false, nil
	case err != nil:
		return p, false, opError("read", join(l.dir, n), err)
	}
	return Participant{Node: n, LockName: q.LockName, Sequence: q.Sequence,
		Data: data, Session: st.EphemeralOwner, Persistent: st.EphemeralOwner == 0, Token: st.Czxid,
		Created: time.UnixMilli(st.Ctime)}, true, nil
}

// lockNameOf returns the lock name whose last occurrence is latest in n.
func lockNameOf(n string, names []string) string {
	best, at := "", -1
	for _, ln := range names {
		if i := strings.LastIndex(n, ln); i > at {
			best, at = ln, i
		}
	}
	return best
}

// Evict deletes the node named node from the lock's directory, whichever
// session owns it: the operator's remedy for a holder whose process is gone
// but whose session lingers. A live holder is told through its loss signal
// (ErrLost and ErrNodeDeleted), and the next in line proceeds. node must be
// a child name as [Lock.Participants] reports it. Connection loss is
// retried under the client's policy until ctx ends. Evicting a node that is
// not there returns an error wrapping [ErrNotHeld].
func (l *Lock) Evict(ctx context.Context, node string) error {
	return l.onNode(ctx, "evict", node, l.c.delete)
}

// onNode runs op on the node of the lock's directory named node, retrying
// connection loss under the client's policy; what names it in errors and
// logs.
func (l *Lock) onNode(ctx context.Context, what, node string, op func(ctx context.Context, path string) error) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case node == "" || strings.ContainsRune(node, '/') || node == "." || node == "..":
		return fmt.Errorf("%w: node name %q", ErrInvalidArgument, node)
	}
	path := join(l.dir, node)
	err := l.c.retryDo(ctx, l.c.noteRetry(l.spec.Recipe+"."+what), func(ctx context.Context) error {
		return op(ctx, path)
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%s %s: %w: no such node", what, path, ErrNotHeld)
	case err != nil:
		return opError(what, path, err)
	}
	l.c.log.Warn("lock node "+what+"ed", "path", l.dir, "node", node)
	return nil
}

// Revoke asks the holder of node to let go, by writing [Hold.Revoked]'s
// marker ("__REVOKE__", Curator's) to the node's data: a holder whose lock
// is revocable ([LockSpec.Revocable], or Curator's makeRevocable) sees it
// within a watch round trip; any other holder ignores it. It deletes
// nothing; letting go is the holder's business. A node that is not there
// gives an error wrapping [ErrNotHeld].
func (l *Lock) Revoke(ctx context.Context, node string) error {
	return l.onNode(ctx, "revoke", node, func(ctx context.Context, path string) error {
		return l.c.setData(ctx, path, []byte(revokeMarker))
	})
}
