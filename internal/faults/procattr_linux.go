package faults

import "syscall"

// holderProcAttr has the kernel kill a holder process when the test
// process dies, so an interrupted run or soak leaves none behind.
func holderProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
