package zktest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel kill a server JVM when the test process
// dies, so a crashed or interrupted test run leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits, up to limit, until every thread of process pid is
// stopped (state T in /proc), so that a Freeze has taken effect when it
// returns: the kernel stops the threads of a process one by one, and a
// thread on another CPU may still answer a request meanwhile.
func waitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: %d threads of process %d still running %v after SIGSTOP", running, pid, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of process pid not in the stopped
// state.
func runningThreads(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] != 'T' && b[i+2] != 't' {
			n++
		}
	}
	return n, nil
}
