//go:build unix && !linux

package faults

import "syscall"

// holderProcAttr: outside Linux there is no parent-death signal; the harness
// ends its holders itself (stopAll), but a killed run leaves them to
// end on their own (-life, 3 minutes at most).
func holderProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
