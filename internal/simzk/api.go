package simzk

import (
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// The requests of a Conn: each returns what go-zookeeper's method of the
// same name returns in the same case, errors included (the client-side
// checks of paths and flags, the server's errors, zk.ErrConnectionClosed
// when the connection is lost before the reply).

// Children returns the names of the children of path, in no particular
// order, and the stat of path.
func (c *Conn) Children(path string) ([]string, *zk.Stat, error) {
	if err := checkPath(path, false); err != nil {
		return nil, nil, err
	}
	r := c.do(&call{op: "getChildren2", path: path, exec: func(w *World, l *link) reply {
		return w.getChildren(l, path, false)
	}})
	if r.err == zk.ErrConnectionClosed {
		return nil, nil, r.err
	}
	return r.children, &r.stat, r.err
}

// ChildrenW is Children that also sets a child watch on path.
func (c *Conn) ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	if err := checkPath(path, false); err != nil {
		return nil, nil, nil, err
	}
	var ech <-chan zk.Event
	r := c.do(&call{op: "getChildren2", path: path,
		exec: func(w *World, l *link) reply { return w.getChildren(l, path, true) },
		recv: func(r *reply) {
			if r.err == nil {
				ech = c.addWatcher(path, watchChild)
			}
		}})
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	return r.children, &r.stat, ech, nil
}

// Get returns the data and stat of path.
func (c *Conn) Get(path string) ([]byte, *zk.Stat, error) {
	if err := checkPath(path, false); err != nil {
		return nil, nil, err
	}
	r := c.do(&call{op: "getData", path: path, exec: func(w *World, l *link) reply {
		return w.getData(l, path, false)
	}})
	if r.err == zk.ErrConnectionClosed {
		return nil, nil, r.err
	}
	return r.data, &r.stat, r.err
}

// GetW is Get that also sets a data watch on path.
func (c *Conn) GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	if err := checkPath(path, false); err != nil {
		return nil, nil, nil, err
	}
	var ech <-chan zk.Event
	r := c.do(&call{op: "getData", path: path,
		exec: func(w *World, l *link) reply { return w.getData(l, path, true) },
		recv: func(r *reply) {
			if r.err == nil {
				ech = c.addWatcher(path, watchData)
			}
		}})
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	return r.data, &r.stat, ech, nil
}

// ExistsW tells whether path exists, with its stat if it does, and sets
// a watch on path: a data watch if it exists, else one that fires when it
// is created.
func (c *Conn) ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	if err := checkPath(path, false); err != nil {
		return false, nil, nil, err
	}
	var ech <-chan zk.Event
	r := c.do(&call{op: "exists", path: path,
		exec: func(w *World, l *link) reply { return w.exists(l, path, true) },
		recv: func(r *reply) {
			switch r.err {
			case nil:
				ech = c.addWatcher(path, watchData)
			case zk.ErrNoNode:
				ech = c.addWatcher(path, watchExist)
			}
		}})
	exists := true
	if r.err == zk.ErrNoNode {
		exists, r.err = false, nil
	}
	if r.err != nil {
		return false, nil, nil, r.err
	}
	return exists, &r.stat, ech, nil
}

// Set sets the data of path if its version is version (-1: any).
func (c *Conn) Set(path string, data []byte, version int32) (*zk.Stat, error) {
	if err := checkPath(path, false); err != nil {
		return nil, err
	}
	data = slices.Clone(data)
	r := c.do(&call{op: "setData", path: path, exec: func(w *World, l *link) reply {
		t := w.begin()
		st, err := t.set(path, data, version)
		return t.end(reply{stat: st}, err)
	}})
	if r.err == zk.ErrConnectionClosed {
		return nil, r.err
	}
	return &r.stat, r.err
}

// Delete deletes path if its version is version (-1: any).
func (c *Conn) Delete(path string, version int32) error {
	if err := checkPath(path, false); err != nil {
		return err
	}
	r := c.do(&call{op: "delete", path: path, exec: func(w *World, l *link) reply {
		t := w.begin()
		return t.end(reply{}, t.del(path, version))
	}})
	return r.err
}

// Create creates a node and returns its path (with the sequence number
// appended for a sequential node). As with go-zookeeper, the container
// flag makes a plain persistent node here (CreateContainer makes
// containers) and the TTL flags are refused.
func (c *Conn) Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	mode, err := parseFlags(flags)
	if err != nil {
		return "", err
	}
	if err := checkPath(path, mode.sequential); err != nil {
		return "", err
	}
	if mode.ttl {
		return "", fmt.Errorf("Create with TTL flag disallowed: %w", zk.ErrInvalidFlags)
	}
	// A create request carries the flags, and ZooKeeper makes a node of a
	// create request with the container flag an ordinary one.
	mode.container = false
	r := c.do(c.createCall("create", path, data, mode, acl))
	if r.err == zk.ErrConnectionClosed {
		return "", r.err
	}
	return r.path, r.err
}

// CreateContainer creates a container node: the server deletes it once
// it has had children and has none left (here, as its last child goes).
// flags must be zk.FlagContainer.
func (c *Conn) CreateContainer(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	mode, err := parseFlags(flags)
	if err != nil {
		return "", err
	}
	if err := checkPath(path, mode.sequential); err != nil {
		return "", err
	}
	if !mode.container {
		return "", fmt.Errorf("CreateContainer requires container flag: %w", zk.ErrInvalidFlags)
	}
	r := c.do(c.createCall("createContainer", path, data, mode, acl))
	return r.path, r.err
}

func (c *Conn) createCall(op, path string, data []byte, mode createMode, acl []zk.ACL) *call {
	data = slices.Clone(data)
	acl = slices.Clone(acl)
	return &call{op: op, path: path, exec: func(w *World, l *link) reply {
		t := w.begin()
		p, err := t.create(path, data, acl, mode, l.s.id, false)
		return t.end(reply{path: p}, err)
	}}
}

// Multi applies the operations (*zk.CreateRequest, *zk.SetDataRequest,
// *zk.DeleteRequest, *zk.CheckVersionRequest) all or none, in one
// transaction. When one fails, nothing is applied and the result is
// go-zookeeper's: each operation before it has a nil Error, it has its
// error, each after it has "unknown error: -2" (ZooKeeper's runtime
// inconsistency), and the call's error is its error.
func (c *Conn) Multi(ops ...any) ([]zk.MultiResponse, error) {
	cp := make([]any, 0, len(ops))
	for _, op := range ops {
		switch op := op.(type) {
		case *zk.CreateRequest:
			o := *op
			o.Data, o.Acl = slices.Clone(o.Data), slices.Clone(o.Acl)
			cp = append(cp, &o)
		case *zk.SetDataRequest:
			o := *op
			o.Data = slices.Clone(o.Data)
			cp = append(cp, &o)
		case *zk.DeleteRequest:
			o := *op
			cp = append(cp, &o)
		case *zk.CheckVersionRequest:
			o := *op
			cp = append(cp, &o)
		default:
			return nil, fmt.Errorf("unknown operation type %T", op)
		}
	}
	r := c.do(&call{op: "multi", exec: func(w *World, l *link) reply { return w.multi(l, cp) }})
	if r.err == zk.ErrConnectionClosed {
		return nil, r.err
	}
	if r.multi == nil {
		r.multi = []zk.MultiResponse{}
	}
	return r.multi, r.err
}

// AddAuth adds credentials to the connection, which the client sends
// again on every reconnect. The model knows the schemes "digest" and
// "ip" and checks nothing; with another scheme the server answers
// zk.ErrAuthFailed and closes the connection, as ZooKeeper does.
func (c *Conn) AddAuth(scheme string, auth []byte) error {
	cr := cred{scheme: scheme, auth: slices.Clone(auth)}
	r := c.do(c.authCall(cr, true))
	return r.err
}

// authCall makes a setAuth request; a caller's, when it succeeds, is
// remembered for the reconnects.
func (c *Conn) authCall(cr cred, remember bool) *call {
	cl := &call{op: "setAuth", exec: func(w *World, l *link) reply {
		switch cr.scheme {
		case "digest", "ip":
			return reply{zxid: w.zxid}
		}
		return reply{zxid: w.zxid, err: zk.ErrAuthFailed, closeAfter: true}
	}}
	if remember {
		cl.recv = func(r *reply) {
			if r.err == nil {
				c.creds = append(c.creds, cr)
			}
		}
	}
	return cl
}

func (c *Conn) pingCall() *call {
	return &call{op: "ping", noZxid: true, exec: func(w *World, l *link) reply {
		return reply{zxid: w.zxid}
	}}
}

// setWatchesCall makes the request with which go-zookeeper sets its
// watches again on a new connection to its session, relative to the last
// zxid it has seen.
func (c *Conn) setWatchesCall() *call {
	rel := c.lastZxid
	var data, exist, child []string
	for k := range c.watchers {
		switch k.kind {
		case watchData:
			data = append(data, k.path)
		case watchExist:
			exist = append(exist, k.path)
		case watchChild:
			child = append(child, k.path)
		}
	}
	slices.Sort(data)
	slices.Sort(exist)
	slices.Sort(child)
	return &call{op: "setWatches", exec: func(w *World, l *link) reply {
		w.setWatches(l, rel, data, exist, child)
		return reply{zxid: w.zxid}
	}}
}

// end finishes a write: the reply carries the transaction's zxid; a
// failed write is undone (its zxid stays taken), a good one committed.
func (t *txn) end(r reply, err error) reply {
	r.zxid = t.zxid
	if err != nil {
		t.rollback()
		return reply{zxid: t.zxid, err: err}
	}
	t.commit()
	return r
}

// The server's reads. Under World.mu.

func (w *World) getData(l *link, path string, watch bool) reply {
	n := w.nodes[path]
	if n == nil {
		return reply{zxid: w.zxid, err: zk.ErrNoNode}
	}
	if watch {
		w.watch(l, path, false)
	}
	return reply{zxid: w.zxid, data: slices.Clone(n.data), stat: n.stat()}
}

func (w *World) exists(l *link, path string, watch bool) reply {
	if watch {
		// ZooKeeper sets the watch whether the node exists or not.
		w.watch(l, path, false)
	}
	n := w.nodes[path]
	if n == nil {
		return reply{zxid: w.zxid, err: zk.ErrNoNode}
	}
	return reply{zxid: w.zxid, stat: n.stat()}
}

func (w *World) getChildren(l *link, path string, watch bool) reply {
	n := w.nodes[path]
	if n == nil {
		return reply{zxid: w.zxid, err: zk.ErrNoNode}
	}
	if watch {
		w.watch(l, path, true)
	}
	return reply{zxid: w.zxid, children: w.children(n), stat: n.stat()}
}

// setWatches sets a reconnected client's watches as ZooKeeper does: a
// watch whose node changed after the client's last zxid fires at once
// (a data watch on a deleted or changed node, an exists watch on a node
// now there, a child watch on a deleted node or one whose children
// changed); the others are set.
func (w *World) setWatches(l *link, rel int64, data, exist, child []string) {
	fire := func(typ zk.EventType, path string) {
		l.push(message{kind: msgEvent, ev: zk.Event{Type: typ, State: zk.StateSyncConnected, Path: path}})
	}
	for _, p := range data {
		switch n := w.nodes[p]; {
		case n == nil:
			fire(zk.EventNodeDeleted, p)
		case n.mzxid > rel:
			fire(zk.EventNodeDataChanged, p)
		default:
			w.watch(l, p, false)
		}
	}
	for _, p := range exist {
		if w.nodes[p] != nil {
			fire(zk.EventNodeCreated, p)
		} else {
			w.watch(l, p, false)
		}
	}
	for _, p := range child {
		switch n := w.nodes[p]; {
		case n == nil:
			fire(zk.EventNodeDeleted, p)
		case n.pzxid > rel:
			fire(zk.EventNodeChildrenChanged, p)
		default:
			w.watch(l, p, true)
		}
	}
}

// multi applies the operations of a multi in one transaction.
func (w *World) multi(l *link, ops []any) reply {
	for _, op := range ops {
		if cr, ok := op.(*zk.CreateRequest); ok && (cr.Flags == zk.FlagTTL || cr.Flags == zk.FlagPersistentSequentialWithTTL) {
			// ZooKeeper refuses the whole request, after taking a
			// zxid, with a marshalling error in the reply header.
			t := w.begin()
			return t.end(reply{}, codeError(-5))
		}
	}
	t := w.begin()
	res := make([]zk.MultiResponse, len(ops))
	failed, container := -1, -1
	var ferr error
	for i, op := range ops {
		var err error
		switch op := op.(type) {
		case *zk.CreateRequest:
			mode, perr := parseFlags(op.Flags)
			if perr != nil {
				err = zk.ErrBadArguments
				break
			}
			if mode.container && container < 0 {
				container = i
			}
			res[i].String, err = t.create(op.Path, op.Data, op.Acl, mode, l.s.id, true)
		case *zk.SetDataRequest:
			var st zk.Stat
			if st, err = t.set(op.Path, op.Data, op.Version); err == nil {
				res[i].Stat = &st
			}
		case *zk.DeleteRequest:
			err = t.del(op.Path, op.Version)
		case *zk.CheckVersionRequest:
			err = t.check(op.Path, op.Version)
		}
		if err != nil {
			failed, ferr = i, err
			break
		}
	}
	if failed >= 0 {
		t.rollback()
		for i := range res {
			res[i] = zk.MultiResponse{}
			switch {
			case i == failed:
				res[i].Error = ferr
			case i > failed:
				res[i].Error = errRuntimeInconsistency
			}
		}
		return reply{zxid: t.zxid, err: ferr, multi: res}
	}
	t.commit()
	if container >= 0 {
		// Applied, but the server answers a container create in a multi
		// with a result type go-zookeeper cannot read: it returns the
		// results before it and zk.ErrAPIError.
		return reply{zxid: t.zxid, err: zk.ErrAPIError, multi: res[:container]}
	}
	return reply{zxid: t.zxid, multi: res}
}
