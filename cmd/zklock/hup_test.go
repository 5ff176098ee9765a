package main

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestHangup: SIGHUP, what an operator's closing SSH session sends, is
// handled like SIGINT and SIGTERM. A zklock waiting for the lock gives up,
// leaves nothing and exits 129; a zklock running CMD forwards it to CMD,
// releases the lock once CMD exits (well before the session could expire)
// and exits with CMD's status.
func TestHangup(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	conn := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	log := filepath.Join(t.TempDir(), "log")
	// A session timeout far above the bounds below: a node left by a
	// zklock that died would still be there.
	holder := b.start(t, "run", "--session-timeout", "30s", path, "sh", "-c",
		`trap 'echo hup >> "$0"; exit 7' HUP; echo start >> "$0"; while :; do sleep 0.05; done`, log)
	locktest.Eventually(t, 20*time.Second, "CMD started", func() bool { return len(lines(t, log)) == 1 })
	waiter := b.start(t, "run", "--session-timeout", "30s", path, "true")
	waitChildren(t, conn, path, 2)

	_ = waiter.cmd.Process.Signal(syscall.SIGHUP)
	wantCode(t, waiter.wait(t, 10*time.Second), 128+int(syscall.SIGHUP))
	waitChildren(t, conn, path, 1)

	_ = holder.cmd.Process.Signal(syscall.SIGHUP)
	wantCode(t, holder.wait(t, 10*time.Second), 7)
	if got := lines(t, log); !slices.Equal(got, []string{"start", "hup"}) {
		t.Errorf("CMD's log %v, want start and hup", got)
	}
	locktest.Eventually(t, 5*time.Second, "lock node deleted", func() bool {
		return len(locktest.Children(t, conn, path)) == 0
	})
}
