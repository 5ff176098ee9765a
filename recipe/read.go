package recipe

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// Reads and parents around a lock. A holder usually reads the state its
// lock protects before it writes it with [Hold.Commit], and the nodes it
// commits need a parent. The four calls below do that with the client's
// context handling, retry policy, ACL and errors, so that a lock user
// needs no go-zookeeper connection. With the plain writes ([Client.Create],
// [Client.Set], [Client.Delete]) they carry a service's other traffic on
// the same session. They are not a general ZooKeeper client: no watches,
// no ephemeral or sequential nodes (see [Client.Conn] for those).
//
// Reads are served by the server the session is connected to, which may
// be a moment behind the ensemble's leader. A data version read so is safe
// to write against ([SetDataVersion], [Check]): if it is stale, the Commit
// fails with [ErrVersionMismatch] and applies nothing. A Commit, even one
// with no ops, is answered in the order of all writes, so a read after a
// Commit that returned nil sees every write committed before it: after
// [ErrCommitUnknown], while the hold is in force, commit nothing and then
// read back.

// Get returns the data of the node at path and its data version, the
// version to give [SetDataVersion] or [Check] in a later Commit so that
// the write applies only to what was read.
//
// A missing node is an error wrapping [ErrNoNode]; a node the client's
// credentials may not read, [ErrPermission]. Connection loss is retried
// under the client's retry policy; when ctx ends first the error wraps
// ctx.Err(), and when the policy gives up, [retry.ErrGaveUp]. Bad input
// (nil ctx, an invalid path) is refused before any I/O with
// [ErrInvalidArgument], and a closed client with [ErrClosed].
func (c *Client) Get(ctx context.Context, path string) (data []byte, version int32, err error) {
	if err := c.checkRead(ctx, "get", path); err != nil {
		return nil, 0, err
	}
	var st *zk.Stat
	err = c.retryDo(ctx, c.noteRetry("get"), func(ctx context.Context) (err error) {
		data, st, err = c.get(ctx, path)
		return err
	})
	if err != nil {
		return nil, 0, c.readError("get", path, err)
	}
	return data, st.Version, nil
}

// Exists reports whether a node exists at path. It sets no watch. Errors
// are those of [Client.Get], except that a missing node is false and no
// error.
func (c *Client) Exists(ctx context.Context, path string) (bool, error) {
	if err := c.checkRead(ctx, "exists", path); err != nil {
		return false, err
	}
	err := c.retryDo(ctx, c.noteRetry("exists"), func(ctx context.Context) error {
		_, _, err := c.get(ctx, path)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	}
	return false, c.readError("exists", path, err)
}

// Children returns the names (not the paths) of the children of the node
// at path, sorted. Errors are those of [Client.Get]: a missing node wraps
// [ErrNoNode].
func (c *Client) Children(ctx context.Context, path string) ([]string, error) {
	if err := c.checkRead(ctx, "children", path); err != nil {
		return nil, err
	}
	var names []string
	err := c.retryDo(ctx, c.noteRetry("children"), func(ctx context.Context) (err error) {
		names, err = c.children(ctx, path)
		return err
	})
	if err != nil {
		return nil, c.readError("children", path, err)
	}
	names = slices.Clone(names) // the listing's names may share memory
	slices.Sort(names)
	return names, nil
}

// EnsurePath makes sure a node exists at path, creating it and every
// missing ancestor as persistent nodes with no data and the client's ACL
// ([WithACL]). Nodes that exist already are left as they are, whatever
// their kind and ACL; a node created by someone else meanwhile is fine.
//
// Use it for the parents of what a [Hold.Commit] creates, before the lock
// is taken or at least outside the guarded transaction: parents made
// there are not undone if the commit fails, and a guard cannot make
// them, so a Commit whose create finds no parent fails with [ErrNoNode]
// and names the first missing one. Lock directories need no EnsurePath:
// the recipes make them, as container nodes.
//
// Errors are those of [Client.Get]. On error, the ancestors it made stay.
func (c *Client) EnsurePath(ctx context.Context, path string) error {
	if err := c.checkRead(ctx, "ensure path", path); err != nil {
		return err
	}
	if path == "/" {
		return nil
	}
	note := c.noteRetry("ensure path")
	var made func(p string, tries int) error
	made = func(p string, tries int) error {
		err := c.retryDo(ctx, note, func(ctx context.Context) error {
			c.stats.creates.Add(1)
			return c.call(ctx, func() error {
				_, err := c.zk.Create(p, nil, 0, c.cfg.acl)
				return err
			})
		})
		c.zk.CreateZxid(p) // a parent's zxid is nobody's token
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode) && tries > 0 && parentOf(p) != "":
			if err := made(parentOf(p), maxSetupTries); err != nil {
				return err
			}
			return made(p, tries-1) // unless the parent went again meanwhile
		}
		return err
	}
	if err := made(path, maxSetupTries); err != nil {
		return c.readError("ensure path", path, err)
	}
	return nil
}

// checkRead refuses what no request should carry: a nil ctx, an invalid
// path (the root is fine here), a closed client.
func (c *Client) checkRead(ctx context.Context, op, path string) error {
	if ctx == nil {
		return fmt.Errorf("%s %s: %w: nil context", op, path, ErrInvalidArgument)
	}
	if path != "/" {
		if err := ValidatePath(path); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if c.isClosed() {
		return fmt.Errorf("%s %s: %w", op, path, ErrClosed)
	}
	return nil
}

// readError puts op, path and the engine's sentinel on an error of the
// calls above.
func (c *Client) readError(op, path string, err error) error {
	if err = c.mapClosed(err); errors.Is(err, ErrClosed) {
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, serverError(err))
}

// explainNoParent adds to the error of a guarded create refused for lack
// of a parent which ancestor is missing, and what to do about it.
func (c *Client) explainNoParent(ctx context.Context, oe *OpError) {
	if (oe.Op.kind != kindCreate && oe.Op.kind != kindCreateSeq) || !errors.Is(oe.Err, ErrNoNode) {
		return
	}
	oe.Err = fmt.Errorf("%w; parent %s does not exist: make parents with Client.EnsurePath before committing (a guarded transaction does not make them)",
		oe.Err, c.missingParent(ctx, oe.Op.path))
}

// missingParent returns the first ancestor of path that does not exist,
// found with one read per ancestor from the root down, or, when that
// cannot be read, path's parent "(or an ancestor)".
func (c *Client) missingParent(ctx context.Context, path string) string {
	parent := parentOf(path)
	unsure := parent + " (or an ancestor)"
	if parent == "" || ctx.Err() != nil {
		return unsure
	}
	for i := 2; i <= len(parent); i++ {
		if i < len(parent) && parent[i] != '/' {
			continue
		}
		_, _, err := c.get(ctx, parent[:i])
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return parent[:i]
		case err != nil:
			return unsure
		}
	}
	return unsure // made since the commit was refused
}
