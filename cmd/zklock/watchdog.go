package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// The watchdog. A zklock that is stopped (SIGSTOP, a debugger, a frozen
// container) or hung can no longer stop CMD when the lock is lost: its
// session expires, another process takes the lock, and CMD runs on. So
// zklock starts a second, small process, itself run again as
// "zklock .watchdog", in CMD's process group, and writes it a byte every
// beat from the loop that supervises CMD. When the bytes stop for the
// silence (a quarter of the session timeout), the watchdog sends CMD's
// group SIGTERM, and SIGKILL after the grace (--kill-after, at most an
// eighth of the session timeout): CMD is gone 3/8 of the session timeout
// after zklock's last beat, before the server can have expired the
// session (at the earliest 2/3 of it after zklock's last ping) and granted
// the lock to anyone else. When zklock dies without a word (SIGKILL), the
// watchdog reads the end of its pipe and kills the group at once.
//
// The watchdog sits in CMD's group so that stopping CMD's group stops it
// too (CMD then does not run either), and stopping zklock's group (^Z)
// does not. It ignores the signals zklock forwards to the group.

// watchdogCommand is the hidden command that runs the watchdog.
const watchdogCommand = ".watchdog"

// Bytes on the watchdog's pipe.
const (
	beatByte = 'h' // zklock supervises
	quitByte = 'q' // CMD has exited: the watchdog exits
)

// watchdogTimes are the watchdog's times for a session timeout.
type watchdogTimes struct {
	beat    time.Duration // between two bytes zklock writes
	silence time.Duration // no byte for this long: SIGTERM
	grace   time.Duration // then SIGKILL after this
}

func newWatchdogTimes(sessionTimeout, killAfter time.Duration) watchdogTimes {
	silence := sessionTimeout / 4
	return watchdogTimes{
		beat:    max(silence/5, 10*time.Millisecond),
		silence: silence,
		grace:   min(killAfter, sessionTimeout/8),
	}
}

// watchdog is zklock's end of a running watchdog; its zero value (no
// watchdog could be started) does nothing.
type watchdog struct {
	times watchdogTimes
	w     *os.File // the pipe to the watchdog
}

// startWatchdog starts the watchdog of CMD's process group pgid. When it
// cannot be started, it says so on stderr and CMD runs without one.
func startWatchdog(p *proc, pgid int, times watchdogTimes) *watchdog {
	wd := &watchdog{times: times}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(p.stderr, "zklock: warning: no watchdog for CMD: %v\n", err)
		return wd
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(p.stderr, "zklock: warning: no watchdog for CMD: %v\n", err)
		return wd
	}
	defer r.Close()
	cmd := exec.Command(exe, watchdogCommand, strconv.Itoa(pgid), times.silence.String(), times.grace.String())
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.Env = childEnv(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		// CMD's group is gone when CMD exited at once: nothing to watch.
		if syscall.Kill(-pgid, 0) == nil {
			fmt.Fprintf(p.stderr, "zklock: warning: no watchdog for CMD: %v\n", err)
		}
		w.Close()
		return wd
	}
	go func() { _ = cmd.Wait() }()
	wd.w = w
	return wd
}

// send writes b to the watchdog without waiting on a watchdog that does
// not read (stopped along with CMD's group).
func (wd *watchdog) send(b byte) {
	if wd.w == nil {
		return
	}
	_ = wd.w.SetWriteDeadline(time.Now().Add(wd.times.beat))
	_, _ = wd.w.Write([]byte{b})
}

// beat tells the watchdog that zklock supervises.
func (wd *watchdog) beat() { wd.send(beatByte) }

// stop tells the watchdog that CMD has exited, and lets it go.
func (wd *watchdog) stop() {
	if wd.w == nil {
		return
	}
	wd.send(quitByte)
	_ = wd.w.Close()
	wd.w = nil
}

// runWatchdog is the watchdog process: "zklock .watchdog PGID SILENCE
// GRACE", reading zklock's beats on stdin.
func runWatchdog(args []string, in io.Reader, stderr io.Writer) int {
	signal.Ignore(forwarded...)
	if len(args) != 3 {
		fmt.Fprintln(stderr, "zklock .watchdog: want PGID SILENCE GRACE")
		return exitUsage
	}
	pgid, err1 := strconv.Atoi(args[0])
	silence, err2 := time.ParseDuration(args[1])
	grace, err3 := time.ParseDuration(args[2])
	if err1 != nil || err2 != nil || err3 != nil || pgid <= 1 || silence <= 0 || grace < 0 {
		fmt.Fprintf(stderr, "zklock .watchdog: bad arguments %q\n", args)
		return exitUsage
	}
	bytes := make(chan byte)
	go func() {
		defer close(bytes)
		buf := make([]byte, 64)
		for {
			n, err := in.Read(buf)
			for _, b := range buf[:n] {
				bytes <- b
			}
			if err != nil {
				return
			}
		}
	}()
	parent := os.Getppid()
	timer := time.NewTimer(silence)
	for {
		select {
		case b, ok := <-bytes:
			switch {
			case !ok:
				fmt.Fprintf(stderr, "zklock: watchdog: zklock (pid %d) is gone: sending SIGKILL to CMD\n", parent)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				return exitLost
			case b == quitByte:
				return exitOK
			}
			timer.Reset(silence)
		case <-timer.C:
			fmt.Fprintf(stderr, "zklock: watchdog: no sign of zklock (pid %d) for %v, its lock may be lost: sending SIGTERM to CMD\n", parent, silence)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			time.Sleep(grace)
			fmt.Fprintf(stderr, "zklock: watchdog: sending SIGKILL to CMD\n")
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // the watchdog too
			return exitLost
		}
	}
}
