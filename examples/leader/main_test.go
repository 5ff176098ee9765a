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

// Member processes elect a leader; killed, it is followed once its session
// expires; asked to resign, it is followed at once; tokens increase.
func TestElection(t *testing.T) {
	srv := zktest.Shared(t)
	out := runExample(t, "-zk", srv.Addr(), "-path", zktest.UniquePath(t), "-session-timeout", "2s",
		"-tick", "200ms", "-kill-after", "1s", "-resign-after", "4500ms", "-duration", "6s")
	if n := strings.Count(out, "observes: the leader is"); n != 3 {
		t.Errorf("%d leaders observed, want 3 (first, after the kill, after the resignation):\n%s", n, out)
	}
	for _, want := range []string{"kills member-", "asks member-", "ok: one leader at a time"} {
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
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}
