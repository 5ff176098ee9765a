package retry

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/go-zookeeper/zk"
)

// Retryable reports whether err belongs to the connection-loss class:
// transient failures after which the same operation may succeed once the
// client has reconnected, because the session may still be alive.
//
// Retryable is true when err is, or wraps (see [errors.Is] and
// [errors.As]):
//
//   - [zk.ErrConnectionClosed], [zk.ErrNoServer] or [zk.ErrSessionMoved];
//   - a [net.Error], such as a *[net.OpError] or an I/O timeout;
//   - [io.EOF] or [io.ErrUnexpectedEOF].
//
// Retryable is false for nil and for every other error, in particular
// [zk.ErrSessionExpired] and [zk.ErrClosing] (the session or the client is
// gone: retrying cannot help) and logical errors such as [zk.ErrNoNode],
// [zk.ErrNodeExists], [zk.ErrBadVersion], [zk.ErrNotEmpty] and
// [zk.ErrNoAuth]. The exclusions take precedence: an error that wraps
// [context.Canceled], [context.DeadlineExceeded], [zk.ErrSessionExpired],
// [zk.ErrClosing], [ErrGaveUp] or [ErrInvalidPolicy] is never retryable,
// even if it also wraps a retryable error (a *net.OpError caused by a
// canceled context, for instance, or the error of a nested [Do] that gave
// up).
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range permanent {
		if errors.Is(err, target) {
			return false
		}
	}
	for _, target := range transient {
		if errors.Is(err, target) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// permanent lists the errors that are never retried. It is checked first:
// context.DeadlineExceeded, for one, also satisfies net.Error.
var permanent = []error{
	context.Canceled,
	context.DeadlineExceeded,
	zk.ErrSessionExpired,
	zk.ErrClosing,
	ErrGaveUp,
	ErrInvalidPolicy,
}

// transient lists the sentinel errors of the connection-loss class.
var transient = []error{
	zk.ErrConnectionClosed,
	zk.ErrNoServer,
	zk.ErrSessionMoved,
	io.EOF,
	io.ErrUnexpectedEOF,
}
