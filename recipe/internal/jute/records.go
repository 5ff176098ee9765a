package jute

// The records of the protocol. Each has an Append method that appends its
// encoding and a Read method that reads it, with the field order of
// ZooKeeper's zookeeper.jute.

// Stat is a node's stat.
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// Append appends the stat.
func (s *Stat) Append(b []byte) []byte {
	b = AppendInt64(b, s.Czxid)
	b = AppendInt64(b, s.Mzxid)
	b = AppendInt64(b, s.Ctime)
	b = AppendInt64(b, s.Mtime)
	b = AppendInt32(b, s.Version)
	b = AppendInt32(b, s.Cversion)
	b = AppendInt32(b, s.Aversion)
	b = AppendInt64(b, s.EphemeralOwner)
	b = AppendInt32(b, s.DataLength)
	b = AppendInt32(b, s.NumChildren)
	return AppendInt64(b, s.Pzxid)
}

// StatLen is the length of an encoded stat.
const StatLen = 68

// Read reads the stat.
func (s *Stat) Read(r *Reader) {
	s.Czxid, s.Mzxid, s.Ctime, s.Mtime = r.Int64(), r.Int64(), r.Int64(), r.Int64()
	s.Version, s.Cversion, s.Aversion = r.Int32(), r.Int32(), r.Int32()
	s.EphemeralOwner = r.Int64()
	s.DataLength, s.NumChildren = r.Int32(), r.Int32()
	s.Pzxid = r.Int64()
}

// ACL is one entry of an access control list.
type ACL struct {
	Perms  int32
	Scheme string
	ID     string
}

// AppendACL appends a vector of ACL entries.
func AppendACL(b []byte, acl []ACL) []byte {
	b = AppendInt32(b, int32(len(acl)))
	for _, a := range acl {
		b = AppendInt32(b, a.Perms)
		b = AppendString(b, a.Scheme)
		b = AppendString(b, a.ID)
	}
	return b
}

// ReadACL reads a vector of ACL entries; the null vector is nil.
func (r *Reader) ReadACL() []ACL {
	n, ok := r.vectorLen(12)
	if !ok {
		return nil
	}
	acl := make([]ACL, n)
	for i := range acl {
		acl[i] = ACL{Perms: r.Int32(), Scheme: r.String(), ID: r.String()}
	}
	if r.err != nil {
		return nil
	}
	return acl
}

// RequestHeader starts every request but the connect request.
type RequestHeader struct {
	Xid int32
	Op  int32
}

// Append appends the header.
func (h RequestHeader) Append(b []byte) []byte { return AppendInt32(AppendInt32(b, h.Xid), h.Op) }

// Read reads the header.
func (h *RequestHeader) Read(r *Reader) { h.Xid, h.Op = r.Int32(), r.Int32() }

// ReplyHeader starts every reply but the connect response, and every watch
// event.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  int32
}

// ReplyHeaderLen is the length of a reply header.
const ReplyHeaderLen = 16

// Append appends the header.
func (h ReplyHeader) Append(b []byte) []byte {
	return AppendInt32(AppendInt64(AppendInt32(b, h.Xid), h.Zxid), h.Err)
}

// Read reads the header.
func (h *ReplyHeader) Read(r *Reader) { h.Xid, h.Zxid, h.Err = r.Int32(), r.Int64(), r.Int32() }

// ConnectRequest is the first frame of a connection. ReadOnly is sent by
// newer clients only (go-zookeeper v1.0.4 leaves it out).
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	Timeout         int32 // milliseconds
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Append appends the request.
func (c *ConnectRequest) Append(b []byte) []byte {
	b = AppendInt32(b, c.ProtocolVersion)
	b = AppendInt64(b, c.LastZxidSeen)
	b = AppendInt32(b, c.Timeout)
	b = AppendInt64(b, c.SessionID)
	b = AppendBuffer(b, c.Passwd)
	if c.HasReadOnly {
		b = AppendBool(b, c.ReadOnly)
	}
	return b
}

// Read reads the request.
func (c *ConnectRequest) Read(r *Reader) {
	c.ProtocolVersion, c.LastZxidSeen, c.Timeout, c.SessionID = r.Int32(), r.Int64(), r.Int32(), r.Int64()
	c.Passwd = r.Buffer()
	if c.HasReadOnly = r.err == nil && r.Len() > 0; c.HasReadOnly {
		c.ReadOnly = r.Bool()
	}
}

// ConnectResponse answers a connect request. A session id of 0 says the
// session asked for has expired.
type ConnectResponse struct {
	ProtocolVersion int32
	Timeout         int32 // milliseconds, as the server granted
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
}

// Append appends the response, with the read-only flag as ZooKeeper 3.8
// writes it.
func (c *ConnectResponse) Append(b []byte) []byte {
	b = AppendInt32(b, c.ProtocolVersion)
	b = AppendInt32(b, c.Timeout)
	b = AppendInt64(b, c.SessionID)
	b = AppendBuffer(b, c.Passwd)
	return AppendBool(b, c.ReadOnly)
}

// Read reads the response; the read-only flag is optional.
func (c *ConnectResponse) Read(r *Reader) {
	c.ProtocolVersion, c.Timeout, c.SessionID = r.Int32(), r.Int32(), r.Int64()
	c.Passwd = r.Buffer()
	if r.err == nil && r.Len() > 0 {
		c.ReadOnly = r.Bool()
	}
}

// CreateRequest is the body of a create, create2 or createContainer
// request (and of a create in a multi).
type CreateRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags int32
}

// Append appends the request.
func (c *CreateRequest) Append(b []byte) []byte {
	b = AppendString(b, c.Path)
	b = AppendBuffer(b, c.Data)
	b = AppendACL(b, c.ACL)
	return AppendInt32(b, c.Flags)
}

// Read reads the request.
func (c *CreateRequest) Read(r *Reader) {
	c.Path, c.Data, c.ACL, c.Flags = r.String(), r.Buffer(), r.ReadACL(), r.Int32()
}

// PathVersion is the body of a delete, a check, or their multi ops.
type PathVersion struct {
	Path    string
	Version int32
}

// Append appends the request.
func (p PathVersion) Append(b []byte) []byte { return AppendInt32(AppendString(b, p.Path), p.Version) }

// Read reads the request.
func (p *PathVersion) Read(r *Reader) { p.Path, p.Version = r.String(), r.Int32() }

// PathWatch is the body of an exists, getData, getChildren or getChildren2
// request.
type PathWatch struct {
	Path  string
	Watch bool
}

// Append appends the request.
func (p PathWatch) Append(b []byte) []byte { return AppendBool(AppendString(b, p.Path), p.Watch) }

// Read reads the request.
func (p *PathWatch) Read(r *Reader) { p.Path, p.Watch = r.String(), r.Bool() }

// SetDataRequest is the body of a setData request or multi op.
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

// Append appends the request.
func (s *SetDataRequest) Append(b []byte) []byte {
	return AppendInt32(AppendBuffer(AppendString(b, s.Path), s.Data), s.Version)
}

// Read reads the request.
func (s *SetDataRequest) Read(r *Reader) {
	s.Path, s.Data, s.Version = r.String(), r.Buffer(), r.Int32()
}

// SetWatchesRequest sets a client's watches again on a new connection to
// its session, relative to the last zxid the client saw.
type SetWatchesRequest struct {
	RelativeZxid int64
	Data         []string
	Exist        []string
	Child        []string
}

// Append appends the request.
func (s *SetWatchesRequest) Append(b []byte) []byte {
	b = AppendInt64(b, s.RelativeZxid)
	return AppendStrings(AppendStrings(AppendStrings(b, s.Data), s.Exist), s.Child)
}

// Read reads the request.
func (s *SetWatchesRequest) Read(r *Reader) {
	s.RelativeZxid, s.Data, s.Exist, s.Child = r.Int64(), r.Strings(), r.Strings(), r.Strings()
}

// SetAuthRequest adds credentials to a connection.
type SetAuthRequest struct {
	Type   int32
	Scheme string
	Auth   []byte
}

// Append appends the request.
func (s *SetAuthRequest) Append(b []byte) []byte {
	return AppendBuffer(AppendString(AppendInt32(b, s.Type), s.Scheme), s.Auth)
}

// Read reads the request.
func (s *SetAuthRequest) Read(r *Reader) {
	s.Type, s.Scheme, s.Auth = r.Int32(), r.String(), r.Buffer()
}

// WatcherEvent is the body of a notification (xid -1).
type WatcherEvent struct {
	Type  int32
	State int32
	Path  string
}

// Append appends the event.
func (e *WatcherEvent) Append(b []byte) []byte {
	return AppendString(AppendInt32(AppendInt32(b, e.Type), e.State), e.Path)
}

// Read reads the event.
func (e *WatcherEvent) Read(r *Reader) { e.Type, e.State, e.Path = r.Int32(), r.Int32(), r.String() }

// MultiHeader precedes each op of a multi request and each result of its
// reply; one with Done set ends them.
type MultiHeader struct {
	Type int32
	Done bool
	Err  int32
}

// Append appends the header.
func (h MultiHeader) Append(b []byte) []byte {
	return AppendInt32(AppendBool(AppendInt32(b, h.Type), h.Done), h.Err)
}

// Read reads the header.
func (h *MultiHeader) Read(r *Reader) { h.Type, h.Done, h.Err = r.Int32(), r.Bool(), r.Int32() }

// MultiOp is one operation of a multi: Op says which of the bodies holds
// it (create for OpCreate, OpCreate2, OpCreateContainer and OpCreateTTL;
// PathVersion for OpDelete and OpCheck; SetData for OpSetData).
type MultiOp struct {
	Op          int32
	Create      CreateRequest
	PathVersion PathVersion
	SetData     SetDataRequest
}

// AppendMulti appends the body of a multi request.
func AppendMulti(b []byte, ops []MultiOp) []byte {
	for i := range ops {
		op := &ops[i]
		b = MultiHeader{Type: op.Op, Err: -1}.Append(b)
		switch op.Op {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
			b = op.Create.Append(b)
		case OpDelete, OpCheck:
			b = op.PathVersion.Append(b)
		case OpSetData:
			b = op.SetData.Append(b)
		}
	}
	return MultiHeader{Type: -1, Done: true, Err: -1}.Append(b)
}

// maxMultiOps bounds the ops read from one multi, as a guard against a
// frame made of empty headers.
const maxMultiOps = 1 << 16

// ReadMulti reads the body of a multi request.
func (r *Reader) ReadMulti() []MultiOp {
	var ops []MultiOp
	for r.err == nil {
		var h MultiHeader
		h.Read(r)
		if r.err != nil || h.Done {
			break
		}
		if len(ops) == maxMultiOps {
			r.err = ErrLength
			break
		}
		op := MultiOp{Op: h.Type}
		switch h.Type {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
			op.Create.Read(r)
		case OpDelete, OpCheck:
			op.PathVersion.Read(r)
		case OpSetData:
			op.SetData.Read(r)
		default:
			r.err = ErrUnknownOp
		}
		ops = append(ops, op)
	}
	if r.err != nil {
		return nil
	}
	return ops
}

// MultiResult is one result of a multi reply: Op is the op's type, or
// OpError with Err for a failed op and for every op of a multi that
// failed; Path comes with creates, Stat with OpCreate2, OpCreateContainer
// (a container create in a multi is answered so), OpCreateTTL and
// OpSetData.
type MultiResult struct {
	Op   int32
	Err  int32
	Path string
	Stat Stat
}

// AppendMultiResults appends the body of a multi reply.
func AppendMultiResults(b []byte, res []MultiResult) []byte {
	for i := range res {
		m := &res[i]
		b = MultiHeader{Type: m.Op, Err: m.Err}.Append(b)
		switch m.Op {
		case OpError:
			b = AppendInt32(b, m.Err)
		case OpCreate:
			b = AppendString(b, m.Path)
		case OpCreate2, OpCreateContainer, OpCreateTTL:
			b = m.Stat.Append(AppendString(b, m.Path))
		case OpSetData:
			b = m.Stat.Append(b)
		}
	}
	return MultiHeader{Type: -1, Done: true, Err: -1}.Append(b)
}

// ReadMultiResults reads the body of a multi reply.
func (r *Reader) ReadMultiResults() []MultiResult {
	var res []MultiResult
	for r.err == nil {
		var h MultiHeader
		h.Read(r)
		if r.err != nil || h.Done {
			break
		}
		if len(res) == maxMultiOps {
			r.err = ErrLength
			break
		}
		m := MultiResult{Op: h.Type, Err: h.Err}
		switch h.Type {
		case OpError:
			m.Err = r.Int32()
		case OpCreate:
			m.Path = r.String()
		case OpCreate2, OpCreateContainer, OpCreateTTL:
			m.Path = r.String()
			m.Stat.Read(r)
		case OpSetData:
			m.Stat.Read(r)
		case OpDelete, OpCheck:
		default:
			r.err = ErrUnknownOp
		}
		res = append(res, m)
	}
	if r.err != nil {
		return nil
	}
	return res
}
