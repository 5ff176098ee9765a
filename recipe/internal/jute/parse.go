package jute

import "encoding/binary"

// The functions below read fixed fields in place, without a Reader and
// without copying: for code that follows a byte stream as it passes (a
// connection's tap), where a frame may be seen in pieces.

// FrameLen returns the length a frame's first four bytes give (of the
// body after them); ok is false when b is shorter than four bytes.
func FrameLen(b []byte) (n int, ok bool) {
	if len(b) < 4 {
		return 0, false
	}
	return int(int32(binary.BigEndian.Uint32(b))), true
}

// IsFrame reports whether b is exactly one frame: a length, then that
// many bytes.
func IsFrame(b []byte) bool {
	n, ok := FrameLen(b)
	return ok && n == len(b)-4
}

// Len reads the length that starts the string or buffer at the start of
// b; ok is false when b ends before the length or before the bytes it
// counts. A negative length is a null string or buffer.
func Len(b []byte) (n int, ok bool) {
	if len(b) < 4 {
		return 0, false
	}
	n = int(int32(binary.BigEndian.Uint32(b)))
	return n, n <= len(b)-4
}

// ParseRequestHeader reads the request header at the start of b.
func ParseRequestHeader(b []byte) (h RequestHeader, ok bool) {
	if len(b) < 8 {
		return h, false
	}
	return RequestHeader{Xid: int32(binary.BigEndian.Uint32(b)), Op: int32(binary.BigEndian.Uint32(b[4:]))}, true
}

// ParseReplyHeader reads the reply header at the start of b.
func ParseReplyHeader(b []byte) (h ReplyHeader, ok bool) {
	if len(b) < ReplyHeaderLen {
		return h, false
	}
	return ReplyHeader{
		Xid:  int32(binary.BigEndian.Uint32(b)),
		Zxid: int64(binary.BigEndian.Uint64(b[4:])),
		Err:  int32(binary.BigEndian.Uint32(b[12:])),
	}, true
}

// ConnectHeadLen is the length of the fixed fields that start a connect
// response: protocol version, timeout and session id.
const ConnectHeadLen = 16
