package main

import "syscall"

// childAttr puts CMD in its own process group, and has the kernel kill it
// if zklock dies (a zklock killed with SIGKILL can no longer stop CMD when
// the lock is lost).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
