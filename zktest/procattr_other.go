//go:build !linux

package zktest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no parent-death signal,
// so servers of a crashed test run must be stopped by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }
