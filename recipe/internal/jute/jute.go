// Package jute encodes and decodes the frames of ZooKeeper's client
// protocol: the jute records (big-endian integers, length-prefixed strings
// and buffers, vectors, stats, ACLs) of the requests a client sends and the
// replies and watch events a server sends, each frame preceded by its
// length.
//
// Encoding appends to a byte slice; decoding reads from a [Reader], which
// never panics on malformed input: the first short or invalid field sets
// its error, every later read returns a zero value, and [Reader.Err]
// reports it. The package knows the records, not their meaning: what an
// error code or a flag means is left to its users.
package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Opcodes of the requests.
const (
	OpNotify          int32 = 0
	OpCreate          int32 = 1
	OpDelete          int32 = 2
	OpExists          int32 = 3
	OpGetData         int32 = 4
	OpSetData         int32 = 5
	OpGetACL          int32 = 6
	OpSetACL          int32 = 7
	OpGetChildren     int32 = 8
	OpSync            int32 = 9
	OpPing            int32 = 11
	OpGetChildren2    int32 = 12
	OpCheck           int32 = 13
	OpMulti           int32 = 14
	OpCreate2         int32 = 15
	OpReconfig        int32 = 16
	OpCreateContainer int32 = 19
	OpCreateTTL       int32 = 21
	OpClose           int32 = -11
	OpSetAuth         int32 = 100
	OpSetWatches      int32 = 101
	OpError           int32 = -1 // a failed operation's result in a multi
)

// Special xids.
const (
	XidNotification int32 = -1 // a watch event
	XidPing         int32 = -2
	XidSetAuth      int32 = -4 // the Java client's; go-zookeeper uses ordinary xids
	XidSetWatches   int32 = -8 // the Java client's
)

// MaxBuffer is ZooKeeper's default jute.maxbuffer: the largest frame a
// server reads.
const MaxBuffer = 0xfffff

// Errors of decoding.
var (
	// ErrShort is the error of a record that ends before its fields do.
	ErrShort = errors.New("jute: record too short")
	// ErrLength is the error of a negative or oversized length.
	ErrLength = errors.New("jute: invalid length")
	// ErrTrailing is the error of bytes left after a whole record.
	ErrTrailing = errors.New("jute: bytes after the record")
	// ErrUnknownOp is the error of a multi op or result whose type has no
	// body this package knows.
	ErrUnknownOp = errors.New("jute: unknown operation in a multi")
)

// AppendInt32 appends v, big-endian.
func AppendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// AppendInt64 appends v, big-endian.
func AppendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendBool appends v as one byte.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendString appends s: its length, then its bytes.
func AppendString(b []byte, s string) []byte {
	b = AppendInt32(b, int32(len(s)))
	return append(b, s...)
}

// AppendBuffer appends p: its length, then its bytes; a nil p is the null
// buffer (length -1), as ZooKeeper writes it.
func AppendBuffer(b []byte, p []byte) []byte {
	if p == nil {
		return AppendInt32(b, -1)
	}
	b = AppendInt32(b, int32(len(p)))
	return append(b, p...)
}

// AppendStrings appends a vector of strings: its length, then each.
func AppendStrings(b []byte, ss []string) []byte {
	b = AppendInt32(b, int32(len(ss)))
	for _, s := range ss {
		b = AppendString(b, s)
	}
	return b
}

// BeginFrame appends a placeholder for a frame's length and returns where
// the frame starts, for [EndFrame].
func BeginFrame(b []byte) ([]byte, int) { return append(b, 0, 0, 0, 0), len(b) }

// EndFrame writes the length of the frame begun at start.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// ReadFrame reads one frame from r into buf (grown as needed) and returns
// its body, without the length. A length above max, or negative, is an
// error.
func ReadFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(l[:])))
	if n < 0 || n > max {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrLength, n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// A Reader reads the fields of records from a byte slice.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader of b. Strings and buffers it returns are
// copies; b is not kept past the reads.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error of a read, nil if none failed.
func (r *Reader) Err() error { return r.err }

// Len returns the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Offset returns the number of bytes read.
func (r *Reader) Offset() int { return r.off }

// End sets ErrTrailing if bytes are left, and returns Err.
func (r *Reader) End() error {
	if r.err == nil && r.Len() > 0 {
		r.err = fmt.Errorf("%w: %d bytes", ErrTrailing, r.Len())
	}
	return r.err
}

func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > r.Len() {
		r.err = ErrShort
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

// Int32 reads an int.
func (r *Reader) Int32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

// Int64 reads a long.
func (r *Reader) Int64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// Bool reads a boolean: one byte, anything but 0 is true.
func (r *Reader) Bool() bool {
	p := r.take(1)
	return p != nil && p[0] != 0
}

// Buffer reads a buffer; the null buffer is nil.
func (r *Reader) Buffer() []byte {
	n := r.Int32()
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 {
		r.err = ErrLength
		return nil
	}
	p := r.take(int(n))
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

// String reads a string; the null string is "".
func (r *Reader) String() string {
	n := r.Int32()
	if r.err != nil || n == -1 {
		return ""
	}
	if n < 0 {
		r.err = ErrLength
		return ""
	}
	return string(r.take(int(n)))
}

// vectorLen reads a vector's length: ok is false for the null vector and
// on an error, which is kept (a negative length other than -1, or more
// elements than the bytes left hold at minSize bytes each).
func (r *Reader) vectorLen(minSize int) (n int, ok bool) {
	l := r.Int32()
	switch {
	case r.err != nil || l == -1:
		return 0, false
	case l < 0:
		r.err = ErrLength
		return 0, false
	case int64(l)*int64(minSize) > int64(r.Len()):
		r.err = ErrShort
		return 0, false
	}
	return int(l), true
}

// Strings reads a vector of strings; the null vector is nil.
func (r *Reader) Strings() []string {
	n, ok := r.vectorLen(4)
	if !ok {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.String()
	}
	if r.err != nil {
		return nil
	}
	return ss
}
