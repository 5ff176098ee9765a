//go:build !linux

package zktest

import (
	"syscall"
	"time"
)

// sysProcAttr returns nil: outside Linux there is no parent-death signal,
// so servers of a crashed test run must be stopped by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped returns at once: outside Linux a Freeze is not waited for.
func waitStopped(pid int, limit time.Duration) error { return nil }
