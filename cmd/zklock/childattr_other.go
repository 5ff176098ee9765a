//go:build unix && !linux

package main

import "syscall"

// childAttr puts CMD in its own process group. Outside Linux there is no
// parent-death signal: if zklock is killed, CMD runs on.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
