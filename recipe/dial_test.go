package recipe_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Dials that fail with errors of different types (a refused connection,
// a name that does not resolve, a dialer's own error) are all remembered
// for the error of Connect: the last one is reported, nothing panics.
func TestConnectDialErrorsOfEveryType(t *testing.T) {
	var n atomic.Int64
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		switch n.Add(1) % 3 {
		case 0:
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		case 1:
			return nil, &net.DNSError{Err: "no such host", Name: "zk.invalid", IsNotFound: true}
		}
		return nil, errors.New("dialer says no")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := recipe.Connect(ctx, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, recipe.WithDialer(dial))
	if !errors.Is(err, context.DeadlineExceeded) || n.Load() < 3 {
		t.Fatalf("Connect = %v after %d dials; want the deadline and at least 3 dials", err, n.Load())
	}
	t.Logf("%d dials: %v", n.Load(), err)
}
