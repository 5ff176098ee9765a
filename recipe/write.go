package recipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/retry"
)

// Plain writes. A service that takes its locks through this client has
// other traffic too: configuration to write, markers to delete. Create,
// Set and Delete carry it with the client's context handling, retry
// policy, ACL, size check and errors, so that the service needs no second
// session and no go-zookeeper connection. They are not guarded: they
// apply whoever holds what. Writes that must land only while a lock is
// held go through [Hold.Commit].
//
// A write whose connection is lost after it was sent may have been
// applied: the reply is lost, not necessarily the write. Each of these
// calls retries only in a way that cannot apply twice, and reads the
// outcome when the retry alone cannot tell it:
//
//   - Create: the retry of a create that was applied finds the node. When
//     a retried Create finds a node at path with exactly the data asked
//     for and never written since it was made (data version 0), it
//     returns nil: the node it asked for is there, made by the first try
//     (or by another client with the same data meanwhile, which leaves
//     the same state). Otherwise it returns [ErrNodeExists].
//   - Set with a version: the retry of a write that was applied finds the
//     version moved on by one. When the node then has version+1 and the
//     data asked for, Set returns nil and that version. With [AnyVersion]
//     the retry writes the same data again (the data version moves on
//     once per try that was applied).
//   - Delete: the retry of a delete that was applied finds no node; a
//     retried Delete that finds no node returns nil (the node is gone, by
//     this call or by another client meanwhile).
//
// There is no sequential create: a sequential create whose reply was lost
// leaves a node whose name nobody knows, and its retry makes a second
// one. Create nodes under names of your own, or use [CreateSequential] in
// a Commit, which is sent once and reports [ErrCommitUnknown] instead.
//
// When ctx ends while a request is in flight, or the retry policy gives
// up, the write may have been applied or not: the error wraps ctx.Err()
// (or [retry.ErrGaveUp]) and [ErrCommitUnknown]; read back to tell.

// Create makes a persistent node at path with data and the client's ACL
// ([WithACL]). Its parent must exist ([ErrNoNode] otherwise; make it with
// [Client.EnsurePath]); a node at path is an error wrapping
// [ErrNodeExists], except after a lost reply (above). Data larger than a
// request may carry ([WithMaxPacket]) is refused before any I/O with
// [ErrInvalidArgument]; so are a nil ctx and an invalid path, and a closed
// client with [ErrClosed]. A node the client's credentials may not create
// is [ErrPermission].
func (c *Client) Create(ctx context.Context, path string, data []byte) error {
	if err := c.checkWrite(ctx, "create", path, frameLen(createLen(path, data, c.cfg.acl))); err != nil {
		return err
	}
	tries := 0
	err := c.retryDo(ctx, c.noteRetry("create"), func(ctx context.Context) error {
		tries++
		c.stats.creates.Add(1)
		return c.call(ctx, func() error {
			_, err := c.zk.Create(path, data, 0, c.cfg.acl)
			return err
		})
	})
	c.zk.CreateZxid(path) // forget the tap's note: a plain node is nobody's token
	if err != nil && tries > 1 && errors.Is(err, zk.ErrNodeExists) && c.madeAsAsked(ctx, path, data) {
		return nil
	}
	return c.writeError("create", path, err)
}

// madeAsAsked reports whether the node at path has data and was never
// written since it was made.
func (c *Client) madeAsAsked(ctx context.Context, path string, data []byte) bool {
	got, st, err := c.readBack(ctx, path)
	return err == nil && st.Version == 0 && bytes.Equal(got, data)
}

// Set replaces the data of the node at path and returns its new data
// version. With a version other than [AnyVersion] it applies only to
// that version of the node, and is refused with an error wrapping
// [ErrVersionMismatch] otherwise: a compare-and-set against a version
// read with [Client.Get]. A missing node is [ErrNoNode]. A lost reply is
// resolved as described above. Bad input, size, a closed client and
// permissions are as for [Client.Create]; a negative version other than
// AnyVersion is [ErrInvalidArgument].
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (int32, error) {
	if err := c.checkWrite(ctx, "set", path, frameLen(SetData(path, data).encodedLen(nil))); err != nil {
		return 0, err
	}
	if version < AnyVersion {
		return 0, fmt.Errorf("set %s: %w: negative version %d", path, ErrInvalidArgument, version)
	}
	tries := 0
	var st *zk.Stat
	err := c.retryDo(ctx, c.noteRetry("set"), func(ctx context.Context) error {
		tries++
		c.stats.writes.Add(1)
		return c.call(ctx, func() (err error) {
			st, err = c.zk.Set(path, data, version)
			return err
		})
	})
	if err == nil {
		return st.Version, nil
	}
	if tries > 1 && version != AnyVersion && errors.Is(err, zk.ErrBadVersion) {
		got, now, rerr := c.readBack(ctx, path)
		if rerr == nil && now.Version == version+1 && bytes.Equal(got, data) {
			return now.Version, nil // the first try was applied
		}
	}
	return 0, c.writeError("set", path, err)
}

// Delete deletes the node at path. With a version other than
// [AnyVersion] it applies only to that version of the node
// ([ErrVersionMismatch] otherwise). A missing node is [ErrNoNode], except
// after a lost reply (above); a node with children is [ErrNotEmpty]. Bad
// input, a closed client and permissions are as for [Client.Create].
func (c *Client) Delete(ctx context.Context, path string, version int32) error {
	if err := c.checkWrite(ctx, "delete", path, frameLen(Delete(path).encodedLen(nil))); err != nil {
		return err
	}
	if version < AnyVersion {
		return fmt.Errorf("delete %s: %w: negative version %d", path, ErrInvalidArgument, version)
	}
	tries := 0
	err := c.retryDo(ctx, c.noteRetry("delete"), func(ctx context.Context) error {
		tries++
		c.stats.deletes.Add(1)
		return c.call(ctx, func() error { return c.zk.Delete(path, version) })
	})
	if err != nil && tries > 1 && errors.Is(err, zk.ErrNoNode) {
		return nil // gone: by the try whose reply was lost, or by someone else
	}
	return c.writeError("delete", path, err)
}

// checkWrite refuses, before any I/O, what checkRead refuses, the root,
// a request of size bytes (its frame) over the servers' limit, and a ctx
// that has ended (sending nothing).
func (c *Client) checkWrite(ctx context.Context, op, path string, size int) error {
	if err := c.checkRead(ctx, op, path); err != nil {
		return err
	}
	if path == "/" {
		return fmt.Errorf("%s /: %w: the root cannot be written", op, ErrInvalidArgument)
	}
	if err := c.tooLarge(op+" "+path, size); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, path, err) // nothing sent
	}
	return nil
}

// readBack reads the node at path after a write whose reply was lost,
// with the retry policy: its data and stat.
func (c *Client) readBack(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	var data []byte
	var st *zk.Stat
	err := c.retryDo(ctx, c.noteRetry("read back"), func(ctx context.Context) (err error) {
		data, st, err = c.get(ctx, path)
		return err
	})
	return data, st, err
}

// writeError is readError for writes: an error after which the write may
// have been applied (ctx ended with the request in flight, or the retry
// policy gave up on connection loss) also wraps ErrCommitUnknown.
func (c *Client) writeError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	unknown := errors.Is(err, retry.ErrGaveUp) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
	err = c.readError(op, path, err)
	if unknown && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	return err
}
