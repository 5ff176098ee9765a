package recipe

import (
	"context"
	"errors"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/retry"
)

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
	if !c.goroutine(func() {
		defer close(done)
		c.runCleanup(j)
	}) {
		close(done)
	}
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
	p := c.Backoff()
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
		if !p.Pause(ctx) {
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
