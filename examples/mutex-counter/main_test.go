//go:build unix

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// Separate worker processes contend for the mutex; the count is exact.
func TestCounter(t *testing.T) {
	srv := zktest.Shared(t)
	out := runExample(t, "-zk", srv.Addr(), "-path", zktest.UniquePath(t), "-workers", "3", "-increments", "5")
	for _, want := range []string{"worker 3  token=", "final count 15, 15 writes accepted", "ok: no update was lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A worker stalled while holding loses the mutex to the others when its
// session expires; its late write is refused by the fencing token.
func TestStallIsFenced(t *testing.T) {
	srv := zktest.Shared(t)
	out := runExample(t, "-zk", srv.Addr(), "-path", zktest.UniquePath(t),
		"-workers", "2", "-increments", "4", "-stall", "1", "-session-timeout", "2s")
	for _, want := range []string{"stalls before writing", "write REFUSED", "FENCED", "ok: no update was lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// runExample builds the example and runs it with args, as a user would,
// and returns its output. A non-zero exit status fails the test.
func runExample(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second // a worker left behind must not hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}
