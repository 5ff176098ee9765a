//go:build unix && !linux

package faults_test

import "syscall"

// holderProcAttr: outside Linux there is no parent-death signal; the test
// ends its holders itself (stopAll), but a killed test run leaves them to
// end on their own (-life, 3 minutes at most).
func holderProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
