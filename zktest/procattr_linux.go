package zktest

import "syscall"

// sysProcAttr makes the kernel kill a server JVM when the test process
// dies, so a crashed or interrupted test run leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
