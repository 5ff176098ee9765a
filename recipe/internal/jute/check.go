package jute

import "fmt"

// The checks below walk a reply body as go-zookeeper (v1.0.4) decodes it
// for the request it answers, without allocating, and report what would
// make its decoder fail, panic, or allocate more than the frame holds:
// a string that is null, negative or longer than the bytes left; a vector
// that is null, negative, or counts more elements than the bytes left can
// hold; a field cut short. Bytes after the fields go-zookeeper reads are
// allowed, as go-zookeeper ignores them (servers send a stat after the
// path of some creates).

// CheckReply checks the body of a successful reply (error code 0) to a
// request with opcode op. An opcode it does not know passes.
func CheckReply(op int32, body []byte) error {
	c := checker{b: body}
	switch op {
	case OpCreate, OpCreateContainer, OpCreateTTL, OpSync:
		c.str()
	case OpCreate2:
		c.str()
		c.stat()
	case OpExists, OpSetData, OpSetACL:
		c.stat()
	case OpGetData, OpReconfig:
		c.buffer()
		c.stat()
	case OpGetACL:
		for n := c.vector(12); n > 0 && c.err == nil; n-- {
			c.int32()
			c.str()
			c.str()
		}
		c.stat()
	case OpGetChildren:
		c.strings()
	case OpGetChildren2:
		c.strings()
		c.stat()
	case OpMulti:
		c.multi()
	}
	return c.err
}

// CheckWatchEvent checks the body of a watch notification: type, state
// and path.
func CheckWatchEvent(body []byte) error {
	c := checker{b: body}
	c.int32()
	c.int32()
	c.str()
	return c.err
}

// checker walks a record; the first failure is kept in err and ends the
// walk (every later step does nothing).
type checker struct {
	b   []byte
	err error
}

func (c *checker) take(n int) bool {
	if c.err != nil {
		return false
	}
	if n > len(c.b) {
		c.err = ErrShort
		return false
	}
	c.b = c.b[n:]
	return true
}

func (c *checker) int32() int32 {
	if len(c.b) < 4 {
		c.take(4)
		return 0
	}
	v := int32(uint32(c.b[0])<<24 | uint32(c.b[1])<<16 | uint32(c.b[2])<<8 | uint32(c.b[3]))
	c.take(4)
	return v
}

// length reads a length and checks that the bytes it counts are there;
// a null (-1) passes only where null is allowed.
func (c *checker) length(nullOK bool) {
	n := c.int32()
	switch {
	case c.err != nil:
	case n == -1 && nullOK:
	case n < 0:
		c.err = fmt.Errorf("%w: %d", ErrLength, n)
	default:
		c.take(int(n))
	}
}

func (c *checker) str()    { c.length(false) }
func (c *checker) buffer() { c.length(true) }
func (c *checker) stat()   { c.take(StatLen) }

// vector reads a vector's count: not null, not negative, and no more
// elements than the bytes left hold at minSize bytes each.
func (c *checker) vector(minSize int) int {
	n := c.int32()
	switch {
	case c.err != nil:
		return 0
	case n < 0:
		c.err = fmt.Errorf("%w: a vector of %d", ErrLength, n)
		return 0
	case int64(n)*int64(minSize) > int64(len(c.b)):
		c.err = fmt.Errorf("%w: a vector of %d in %d bytes", ErrShort, n, len(c.b))
		return 0
	}
	return int(n)
}

func (c *checker) strings() {
	for n := c.vector(4); n > 0 && c.err == nil; n-- {
		c.str()
	}
}

// multi walks a multi's results up to the header that ends them: each a
// header (type, done, error code) and the body of its type, as
// go-zookeeper reads them (it knows no other types).
func (c *checker) multi() {
	for c.err == nil {
		typ := c.int32()
		if len(c.b) < 1 {
			c.take(1)
			return
		}
		done := c.b[0] != 0
		c.take(1)
		c.int32() // the error code
		if c.err != nil || done {
			return
		}
		switch typ {
		case OpError:
			c.int32()
		case OpCreate:
			c.str()
		case OpSetData:
			c.stat()
		case OpCheck, OpDelete:
		default:
			c.err = fmt.Errorf("%w: type %d", ErrUnknownOp, typ)
		}
	}
}
