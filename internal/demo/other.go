//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package demo

import (
	"context"
	"errors"
	"time"
)

// Pause is not supported on this system: it needs SIGSTOP and SIGCONT.
func (c *Child) Pause(ctx context.Context, d time.Duration) error {
	return errors.ErrUnsupported
}
