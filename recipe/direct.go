package recipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Direct requests. go-zookeeper's requests block until their reply, so a
// caller whose context can end hands each one to a worker (workers.go) and
// waits for the worker or its context: two goroutine switches per request
// on top of go-zookeeper's own two. The requests of every acquire and
// hand-off (the listing sent behind a create, the listing a waiter makes
// when the node it waits on goes, and the delete that releases) are
// instead written on the connection by the caller itself, and their
// replies are taken by the wire tap as go-zookeeper reads them and handed
// straight to the caller:
//
//   - a direct request gets an xid 2^30 away from the last one go-zookeeper
//     wrote, which go-zookeeper reaches only after a billion requests more,
//     and is written as one whole frame between go-zookeeper's frames (the
//     connection takes writes in turn; when another writer has it, the
//     request goes through go-zookeeper instead);
//   - go-zookeeper reads the reply like any other: it notes its zxid as the
//     last it has seen (so a reconnect never goes back in time past it),
//     finds no request of its own with that xid and goes on; the tap has
//     already handed the reply's error code and body to the caller;
//   - a caller whose context ends stops waiting at once, and the reply is
//     dropped when it comes;
//   - when the connection fails or closes, every direct request waiting
//     on it fails with zk.ErrConnectionClosed, as go-zookeeper fails its
//     own, and the caller's retry policy takes over;
//   - until the connection is set up (the connect response read and, for a
//     client with credentials, go-zookeeper's sending resumed after it
//     sent them again) and once it has failed, requests go through
//     go-zookeeper as before.
//
// The frames are plain getChildren and delete requests; go-zookeeper's own
// frames are not altered.

const (
	opDelete      = 2
	opGetChildren = 8

	directXidGap = 1 << 30
	xidMask      = 0x7fffffff
)

// directCall is a direct request waiting for its reply: done is closed
// once body and err are set (the reply's body, or the error its header
// carried or the connection's failure).
type directCall struct {
	done chan struct{}
	body []byte
	err  error

	t   *trackedConn
	xid int32
}

// wait waits for the reply or for ctx; a caller that stops waiting drops
// the request, whose reply is then ignored.
func (d *directCall) wait(ctx context.Context) ([]byte, error) {
	select {
	case <-d.done:
		return d.body, d.err
	case <-ctx.Done():
		d.t.tap.forget(d.xid)
		return nil, ctx.Err()
	}
}

// children is the listing an answered getChildren request brought, or its
// error.
func (d *directCall) children() ([]string, error) {
	if d.err != nil {
		return nil, d.err
	}
	return parseChildren(d.body)
}

// errMalformedReply is the error of a direct reply whose body does not
// parse.
var errMalformedReply = errors.New("recipe: malformed reply from the server")

// directChildren lists dir with a direct request. ok is false when no
// connection can take one now: the caller asks go-zookeeper instead.
func (c *Client) directChildren(ctx context.Context, dir string) (names []string, ok bool, err error) {
	call, ok, err := c.sendDirect(ctx, opGetChildren, dir, noWatch...)
	if !ok || err != nil {
		return nil, ok, err
	}
	if _, err := call.wait(ctx); err != nil {
		return nil, true, c.mapClosed(err)
	}
	names, err = call.children()
	return names, true, err
}

// directDelete deletes path, whatever its version, with a direct request;
// ok as for directChildren.
func (c *Client) directDelete(ctx context.Context, path string) (ok bool, err error) {
	call, ok, err := c.sendDirect(ctx, opDelete, path, anyVersion...)
	if !ok || err != nil {
		return ok, err
	}
	_, err = call.wait(ctx)
	return true, c.mapClosed(err)
}

// What follows the path in a getChildren request (the watch flag) and in
// a delete (the version).
var (
	noWatch    = []byte{0}
	anyVersion = []byte{0xff, 0xff, 0xff, 0xff} // -1
)

// sendDirect writes the request op, for path and with tail after it, on
// the client's connection. ok is false when no connection can take a
// direct request now; err is set when the request could not be written.
func (c *Client) sendDirect(ctx context.Context, op int32, path string, tail ...byte) (call *directCall, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	t := c.liveConn.Load()
	if t == nil {
		return nil, false, nil
	}
	call, ok = t.tap.expectReply(c.cfg.authUser != "")
	if !ok {
		return nil, false, nil
	}
	call.t = t
	n := 8 + 4 + len(path) + len(tail) // xid, opcode, path, tail
	frame := make([]byte, 0, 4+n)
	frame = binary.BigEndian.AppendUint32(frame, uint32(n))
	frame = binary.BigEndian.AppendUint32(frame, uint32(call.xid))
	frame = binary.BigEndian.AppendUint32(frame, uint32(op))
	frame = append(appendString(frame, path), tail...)
	if ok, err := t.writeDirect(frame); !ok || err != nil {
		t.tap.forget(call.xid)
		return nil, ok, c.mapClosed(err)
	}
	return call, true, nil
}

// writeDirect writes one whole frame of a direct request if no other
// writer has the connection now; ok is false when one has (the request then
// goes through go-zookeeper, whose send loop takes its turn: many callers
// at once are better served by one writer than by each waiting for the
// others). The write itself takes no deadline of its own: it can only block
// while the server reads nothing, and then go-zookeeper's read deadline
// fails the connection, which Read closes, ending the write. A failed write
// may have left half a frame: the connection is closed.
func (t *trackedConn) writeDirect(frame []byte) (ok bool, err error) {
	select {
	case t.wturn <- struct{}{}:
	default:
		return false, nil
	}
	defer func() { <-t.wturn }()
	t.tap.noteDirectWrite(frame)
	if _, err := t.Conn.Write(frame); err != nil {
		t.Conn.Close()
		return true, fmt.Errorf("%w: %w", zk.ErrConnectionClosed, err)
	}
	return true, nil
}

// Write writes one of go-zookeeper's frames, in turn with direct requests.
func (t *trackedConn) Write(p []byte) (int, error) {
	t.wturn <- struct{}{}
	defer func() { <-t.wturn }()
	t.tap.noteWrite(p)
	return t.Conn.Write(p)
}

// Close fails the direct requests waiting on the connection and closes it.
func (t *trackedConn) Close() error {
	t.tap.failDirect()
	return t.Conn.Close()
}

// expectReply registers a direct request and returns it with its xid set;
// ok is false when the connection cannot take one: before its connect
// response was read, after it failed, or, when afterLoop is set (a client
// with credentials), before go-zookeeper has written anything but its
// credentials since it connected.
func (w *wireTap) expectReply(afterLoop bool) (call *directCall, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead || !w.connected || (afterLoop && !w.loopWrote) {
		return nil, false
	}
	if w.direct == nil {
		w.direct = make(map[int32]*directCall)
	}
	call = &directCall{done: make(chan struct{})}
	for {
		w.directSeq++
		call.xid = int32((uint32(w.lastXid) + directXidGap + w.directSeq%(1<<28)) & xidMask)
		if _, taken := w.direct[call.xid]; !taken {
			break
		}
	}
	w.direct[call.xid] = call
	return call, true
}

// lastWritten returns the last xid go-zookeeper wrote on the connection.
func (w *wireTap) lastWritten() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastXid
}

// forget drops a direct request whose caller stopped waiting.
func (w *wireTap) forget(xid int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.direct, xid)
}

// answer hands the reply to the direct request xid to its caller, if it
// still waits. It must be called with w.mu held.
func (w *wireTap) answer(xid int32, body []byte, err error) {
	if call, ok := w.direct[xid]; ok {
		delete(w.direct, xid)
		call.body, call.err = body, err
		close(call.done)
	}
}

// failDirect fails every direct request waiting on the connection, which
// takes no more.
func (w *wireTap) failDirect() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	for xid := range w.direct {
		w.answer(xid, nil, zk.ErrConnectionClosed)
	}
}

// isDirect reports whether xid is of the range direct requests use now:
// go-zookeeper reports their replies as replies to unknown requests.
func (w *wireTap) isDirect(xid int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := uint32(xid-w.lastXid) & xidMask
	return d >= directXidGap/2 && d < directXidGap*3/2
}

// replyError is the error of a reply header's code, as go-zookeeper maps
// it.
func replyError(code int32) error {
	switch code {
	case 0:
		return nil
	case -100:
		return zk.ErrAPIError
	case -101:
		return zk.ErrNoNode
	case -102:
		return zk.ErrNoAuth
	case -103:
		return zk.ErrBadVersion
	case -108:
		return zk.ErrNoChildrenForEphemerals
	case -110:
		return zk.ErrNodeExists
	case -111:
		return zk.ErrNotEmpty
	case -112:
		return zk.ErrSessionExpired
	case -114:
		return zk.ErrInvalidACL
	case -115:
		return zk.ErrAuthFailed
	case -116:
		return zk.ErrClosing
	case -117:
		return zk.ErrNothing
	case -118:
		return zk.ErrSessionMoved
	case -123:
		return zk.ErrReconfigDisabled
	case -8:
		return zk.ErrBadArguments
	}
	return fmt.Errorf("%w: error code %d", zk.ErrUnknown, code)
}

// appendString appends s as a jute string: its length, then its bytes.
func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// parseChildren parses the body of a getChildren reply: a vector of jute
// strings. One string holds the whole body and the names are slices of it
// (a waiter keeps copies of the few names it needs, see attempt.trim).
func parseChildren(b []byte) ([]string, error) {
	if len(b) < 4 {
		return nil, errMalformedReply
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n < 0 { // a null vector
		return nil, nil
	}
	if int(n) > (len(b)-4)/4 {
		return nil, errMalformedReply
	}
	all := string(b)
	names := make([]string, n)
	at := 4
	for i := range names {
		if len(b)-at < 4 {
			return nil, errMalformedReply
		}
		l := int(int32(binary.BigEndian.Uint32(b[at:])))
		at += 4
		if l < 0 || l > len(b)-at {
			return nil, errMalformedReply
		}
		names[i] = all[at : at+l]
		at += l
	}
	return names, nil
}
