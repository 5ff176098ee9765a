package recipe

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// The methods below are go-zookeeper requests with a context and counters.
// They do not retry; callers run them under retryDo where that is right.
// On error they return no results: a request abandoned because its context
// ended may still be writing them.

func (c *Client) children(ctx context.Context, dir string) ([]string, error) {
	c.stats.lists.Add(1)
	var names []string
	err := c.call(ctx, func() (err error) {
		names, _, err = c.zk.Children(dir)
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
		data, st, err = c.zk.Get(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return data, st, nil
}

func (c *Client) getW(ctx context.Context, path string) (*zk.Stat, <-chan zk.Event, error) {
	_, st, ch, err := c.getDataW(ctx, path)
	return st, ch, err
}

func (c *Client) getDataW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	var data []byte
	var st *zk.Stat
	var ch <-chan zk.Event
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		data, st, ch, err = c.zk.GetW(path)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return data, st, ch, nil
}

func (c *Client) childrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	var names []string
	var ch <-chan zk.Event
	c.stats.lists.Add(1)
	err := c.call(ctx, func() (err error) {
		names, _, ch, err = c.zk.ChildrenW(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return names, ch, nil
}

func (c *Client) existsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	var ok bool
	var st *zk.Stat
	var ch <-chan zk.Event
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		ok, st, ch, err = c.zk.ExistsW(path)
		return err
	})
	if err != nil {
		return false, nil, nil, err
	}
	return ok, st, ch, nil
}

func (c *Client) setData(ctx context.Context, path string, data []byte) error {
	c.stats.writes.Add(1)
	return c.call(ctx, func() error {
		_, err := c.zk.Set(path, data, -1)
		return err
	})
}

func (c *Client) delete(ctx context.Context, path string) error {
	c.stats.deletes.Add(1)
	return c.call(ctx, func() error { return c.zk.Delete(path, -1) })
}

// createRequest asks createNodes for one ephemeral sequential node per
// path, each carrying data.
type createRequest struct {
	paths  []string
	data   []byte
	dir    string // the lock directory
	behind bool   // list dir behind a single create, in its round trip
	// readDir reads dir's data as well, with behind.
	readDir bool
}

// createResult is what createNodes learnt.
type createResult struct {
	nodes []string // the created paths
	zxids []int64  // their zxids as seen on the wire, 0 where unknown
	read  *queueRead
	// inflight, when ctx ended before the reply, is closed once the request
	// has finished, so cleanup can then look for the nodes.
	inflight <-chan struct{}
}

// createNodes creates one ephemeral sequential node per path: with one
// create, or, for several, in a single transaction (all or none, with
// consecutive sequence numbers). The zxids of a transaction are never
// known. When ctx ends before the reply, it returns ctx's error and the
// inflight channel.
//
// With behind set, a single create carries the reads of the queue in its
// round trip: see createThenRead. read is nil otherwise.
func (c *Client) createNodes(ctx context.Context, req createRequest) (createResult, error) {
	if len(req.paths) == 1 {
		return c.createThenRead(ctx, req)
	}
	// The request may outlive this call (when ctx ends first): it writes
	// only to out, which is read after a successful return.
	out := make([]string, len(req.paths))
	ops := make([]any, len(req.paths))
	for i, p := range req.paths {
		ops[i] = &zk.CreateRequest{Path: p, Data: req.data, Acl: c.cfg.acl, Flags: ephemeralSequential}
	}
	c.stats.creates.Add(1)
	inflight, err := c.callTracked(ctx, func() error {
		res, err := c.zk.Multi(ops...)
		for i, r := range res {
			if r.Error != nil && err == nil {
				err = r.Error
			}
			out[i] = r.String
		}
		return err
	})
	if err != nil {
		return createResult{inflight: inflight}, err
	}
	return createResult{nodes: out, zxids: make([]int64, len(out))}, nil
}

const ephemeralSequential = zk.FlagEphemeral | zk.FlagSequence

// queueRead is what an acquire learns of its lock directory in the round
// trip of its create.
type queueRead struct {
	names   []string // the directory's children
	errL    error
	dirData []byte // the directory's data, when asked for
	errD    error
}

// createThenRead creates req's one node and, with req.behind set, in the
// same round trip lists the directory (and reads its data if req.readDir):
// the seam sends the reads behind the create (transport.CreateThenRead).
// read is nil when the reads were not sent (not asked for, or the
// create's reply came first); the caller then reads separately. When ctx
// ends before the replies, it returns ctx's error and the inflight
// channel.
func (c *Client) createThenRead(ctx context.Context, req createRequest) (createResult, error) {
	path := req.paths[0]
	dir := ""
	if req.behind {
		dir = req.dir
	}
	if err := ctx.Err(); err != nil {
		return createResult{}, err // nothing sent, nothing counted
	}
	var out created // written by the request, read once it is done
	c.stats.creates.Add(1)
	inflight, err := c.callTracked(ctx, func() (err error) {
		out, err = c.zk.CreateThenRead(path, req.data, ephemeralSequential, c.cfg.acl, dir, req.readDir)
		return err
	})
	if err != nil {
		return createResult{inflight: inflight}, err
	}
	res := createResult{nodes: []string{out.Path}, zxids: []int64{out.Zxid}}
	if l := out.Read; l != nil {
		c.stats.lists.Add(1)
		res.read = &queueRead{names: l.Names, errL: c.mapClosed(l.ErrL)}
		if l.DataRead {
			c.stats.reads.Add(1)
			res.read.dirData, res.read.errD = l.Data, c.mapClosed(l.ErrD)
		}
	}
	return res, nil
}

// call runs op, which performs one go-zookeeper request, and returns its
// error, or ctx's error as soon as ctx ends. go-zookeeper has no contexts; an
// abandoned request finishes in the background (every request ends when its
// connection does) and its result is discarded, so op must only write to
// variables the caller reads after a nil return.
func (c *Client) call(ctx context.Context, op func() error) error {
	_, err := c.callTracked(ctx, op)
	return err
}

// callTracked is call for requests whose abandonment matters (creates):
// when ctx ends first it also returns a channel closed once op has finished.
func (c *Client) callTracked(ctx context.Context, op func() error) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ctx.Done() == nil {
		// Nothing can end the wait (context.Background, say): the caller
		// waits for the reply itself, with no worker in between.
		if c.isClosed() {
			return nil, ErrClosed
		}
		return nil, c.mapClosed(op())
	}
	r := c.start(op)
	select {
	case <-r.done:
		return nil, c.mapClosed(r.err)
	case <-ctx.Done():
		r.abandoned.Store(true)
		return r.done, ctx.Err()
	}
}

// ensureDir creates dir and any missing parents as CONTAINER nodes, which the
// server deletes once they are empty. Existing nodes are fine.
// data is stored in dir itself if this call creates it.
func (c *Client) ensureDir(ctx context.Context, dir string, data []byte) error {
	return c.ensureDirACL(ctx, dir, data, c.cfg.acl)
}

// ensureDirACL is ensureDir with the ACL of dir. Missing ancestors get
// parentACL: the client's own ACL when it checks the ACLs of its lock
// directories, so that nobody else can make the lock directory, open,
// after the server reaped it; an open ACL otherwise, as Curator gives them
// by default. Parents shared by clients with different credentials are
// made beforehand, with an ACL that lets each in (docs/operations.md).
func (c *Client) ensureDirACL(ctx context.Context, dir string, data []byte, acl []zk.ACL) error {
	if dir == "" {
		return nil
	}
	for range maxSetupTries {
		c.stats.creates.Add(1)
		err := c.call(ctx, func() error {
			_, err := c.zk.CreateContainer(dir, data, zk.FlagContainer, acl)
			return err
		})
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			c.zk.CreateZxid(dir) // nobody needs a directory's zxid
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.ensureDirACL(ctx, parentOf(dir), nil, c.parentACL()); err != nil {
				return err
			}
			// The parent exists now (unless reaped again): try once more.
		default:
			return opError("create container", dir, err)
		}
	}
	return opError("create container", dir, zk.ErrNoNode)
}
