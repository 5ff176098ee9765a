//go:build linux

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// stamps reads the nanosecond times CMD wrote to file, one per line.
func stamps(t *testing.T, file string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, l := range lines(t, file) {
		n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64)
		if err != nil {
			continue // a line cut by the kill
		}
		out = append(out, time.Unix(0, n))
	}
	return out
}

// TestStoppedSupervisor: SIGSTOP on the holder's zklock alone. Its CMD,
// in a process group of its own, is not stopped with it; the watchdog
// sees zklock's beats stop and ends CMD (SIGTERM at a quarter of the
// session timeout, SIGKILL an eighth later), before the server expires
// the stopped zklock's session and a waiter is granted the lock: the two
// CMDs never run together. The bound checked: CMD's last sign of life at
// most 3/8 of the session timeout plus a margin of one second after the
// stop, and before the waiter's CMD's first. Before the watchdog, the old
// CMD ran on next to the new one until zklock was continued (4.6 s in the
// probe).
func TestStoppedSupervisor(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	conn := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	const session = 4 * time.Second
	loop := `while :; do date +%s%N >> "$0"; sleep 0.02; done`

	holder := b.start(t, "run", "--session-timeout", session.String(), path, "sh", "-c", loop, fileA)
	locktest.Eventually(t, 20*time.Second, "holder's CMD running", func() bool { return len(stamps(t, fileA)) > 0 })
	waiter := b.start(t, "run", "--session-timeout", session.String(), path, "sh", "-c",
		`date +%s%N >> "$0"; sleep 1; date +%s%N >> "$0"`, fileB)
	waitChildren(t, conn, path, 2)

	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	defer func() { _ = holder.cmd.Process.Signal(syscall.SIGCONT) }()
	wantCode(t, waiter.wait(t, 60*time.Second), 0)

	a, bs := stamps(t, fileA), stamps(t, fileB)
	if len(a) == 0 || len(bs) == 0 {
		t.Fatalf("stamps: holder %d, waiter %d", len(a), len(bs))
	}
	lastA, firstB := a[len(a)-1], bs[0]
	bound := 3*session/8 + time.Second
	t.Logf("holder's CMD: last sign %v after the stop (bound %v); waiter's CMD began %v after the stop",
		lastA.Sub(stopped).Round(time.Millisecond), bound, firstB.Sub(stopped).Round(time.Millisecond))
	if !lastA.Before(firstB) {
		t.Errorf("the two CMDs ran together for %v", lastA.Sub(firstB))
	}
	if d := lastA.Sub(stopped); d > bound {
		t.Errorf("the stopped zklock's CMD ran %v after the stop, bound %v", d, bound)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(stamps(t, fileA)); n != len(a) {
		t.Errorf("the holder's CMD wrote again after the waiter finished")
	}

	// Continued, the holder finds CMD gone and the lock lost.
	_ = holder.cmd.Process.Signal(syscall.SIGCONT)
	r := holder.wait(t, 30*time.Second)
	if r.code != exitLost && r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("continued holder: exit %d, want %d or %d; stderr %s", r.code, exitLost, 128+int(syscall.SIGTERM), r.stderr)
	}
	if !strings.Contains(r.stderr, "watchdog: no sign of zklock") {
		t.Errorf("holder's stderr lacks the watchdog's note: %s", r.stderr)
	}
}

// TestWatchdogTimes: the watchdog ends CMD within 3/8 of the session
// timeout after zklock's last beat, whatever --kill-after says.
func TestWatchdogTimes(t *testing.T) {
	for _, c := range []struct {
		session, killAfter time.Duration
		want               watchdogTimes
	}{
		{10 * time.Second, 10 * time.Second, watchdogTimes{beat: 500 * time.Millisecond, silence: 2500 * time.Millisecond, grace: 1250 * time.Millisecond}},
		{4 * time.Second, 0, watchdogTimes{beat: 200 * time.Millisecond, silence: time.Second, grace: 0}},
		{100 * time.Millisecond, time.Second, watchdogTimes{beat: 10 * time.Millisecond, silence: 25 * time.Millisecond, grace: 12500 * time.Microsecond}},
	} {
		got := newWatchdogTimes(c.session, c.killAfter)
		if got != c.want {
			t.Errorf("newWatchdogTimes(%v, %v) = %+v, want %+v", c.session, c.killAfter, got, c.want)
		}
		if got.silence+got.grace > 3*c.session/8 {
			t.Errorf("session %v: CMD ends %v after the last beat", c.session, got.silence+got.grace)
		}
	}
}
