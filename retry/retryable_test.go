package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-zookeeper/zk"
)

// timeoutError is a net.Error that is not from the net package.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestRetryable(t *testing.T) {
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},

		{"ErrConnectionClosed", zk.ErrConnectionClosed, true},
		{"ErrNoServer", zk.ErrNoServer, true},
		{"ErrSessionMoved", zk.ErrSessionMoved, true},
		{"io.EOF", io.EOF, true},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, true},
		{"net.OpError", opErr, true},
		{"net.OpError dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"net.DNSError", &net.DNSError{Err: "no such host", Name: "zk1", IsNotFound: true}, true},
		{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded, true},
		{"custom net.Error", timeoutError{}, true},
		{"wrapped ErrConnectionClosed", fmt.Errorf("get /a: %w", zk.ErrConnectionClosed), true},
		{"doubly wrapped ErrNoServer", fmt.Errorf("b: %w", fmt.Errorf("a: %w", zk.ErrNoServer)), true},
		{"wrapped net.OpError", fmt.Errorf("conn: %w", opErr), true},
		{"wrapped io.EOF", fmt.Errorf("read: %w", io.EOF), true},
		{"joined with a logical error", errors.Join(zk.ErrNoNode, zk.ErrConnectionClosed), true},

		{"ErrSessionExpired", zk.ErrSessionExpired, false},
		{"ErrClosing", zk.ErrClosing, false},
		{"ErrNoNode", zk.ErrNoNode, false},
		{"ErrNodeExists", zk.ErrNodeExists, false},
		{"ErrBadVersion", zk.ErrBadVersion, false},
		{"ErrNotEmpty", zk.ErrNotEmpty, false},
		{"ErrNoAuth", zk.ErrNoAuth, false},
		{"ErrAuthFailed", zk.ErrAuthFailed, false},
		{"ErrInvalidACL", zk.ErrInvalidACL, false},
		{"ErrNoChildrenForEphemerals", zk.ErrNoChildrenForEphemerals, false},
		{"ErrUnknown", zk.ErrUnknown, false},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false},
		{"wrapped context.DeadlineExceeded", fmt.Errorf("op: %w", context.DeadlineExceeded), false},
		{"net.OpError caused by cancellation", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, false},
		{"wrapped ErrSessionExpired", fmt.Errorf("get /a: %w", zk.ErrSessionExpired), false},
		{"expiry joined with connection loss", errors.Join(zk.ErrConnectionClosed, zk.ErrSessionExpired), false},
		{"ErrGaveUp", ErrGaveUp, false},
		{"nested give-up", fmt.Errorf("%w after 3 attempts: %w", ErrGaveUp, zk.ErrConnectionClosed), false},
		{"ErrInvalidPolicy", ErrInvalidPolicy, false},
		{"plain error", errors.New("boom"), false},
		{"error with EOF text", errors.New("EOF"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
