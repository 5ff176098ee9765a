package recipe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// The lock directory's ACL. ZooKeeper checks a delete against the ACL of
// the parent, not of the node: whoever may delete in a lock directory may
// delete the holder's node, whatever ACL the holder gave it, and take the
// lock; whoever may create there may put a node ahead of the queue. A
// client with an ACL of its own ([WithACL]) therefore looks at the ACL of
// the directory before it queues there, and refuses a directory that
// grants DELETE or CREATE to an identity its own ACL does not: one
// another client made first, open, or made again open after the server
// reaped the empty container.
//
// The check reads the directory's ACL, with a data watch on the directory,
// once per client and incarnation of the directory (two requests, in one
// round trip; see dirACLs):
// the watch fires when the directory is deleted (reaped, or deleted and
// made again), or its session's watches end, and the next acquire checks
// again. An acquire also looks at the watch once it would hold, and checks
// again if it fired: its nodes keep the directory from being reaped, so
// the directory checked is the one it holds in. go-zookeeper dispatches a
// watch event before it reads on, and every reply, a direct one too (the
// wire tap holds it until go-zookeeper has read it, see wireTap.hold),
// reaches its caller after the frames before it: an acquire whose create
// landed in a directory made again finds the deletion's event by then.
// Only who can change the directory's ACL could open it without a watch
// firing: ADMIN on it, which the check also refuses to others.

// ErrDirectoryACL is wrapped, with [ErrNotAcquired], by the error of an
// acquire that refused its lock directory because the directory's ACL
// grants DELETE, CREATE or ADMIN to an identity the client's own ACL does
// not (see [WithACL]): such a client could delete the holder's node and
// take the lock. For a lock whose parameters live in the directory's data
// (a semaphore's number of leases, [LockSpec].DirData), WRITE is refused
// too: such a client could resize the semaphore. The error names the
// directory and the grant, a digest identity by its user only (never the
// password's hash). It also matches [ErrPermission].
// [WithAnyDirectoryACL] accepts such directories.
var ErrDirectoryACL = fmt.Errorf("%w: the lock directory's ACL lets others in", ErrPermission)

// WithAnyDirectoryACL makes a client with its own ACL ([WithACL]) queue in
// lock directories whatever their ACL grants to others, and create the
// missing parents of its lock directories with an open ACL, as it did
// before the check: for deployments where every client is trusted, or
// where the directories are shared on purpose. Default: a directory that
// grants DELETE, CREATE or ADMIN to an identity the client's ACL does
// not is refused with [ErrDirectoryACL], and missing parents are created
// with the client's ACL.
func WithAnyDirectoryACL() Option {
	return func(c *config) { c.anyDirACL = true }
}

// guardedPerms are the permissions on a lock directory that let their
// holder break the lock: delete the holder's node, queue a node ahead of
// it, change the directory's ACL.
const guardedPerms = zk.PermDelete | zk.PermCreate | zk.PermAdmin

// guarded returns the permissions on the lock's directory that others must
// not have: guardedPerms, and WRITE when the directory's data holds the
// lock's parameters (a semaphore's number of leases), which whoever may
// write it could change.
func (l *Lock) guarded() int32 {
	if l.spec.DirData != nil {
		return guardedPerms | zk.PermWrite
	}
	return guardedPerms
}

// checksDirACL reports whether the client checks the ACL of its lock
// directories: it has an ACL of its own, one that does not already grant
// every guarded permission to the world, and was not told to accept any.
func (c *Client) checksDirACL() bool {
	return !c.cfg.anyDirACL && !grants(c.cfg.acl, "world", "anyone", guardedPerms)
}

// parentACL is the ACL of the parents the client creates above a lock
// directory: its own when it checks directories (an open parent lets
// anyone make the lock directory, open, whenever the server has reaped
// it), open otherwise.
func (c *Client) parentACL() []zk.ACL {
	if c.checksDirACL() {
		return c.cfg.acl
	}
	return zk.WorldACL(zk.PermAll)
}

// grants reports whether acl grants every permission of perms to the
// identity scheme:id, directly or through world:anyone.
func grants(acl []zk.ACL, scheme, id string, perms int32) bool {
	var have int32
	for _, a := range acl {
		if a.Scheme == scheme && a.ID == id || a.Scheme == "world" && a.ID == "anyone" {
			have |= a.Perms
		}
	}
	return have&perms == perms
}

// ownIdentities expands the client's ACL as the server stores it: the
// "auth" scheme stands for the ids the session authenticated with, here
// digest user:hash when the client has digest credentials.
func (c *Client) ownIdentities() []zk.ACL {
	out := make([]zk.ACL, 0, len(c.cfg.acl))
	for _, a := range c.cfg.acl {
		if a.Scheme == "auth" {
			if c.cfg.auth {
				d := zk.DigestACL(a.Perms, c.cfg.authUser, c.cfg.authPassword)
				out = append(out, d...)
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

// foreignGrants returns the entries of dirACL that grant one of the
// permissions guarded to an identity the client's ACL does not grant it
// to, as "scheme:id:perms" strings (see identity).
func (c *Client) foreignGrants(dirACL []zk.ACL, guarded int32) []string {
	own := c.ownIdentities()
	var out []string
	for _, e := range dirACL {
		if g := e.Perms & guarded; g != 0 && !grants(own, e.Scheme, e.ID, g) {
			out = append(out, identity(e)+":"+permString(e.Perms))
		}
	}
	return out
}

// identity names the identity of an ACL entry for an error text: a digest
// identity ("user:base64 hash") by its user alone, as "digest:user", for
// the hash of a password can be attacked offline; every id quoted
// ([Quote]), since whoever set the ACL chose it.
func identity(e zk.ACL) string {
	id := e.ID
	if e.Scheme == "digest" {
		if user, _, ok := strings.Cut(id, ":"); ok {
			id = user
		}
	}
	return Quote(e.Scheme) + ":" + Quote(id)
}

// permString writes perms as ZooKeeper's CLI does: "cdrwa".
func permString(perms int32) string {
	var b strings.Builder
	for _, p := range []struct {
		bit  int32
		name byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if perms&p.bit != 0 {
			b.WriteByte(p.name)
		}
	}
	return b.String()
}

// aclReader is the part of a seam that reads ACLs: go-zookeeper's
// connection has it; a seam without it (a scripted fake) is not checked.
type aclReader interface {
	GetACL(path string) ([]zk.ACL, *zk.Stat, error)
}

func (c *Client) getACL(ctx context.Context, path string) ([]zk.ACL, *zk.Stat, error) {
	r, ok := c.zk.(aclReader)
	if !ok {
		return nil, nil, errNoACLReader
	}
	var acl []zk.ACL
	var st *zk.Stat
	c.stats.reads.Add(1)
	err := c.call(ctx, func() (err error) {
		acl, st, err = r.GetACL(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return acl, st, nil
}

var errNoACLReader = errors.New("recipe: the connection reads no ACLs")

// dirACLs is what a client knows of the ACLs of its lock directories:
// for each directory it checked, the permissions it found nobody else has,
// and the data watch that fires when that incarnation of the directory
// goes. The check is made once per client and incarnation, however many
// handles acquire there: a handle made for one acquire, one after
// another, costs no request and no watch of its own, and concurrent first
// acquires wait for one check. What the client keeps is an entry per
// directory whose watch has not fired (go-zookeeper keeps the watch's
// channel until then anyway); entries whose directory went are swept
// whenever the table has doubled since the last sweep.
type dirACLs struct {
	mu    sync.Mutex
	byDir map[string]*dirCheck
	swept int // entries after the last sweep
}

// dirCheck is the check of one directory.
type dirCheck struct {
	perms    int32           // the guarded permissions nobody else has; 0: not checked
	gone     <-chan zk.Event // fires when the incarnation checked goes
	checking chan struct{}   // closed when the check under way ends; nil: none
}

// fired reports whether e's directory went, as far as the events received
// tell. dirACLs.mu is held.
func (e *dirCheck) fired() bool {
	if e.gone == nil {
		return true
	}
	select {
	case <-e.gone:
		e.gone, e.perms = nil, 0
		return true
	default:
		return false
	}
}

// begin looks up the check of dir for perms. It returns checked when the
// current incarnation of dir was checked for them; otherwise, wait when
// another acquire is checking dir (look again once it is closed), or e
// when the caller is to check it and report with end.
func (d *dirACLs) begin(dir string, perms int32) (checked bool, wait <-chan struct{}, e *dirCheck) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e = d.byDir[dir]
	switch {
	case e == nil:
		if d.byDir == nil {
			d.byDir = map[string]*dirCheck{}
		}
		e = &dirCheck{}
		d.byDir[dir] = e
	case e.checking != nil:
		return false, e.checking, nil
	case e.perms&perms == perms && !e.fired():
		return true, nil, nil
	}
	e.checking = make(chan struct{})
	return false, nil, e
}

// end reports the check of dir that begin handed out: passed, for perms,
// with gone the watch on the incarnation checked; or not (a directory
// refused, missing, or not read), which leaves nothing kept.
func (d *dirACLs) end(dir string, e *dirCheck, passed bool, perms int32, gone <-chan zk.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(e.checking)
	e.checking = nil
	if passed {
		e.perms, e.gone = perms, gone
	} else if e.fired() && d.byDir[dir] == e {
		delete(d.byDir, dir)
	}
	if len(d.byDir) > 2*max(d.swept, 64) {
		d.sweep()
	}
}

// sweep forgets the directories that went. d.mu is held.
func (d *dirACLs) sweep() {
	for dir, e := range d.byDir {
		if e.checking == nil && e.fired() {
			delete(d.byDir, dir)
		}
	}
	d.swept = len(d.byDir)
	if d.swept == 0 {
		d.byDir = nil // a map never gives back what it grew to
	}
}

// checkDir checks the ACL of the lock directory, unless the client does
// not check ACLs or it checked this incarnation of the directory already
// (for this lock's guarded permissions, see dirACLs). A missing directory
// passes: the create that follows fails, the directory is made, with the
// client's ACL, and checked before the next create.
func (l *Lock) checkDir(ctx context.Context) error {
	c := l.c
	if !c.checksDirACL() {
		return nil
	}
	perms := l.guarded()
	for {
		checked, wait, e := c.dirACLs.begin(l.dir, perms)
		switch {
		case checked:
			return nil
		case wait != nil:
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		gone, err := l.readDirACL(ctx, perms)
		c.dirACLs.end(l.dir, e, err == nil && gone != nil, perms, gone)
		return err
	}
}

// readDirACL reads the ACL of the lock directory and checks that it grants
// none of perms to others. It returns the data watch it set on the
// directory: nil when there is nothing to watch (no directory, or a seam
// that reads no ACLs).
func (l *Lock) readDirACL(ctx context.Context, perms int32) (<-chan zk.Event, error) {
	c := l.c
	for range maxSetupTries {
		var (
			acl        []zk.ACL
			st, stW    *zk.Stat
			gone       <-chan zk.Event
			errA, errW error
			both       sync.WaitGroup
		)
		both.Go(func() { _, stW, gone, errW = c.getDataW(ctx, l.dir) })
		acl, st, errA = c.getACL(ctx, l.dir)
		both.Wait()
		switch {
		case errors.Is(errA, errNoACLReader):
			return nil, nil
		case errors.Is(errA, zk.ErrNoNode) || errors.Is(errW, zk.ErrNoNode):
			return nil, nil
		case errA != nil:
			return nil, opError("read ACL of", l.dir, errA)
		case errW != nil:
			return nil, opError("read", l.dir, errW)
		case st.Czxid != stW.Czxid:
			continue // made again between the two reads
		}
		if bad := c.foreignGrants(acl, perms); len(bad) > 0 {
			what := "delete the holder's node"
			if perms&zk.PermWrite != 0 {
				what = "delete the holder's node or change the parameters the directory holds"
			}
			return nil, fmt.Errorf("%w: %s grants %s, which this client's ACL does not: such a client could %s; "+
				"set the directory's ACL (docs/operations.md), or accept it with WithAnyDirectoryACL",
				ErrDirectoryACL, l.dir, strings.Join(bad, ", "), what)
		}
		return gone, nil
	}
	return nil, opError("read ACL of", l.dir, zk.ErrNoNode)
}
