package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

// binary is the zklock program built for the tests, with the servers it
// talks to by default.
type binary struct {
	path    string
	servers string
}

// result is how a zklock process ended.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// buildZklock builds the program into dir, with the race detector when
// the tests run with it.
func buildZklock(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "zklock")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// command returns an unstarted zklock process with ZKLOCK_SERVERS set.
func (b binary) command(args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(b.path, args...)
	cmd.Env = append(os.Environ(), "ZKLOCK_SERVERS="+b.servers, "ZKLOCK_AUTH=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// run runs zklock to its end (bounded by 60 s).
func (b binary) run(t *testing.T, args ...string) result {
	t.Helper()
	p := b.start(t, args...)
	return p.wait(t, 60*time.Second)
}

// process is a zklock started in the background.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	start          time.Time
	exited         chan struct{}
	err            error
}

// start starts zklock; the process is killed when the test ends.
func (b binary) start(t *testing.T, args ...string) *process {
	t.Helper()
	return startCmd(t)(b.command(args...))
}

// startCmd returns a function that starts a prepared command, to be
// killed when the test ends.
func startCmd(t *testing.T) func(cmd *exec.Cmd, stdout, stderr *bytes.Buffer) *process {
	return func(cmd *exec.Cmd, stdout, stderr *bytes.Buffer) *process {
		t.Helper()
		p := &process{cmd: cmd, stdout: stdout, stderr: stderr, start: time.Now(), exited: make(chan struct{})}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", cmd.Path, err)
		}
		go func() {
			p.err = cmd.Wait()
			close(p.exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-p.exited
		})
		return p
	}
}

// wait waits up to d for the process to end.
func (p *process) wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("zklock %q still running after %v; stderr:\n%s", p.cmd.Args[1:], d, p.stderr)
	}
	r := result{code: p.cmd.ProcessState.ExitCode(), stderr: p.stderr.String(), took: time.Since(p.start)}
	if p.stdout != nil {
		r.stdout = p.stdout.String()
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.code = 128 + int(ws.Signal())
	}
	return r
}

// running reports whether the process is still running.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// waitChildren waits until path has n children and returns them.
func waitChildren(t *testing.T, conn *zk.Conn, path string, n int) []string {
	t.Helper()
	var names []string
	locktest.Eventually(t, 20*time.Second, "children of "+path, func() bool {
		names = locktest.Children(t, conn, path)
		return len(names) == n
	})
	return names
}

// lines returns the non-empty lines of a file, none if it does not exist.
func lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// exists reports whether path exists.
func exists(t *testing.T, conn *zk.Conn, path string) bool {
	t.Helper()
	ok, _, err := conn.Exists(path)
	if err != nil {
		t.Fatalf("exists %s: %v", path, err)
	}
	return ok
}

// ctx returns a context for a test's library calls.
func ctx(t *testing.T) context.Context { return locktest.Ctx(t, 30*time.Second) }
