package recipe

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// Guarded writes. A hold's fencing token protects a store that checks it;
// when the protected state lives in ZooKeeper itself, a hold can do
// better: [Hold.Commit] sends the caller's writes in one multi together
// with a check that the hold's own node still exists. The server applies
// all of them or none, in one step of its single order of writes, so the
// writes commit only while the hold is in force: once the node is gone
// (released, deleted, its session expired) no write of its holder can
// land.

// AnyVersion, as the version of an op, matches every version of the node.
const AnyVersion int32 = -1

// Op is one step of a guarded transaction ([Hold.Commit]): a create, a
// write of a node's data, a delete, or a check of a node's version. Make
// one with [Create], [CreateSequential], [SetData], [SetDataVersion],
// [Delete] or [Check].
type Op struct {
	kind    opKind
	path    string
	data    []byte
	version int32
}

type opKind uint8

const (
	kindCreate opKind = iota + 1
	kindCreateSeq
	kindSet
	kindDelete
	kindCheck
)

// Create makes a persistent node at path with data, with the client's ACL.
// It fails ([ErrNodeExists]) when the node exists, and ([ErrNoNode]) when
// its parent does not.
func Create(path string, data []byte) Op { return Op{kind: kindCreate, path: path, data: data} }

// CreateSequential makes a persistent node whose name is path followed by
// a sequence number the server picks, increasing within the parent: an
// append to a log. [Result.Path] names the node made.
func CreateSequential(path string, data []byte) Op {
	return Op{kind: kindCreateSeq, path: path, data: data}
}

// SetData replaces the data of the node at path, whatever its version.
func SetData(path string, data []byte) Op {
	return Op{kind: kindSet, path: path, data: data, version: AnyVersion}
}

// SetDataVersion replaces the data of the node at path if its data version
// is version ([ErrVersionMismatch] otherwise): a compare-and-set.
func SetDataVersion(path string, data []byte, version int32) Op {
	return Op{kind: kindSet, path: path, data: data, version: version}
}

// Delete deletes the node at path, whatever its version. It fails
// ([ErrNotEmpty]) when the node has children. Put a [Check] before it to
// delete a given version only.
func Delete(path string) Op { return Op{kind: kindDelete, path: path, version: AnyVersion} }

// Check changes nothing: it fails the transaction unless the node at path
// exists and, unless version is [AnyVersion], has that data version.
func Check(path string, version int32) Op { return Op{kind: kindCheck, path: path, version: version} }

// Path returns the path the op names.
func (o Op) Path() string { return o.path }

// String names the op, as errors do: "create /a", "set /a@3", "check /a".
func (o Op) String() string {
	name := [...]string{kindCreate: "create", kindCreateSeq: "create sequential", kindSet: "set", kindDelete: "delete", kindCheck: "check"}
	if int(o.kind) >= len(name) || o.kind == 0 {
		return "invalid op"
	}
	s := name[o.kind] + " " + o.path
	if (o.kind == kindSet || o.kind == kindCheck) && o.version != AnyVersion {
		s += "@" + strconv.Itoa(int(o.version))
	}
	return s
}

// request is the op as go-zookeeper sends it in a multi.
func (o Op) request(acl []zk.ACL) any {
	switch o.kind {
	case kindCreate:
		return &zk.CreateRequest{Path: o.path, Data: o.data, Acl: acl}
	case kindCreateSeq:
		return &zk.CreateRequest{Path: o.path, Data: o.data, Acl: acl, Flags: zk.FlagSequence}
	case kindSet:
		return &zk.SetDataRequest{Path: o.path, Data: o.data, Version: o.version}
	case kindDelete:
		return &zk.DeleteRequest{Path: o.path, Version: o.version}
	}
	return &zk.CheckVersionRequest{Path: o.path, Version: o.version}
}

// Result is what one op of a committed transaction did.
type Result struct {
	// Path is the op's path; for a create, the path of the node made
	// (with its sequence number, for CreateSequential).
	Path string
	// Version is the node's data version after a SetData, -1 after the
	// other ops.
	Version int32
}

// OpError is the error of a Commit one of whose ops failed: the server
// applied nothing. It wraps one of [ErrNodeExists], [ErrNoNode],
// [ErrVersionMismatch], [ErrNotEmpty], [ErrPermission] for the common
// causes, and the server's error.
type OpError struct {
	// Index is the op's position among the ops given to Commit.
	Index int
	// Op is the op that failed.
	Op  Op
	Err error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("commit: op %d (%v): %v", e.Index, e.Op, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// Commit applies ops in one ZooKeeper transaction together with a check
// that the hold's node still exists: all of them, only while the hold is
// in force, or none. It returns one [Result] per op. With no ops it asks
// the server whether the hold is still in force, without writing.
//
// Before any I/O, Commit refuses bad input (nil ctx, an invalid path, an
// op that would change the hold's own queue: a delete of its own node, a
// create, delete or write of a lock node in its directory, a write of the
// directory's recorded parameters; a transaction larger, measured as the
// wire carries it, than a request may carry) with [ErrInvalidArgument],
// naming the op or the size and the limit; a hold
// that was released with [ErrNotHeld], and a hold that was lost, or whose
// session is suspended or replaced, with an error wrapping [ErrLost] and
// the reason. While a suspension is in progress ([WithSuspensionTolerance])
// Err stays nil but Commit fails with [ErrConnectionSuspended] as the
// reason: wait for Resumed, then commit again. A ctx that has already
// ended sends nothing, and its error is returned.
//
// The server may refuse the transaction: when the hold's node is gone
// the error wraps [ErrLost] and [ErrNodeDeleted] (or [ErrSessionExpired])
// and the hold ends with it; when one of the ops fails, it is an
// [*OpError] naming the op. Either way nothing was applied. A create
// whose parent is missing also names the first missing parent: Commit
// does not make parents; make them with [Client.EnsurePath] beforehand.
//
// If the connection is lost after the transaction was sent, or ctx ends
// before its reply, the error wraps [ErrCommitUnknown]: it may have been
// applied, while the hold was in force, or not at all. Commit does not
// send it again, since applying the writes twice could be wrong. Read
// back what it wrote to tell (write something that says who wrote it,
// such as the token), or make the transaction one that cannot apply twice
// ([SetDataVersion], [Create], a [Check] of a version) and send it again.
func (h *Hold) Commit(ctx context.Context, ops ...Op) ([]Result, error) {
	if err := h.checkCommit(ctx, ops); err != nil {
		return nil, err
	}
	c := h.l.c
	res, err := c.multi(ctx, append([]Op{Check(h.path, AnyVersion)}, ops...))
	if err != nil {
		return nil, h.commitError(ctx, err)
	}
	return res[1:], nil
}

// checkCommit is what Commit checks before it sends anything: its input,
// the hold, and ctx.
func (h *Hold) checkCommit(ctx context.Context, ops []Op) error {
	if ctx == nil {
		return fmt.Errorf("commit: %w: nil context", ErrInvalidArgument)
	}
	c := h.l.c
	if err := c.checkOps(ops); err != nil {
		return err
	}
	if err := h.checkOwnQueue(ops); err != nil {
		return err
	}
	if err := c.checkSize(h.path, ops); err != nil {
		return err
	}
	if err := h.inForce(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit: %w", err) // nothing sent
	}
	return nil
}

// commitError is the error of a transaction the server refused, or whose
// outcome is unknown: the check of the hold's node failing means the hold
// is lost (the hold ends with it); another op's failure is that op's
// [*OpError], indexed as the caller gave it.
func (h *Hold) commitError(ctx context.Context, err error) error {
	var oe *OpError
	if !errors.As(err, &oe) {
		return err
	}
	if oe.Index > 0 {
		oe.Index--
		h.l.c.explainNoParent(ctx, oe)
		return oe
	}
	if !errors.Is(oe.Err, ErrNoNode) {
		return fmt.Errorf("commit: check of %s: %w", h.path, oe.Err)
	}
	reason := ErrNodeDeleted
	if sid := h.l.c.zk.SessionID(); sid != 0 && sid != h.ep.session {
		reason = ErrSessionExpired
	}
	h.lose(reason)
	return fmt.Errorf("commit: %s: %w", h.path, lostError(reason))
}

// inForce is Commit's look at the hold before it sends anything: nil, or
// the error that says why the hold cannot commit. Unlike Err it does not
// arm the watch on the node: the transaction checks the node itself.
func (h *Hold) inForce() error {
	h.checkSilence()
	h.mu.Lock()
	err, suspended := h.err, h.inSusp
	if h.released && err == nil {
		err = ErrNotHeld // Release is under way
	}
	h.mu.Unlock()
	switch {
	case err != nil:
		return err
	case suspended || h.pending():
		return fmt.Errorf("commit: %s: %w", h.path, lostError(ErrConnectionSuspended))
	}
	if sid := h.l.c.zk.SessionID(); sid != 0 && sid != h.ep.session {
		// A new session: the hold's expired, and its node went with it.
		h.lose(ErrSessionExpired)
		return fmt.Errorf("commit: %s: %w", h.path, lostError(ErrSessionExpired))
	}
	return nil
}

// checkOps refuses ops that no server would take, before any I/O.
func (c *Client) checkOps(ops []Op) error {
	for i, o := range ops {
		if o.kind == 0 {
			return fmt.Errorf("commit: %w: op %d is not made by an Op constructor", ErrInvalidArgument, i)
		}
		if err := ValidatePath(o.path); err != nil {
			return fmt.Errorf("commit: op %d (%v): %w", i, o, err)
		}
		if o.version < AnyVersion {
			return fmt.Errorf("commit: %w: op %d (%v): negative version", ErrInvalidArgument, i, o)
		}
	}
	return nil
}

// checkOwnQueue refuses ops that would change the hold's own queue: a
// delete of the hold's own node (which would end the hold, and be
// reported as someone else's doing), a delete, create or write of
// another lock-like child of the lock directory (see [driver.Classify]:
// a create there, persistent, would block the lock for good; a delete is
// an eviction, see [Lock.Evict]), and a write of the directory's data
// when the lock keeps its parameters there ([LockSpec].DirData). A Check
// of anything, a write of the hold's own node's data, and ops on the
// directory's other children (an application's state kept next to the
// queue) pass.
func (h *Hold) checkOwnQueue(ops []Op) error {
	dir := h.l.dir
	for i, o := range ops {
		if o.kind == kindCheck || (o.path != dir && parentOf(o.path) != dir) {
			continue
		}
		var why string
		name := baseOf(o.path)
		if o.kind == kindCreateSeq {
			name += "0000000000" // as the server names it
		}
		switch {
		case o.path == dir && o.kind == kindSet && h.l.spec.DirData != nil:
			why = "writes the lock directory's record of its parameters"
		case o.path == h.path && o.kind == kindDelete:
			why = "deletes the hold's own node, which would end the hold (use Release)"
		case o.path == h.path || o.path == dir:
			continue
		case driver.Classify(name) != driver.Unrelated:
			why = "names a lock node of the hold's own queue (a persistent one would block the lock for good; Lock.Evict deletes one)"
		default:
			continue
		}
		return fmt.Errorf("commit: %w: op %d (%v) %s; only Check may name the queue of %s",
			ErrInvalidArgument, i, o, why, dir)
	}
	return nil
}

// checkSize refuses, before any I/O, a transaction of ops, behind the
// check of the hold's node at own, that would not fit in a request to the
// servers, measured as the wire carries it.
func (c *Client) checkSize(own string, ops []Op) error {
	bodies := make([]int, 0, len(ops)+1)
	bodies = append(bodies, Check(own, AnyVersion).encodedLen(nil))
	for _, o := range ops {
		bodies = append(bodies, o.encodedLen(c.cfg.acl))
	}
	if err := c.tooLarge(fmt.Sprintf("%d ops", len(ops)), multiLen(bodies...)); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// multi sends ops in one transaction, once: see Hold.Commit for what its
// errors mean.
func (c *Client) multi(ctx context.Context, ops []Op) ([]Result, error) {
	reqs := make([]any, len(ops))
	for i, o := range ops {
		reqs[i] = o.request(c.cfg.acl)
	}
	var res []zk.MultiResponse
	c.stats.commits.Add(1)
	err := c.call(ctx, func() (err error) {
		res, err = c.zk.Multi(reqs...)
		return err
	})
	if err == nil {
		out := make([]Result, len(ops))
		for i, r := range res {
			out[i] = Result{Path: ops[i].path, Version: -1}
			switch {
			case ops[i].kind == kindCreate || ops[i].kind == kindCreateSeq:
				out[i].Path = r.String
			case ops[i].kind == kindSet && r.Stat != nil:
				out[i].Version = r.Stat.Version
			}
		}
		return out, nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, fmt.Errorf("commit: %w: %w", ErrCommitUnknown, err)
	}
	// A refused transaction names its failed op: the first with an error
	// (those before it say OK, those after it that they were not tried).
	for i, r := range res {
		if r.Error != nil && i < len(ops) {
			return nil, &OpError{Index: i, Op: ops[i], Err: serverError(r.Error)}
		}
	}
	return nil, fmt.Errorf("commit: %w: %w", ErrCommitUnknown, err)
}

// serverError adds this package's sentinel to a server's refusal of an op.
func serverError(err error) error {
	for _, m := range [...]struct{ zk, ours error }{
		{zk.ErrNodeExists, ErrNodeExists},
		{zk.ErrNoNode, ErrNoNode},
		{zk.ErrBadVersion, ErrVersionMismatch},
		{zk.ErrNotEmpty, ErrNotEmpty},
		{zk.ErrNoAuth, ErrPermission},
		{zk.ErrAuthFailed, ErrPermission},
	} {
		if errors.Is(err, m.zk) {
			return fmt.Errorf("%w: %w", m.ours, err)
		}
	}
	return err
}
