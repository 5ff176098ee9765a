package recipe

import (
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Request sizes, measured as the wire carries them. ZooKeeper reads the
// length that starts every request frame and closes the connection,
// cutting every call of every recipe on the client, when it exceeds its
// jute.maxbuffer ([WithMaxPacket]). So the requests whose size the caller
// decides (node data, the ops of a Commit, the nodes of an AcquireN) are
// measured before they are sent, by the jute encoding go-zookeeper writes:
// a frame is a request header (xid, opcode) and the request; a string or
// a buffer is a 4-byte length and its bytes; an ACL is a 4-byte count and,
// per entry, its permissions and the scheme and id strings.

const (
	requestHeaderLen = 4 + 4     // xid, opcode
	multiHeaderLen   = 4 + 1 + 4 // op type, done, error code, before each op and after the last

	// zkSendBuffer is the largest frame go-zookeeper v1.0.4 can encode
	// (its bufferSize, less the frame's length): a larger request fails in
	// the client with "zk: buffer too small".
	zkSendBuffer = 1536*1024 - 4
)

func juteString(s string) int { return 4 + len(s) }
func juteBuffer(b []byte) int { return 4 + len(b) }

// aclLen is the encoded length of an ACL.
func aclLen(acl []zk.ACL) int {
	n := 4
	for _, a := range acl {
		n += 4 + juteString(a.Scheme) + juteString(a.ID)
	}
	return n
}

// createLen is the encoded length of a create request (all kinds: plain,
// sequential, ephemeral, container): path, data, ACL, flags.
func createLen(path string, data []byte, acl []zk.ACL) int {
	return juteString(path) + juteBuffer(data) + aclLen(acl) + 4
}

// frameLen is the length of the frame of a request whose body is body
// bytes long, as the server checks it against its limit.
func frameLen(body int) int { return requestHeaderLen + body }

// multiLen is the length of the frame of a multi whose ops' bodies are
// the given lengths.
func multiLen(bodies ...int) int {
	n := multiHeaderLen
	for _, b := range bodies {
		n += multiHeaderLen + b
	}
	return frameLen(n)
}

// encodedLen is the length of the op's body in a multi, with the ACL
// creates carry.
func (o Op) encodedLen(acl []zk.ACL) int {
	switch o.kind {
	case kindCreate, kindCreateSeq:
		return createLen(o.path, o.data, acl)
	case kindSet:
		return juteString(o.path) + juteBuffer(o.data) + 4
	}
	return juteString(o.path) + 4 // delete, check: path, version
}

// tooLarge is the error of a request of size bytes (frame length) over
// the limit, what describing it; nil when it fits.
func (c *Client) tooLarge(what string, size int) error {
	if size <= c.cfg.maxPacket {
		return nil
	}
	return fmt.Errorf("%w: %s: a request of %d bytes, over the %d bytes a request to the servers may carry (see WithMaxPacket); not sent",
		ErrInvalidArgument, what, size, c.cfg.maxPacket)
}
