package recipe

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/retry"
)

// The methods below are go-zookeeper requests with a context and counters.
// They do not retry; callers run them under retryDo where that is right.
// On error they return no results: a request abandoned because its context
// ended may still be writing them.

func (c *Client) children(ctx context.Context, dir string) ([]string, error) {
	var names []string
	c.stats.lists.Add(1)
	err := c.call(ctx, func() (err error) {
		names, _, err = c.conn.Children(dir)
		return err
	})
	if err != nil {
		return nil, err // results may still be written by an abandoned request
	}
	return names, nil
}

func (c *Client) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	var data []byte
	var st *zk.Stat
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		data, st, err = c.conn.Get(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return data, st, nil
}

func (c *Client) getW(ctx context.Context, path string) (*zk.Stat, <-chan zk.Event, error) {
	_, st, ch, err := c.GetW(ctx, path)
	return st, ch, err
}

func (c *Client) delete(ctx context.Context, path string) error {
	c.stats.deletes.Add(1)
	return c.call(ctx, func() error { return c.conn.Delete(path, -1) })
}

// createEphemeralSeq sends a create for an ephemeral sequential node. When
// ctx ends before the reply, it returns ctx's error and a channel closed once
// the request has finished, so cleanup can then look for the node.
//
// zxid is the node's czxid as seen on the wire, 0 if unknown.
func (c *Client) createEphemeralSeq(ctx context.Context, path string, data []byte) (string, int64, <-chan struct{}, error) {
	var created string
	inflight, err := c.callTracked(ctx, func() (err error) {
		created, err = c.conn.Create(path, data, zk.FlagEphemeral|zk.FlagSequence, c.cfg.acl)
		return err
	})
	c.stats.creates.Add(1)
	if err != nil {
		return "", 0, inflight, err
	}
	zxid, _ := c.zxids.take(created)
	return created, zxid, nil, nil
}

// createEphemeralSeqMulti creates one ephemeral sequential node per path in a
// single transaction: all or none, with consecutive sequence numbers. It
// returns the created paths; see createEphemeralSeq for inflight.
func (c *Client) createEphemeralSeqMulti(ctx context.Context, paths []string, data []byte) ([]string, <-chan struct{}, error) {
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.CreateRequest{Path: p, Data: data, Acl: c.cfg.acl, Flags: zk.FlagEphemeral | zk.FlagSequence}
	}
	var res []zk.MultiResponse
	inflight, err := c.callTracked(ctx, func() (err error) {
		res, err = c.conn.Multi(ops...)
		return err
	})
	c.stats.creates.Add(1)
	if err != nil {
		return nil, inflight, err
	}
	out := make([]string, len(res))
	for i, r := range res {
		if r.Error != nil {
			return nil, nil, r.Error
		}
		out[i] = r.String
	}
	return out, nil, nil
}

// callTracked is call for requests whose abandonment matters (creates):
// when ctx ends first it also returns a channel closed once op has finished.
func (c *Client) callTracked(ctx context.Context, op func() error) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.enter() {
		return nil, ErrClosed
	}
	finished := make(chan struct{})
	var opErr error
	go func() {
		defer c.wg.Done()
		opErr = op()
		close(finished)
	}()
	select {
	case <-finished:
		return nil, c.mapClosed(opErr)
	case <-ctx.Done():
		return finished, ctx.Err()
	}
}

// ensureDir creates dir and any missing parents as CONTAINER nodes, which the
// server deletes once they are empty. Existing nodes are fine.
// data is stored in dir itself if this call creates it.
func (c *Client) ensureDir(ctx context.Context, dir string, data []byte) error {
	if dir == "" {
		return nil
	}
	for range 8 {
		c.stats.creates.Add(1)
		err := c.call(ctx, func() error {
			_, err := c.conn.CreateContainer(dir, data, zk.FlagContainer, c.cfg.acl)
			return err
		})
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			c.zxids.take(dir) // nobody needs a directory's zxid
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.ensureDir(ctx, parentOf(dir), nil); err != nil {
				return err
			}
			// The parent exists now (unless reaped again): try once more.
		default:
			return opError("create container", dir, err)
		}
	}
	return opError("create container", dir, zk.ErrNoNode)
}

// cleanupJob asks for the deletion of a node this client created, or may
// have created. A node carrying the attempt's UUID is ours whatever session
// owns it: a create queued across a session expiry is sent, and applied, in
// the new session.
type cleanupJob struct {
	dir      string
	prefix   string          // protected prefix of the attempt's nodes
	path     string          // the node, when known
	sweep    bool            // also delete every child carrying prefix
	inflight <-chan struct{} // closed when a create still in flight has finished
}

// cleanup deletes the job's node in the background, retrying connection-loss
// errors until the node is gone (deleted, or removed by the server with the
// session that owned it) or the client closes, which ends the session. The
// returned channel is closed when the job is finished.
func (c *Client) cleanup(j cleanupJob) <-chan struct{} {
	done := make(chan struct{})
	if !c.enter() {
		close(done)
		return done
	}
	go func() {
		defer c.wg.Done()
		defer close(done)
		c.runCleanup(j)
	}()
	return done
}

func (c *Client) runCleanup(j cleanupJob) {
	ctx := c.lifetime
	if j.inflight != nil {
		select {
		case <-j.inflight:
		case <-ctx.Done():
			return
		}
	}
	sched := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(20*time.Millisecond),
		backoff.WithMaxInterval(2*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
	node := j.path
	if node == "" {
		node = j.prefix + "*"
	}
	for {
		done, err := c.cleanupOnce(ctx, &j)
		if ctx.Err() != nil {
			return // closing ends the session, which removes the node
		}
		if done {
			if err != nil {
				c.log.Warn("cannot delete lock node", "dir", j.dir, "node", node, "err", err)
			} else {
				c.log.Debug("lock node cleaned up", "dir", j.dir, "node", node)
			}
			return
		}
		t := time.NewTimer(sched.NextBackOff())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// cleanupOnce makes one attempt; done reports whether the job is finished.
func (c *Client) cleanupOnce(ctx context.Context, j *cleanupJob) (done bool, err error) {
	if j.path != "" {
		err := c.delete(ctx, j.path)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			j.path = ""
		case retry.Retryable(err):
			return false, err
		default:
			return true, err
		}
	}
	if !j.sweep {
		return true, nil
	}
	names, err := c.children(ctx, j.dir)
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return !retry.Retryable(err), err
	}
	for _, n := range names {
		if !strings.HasPrefix(n, j.prefix) {
			continue
		}
		err := c.delete(ctx, join(j.dir, n))
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
		case retry.Retryable(err):
			return false, err
		default:
			return true, err
		}
	}
	return true, nil
}
