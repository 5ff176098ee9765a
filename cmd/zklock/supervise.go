package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// supervise runs argv in its own process group with the ZKLOCK_ variables
// of h (and without ZKLOCK_AUTH), forwards the signals arriving on sigs to
// the group, and on loss of h sends the group SIGTERM, then SIGKILL after
// killAfter. A watchdog in the group (see watchdog.go) stops CMD if zklock
// itself stops answering, stopped or hung, before the session, of
// sessionTimeout, could expire. It returns CMD's exit status and whether h
// was lost while CMD ran.
func supervise(p *proc, h recipe.Held, path string, argv []string, sigs <-chan os.Signal, killAfter, sessionTimeout time.Duration) (status int, lost bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(childEnv(os.Environ()),
		"ZKLOCK_TOKEN="+strconv.FormatInt(h.Token(), 10),
		"ZKLOCK_PATH="+path,
		"ZKLOCK_NODE="+h.Node())
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(p.stderr, "zklock: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound, false
		}
		return exitNoExec, false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	group := -cmd.Process.Pid
	wd := startWatchdog(p, cmd.Process.Pid, newWatchdogTimes(sessionTimeout, killAfter))
	defer wd.stop()
	beat := time.NewTicker(wd.times.beat)
	defer beat.Stop()
	done := h.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			return exitStatus(err), lost
		case <-beat.C:
			// From this loop, not a goroutine of its own: a zklock
			// that no longer supervises must not look alive.
			wd.beat()
		case s := <-sigs:
			_ = syscall.Kill(group, s.(syscall.Signal))
		case <-done:
			done = nil
			select {
			case err := <-exited: // CMD ended first: it ran under the lock
				return exitStatus(err), false
			default:
			}
			lost = true
			fmt.Fprintf(p.stderr, "zklock: lost %s (%v): sending SIGTERM to CMD\n", path, h.Err())
			_ = syscall.Kill(group, syscall.SIGTERM)
			t := time.NewTimer(killAfter)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(p.stderr, "zklock: CMD still running %v after SIGTERM: sending SIGKILL\n", killAfter)
			_ = syscall.Kill(group, syscall.SIGKILL)
		}
	}
}

// childEnv is zklock's environment without ZKLOCK_AUTH: CMD does not get
// the credentials. A CMD that needs them gets them under another name
// (docs/cli.md).
func childEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "ZKLOCK_AUTH=") {
			out = append(out, kv)
		}
	}
	return out
}

// exitStatus is the shell's view of how CMD ended: its exit code, or 128
// plus the number of the signal that killed it.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitFailure
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalStatus(ws.Signal())
	}
	return ee.ExitCode()
}

// signalStatus is 128 plus the signal's number.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 128
}
