package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// javaDir holds Debian's jars.
const javaDir = "/usr/share/java"

// curatorJars must all be present. Debian's jars name their dependencies
// in their manifests' Class-Path, so curator-recipes.jar alone brings in
// curator-framework, curator-client, zookeeper, zookeeper-jute, guava and
// slf4j-api; slf4j-nop keeps SLF4J from warning that it has no binding.
var curatorJars = []string{"curator-recipes", "curator-framework", "curator-client",
	"zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop"}

// installHint tells how to get what the tests need.
const installHint = "run `make test` (its interop-install step runs `scripts/zk.sh install --curator --kazoo`, " +
	"which installs Debian's libcurator-recipes-java and a JDK)"

// compileContender compiles testdata/Contender.java into a temporary
// directory and returns the class path to run it with. It fails the test,
// naming the make target that installs them, when javac or the jars are
// missing.
func compileContender(t *testing.T) string {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Fatalf("interop: javac not found: %s", installHint)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("interop: java not found: %s", installHint)
	}
	for _, j := range curatorJars {
		if _, err := os.Stat(filepath.Join(javaDir, j+".jar")); err != nil {
			t.Fatalf("interop: %s/%s.jar missing: %s", javaDir, j, installHint)
		}
	}
	cp := filepath.Join(javaDir, "curator-recipes.jar") + ":" + filepath.Join(javaDir, "slf4j-nop.jar")
	out := t.TempDir()
	cmd := exec.Command(javac, "-nowarn", "-d", out, "-cp", cp, filepath.Join("testdata", "Contender.java"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("interop: javac: %v\n%s", err, b)
	}
	return out + ":" + cp
}

// proc is one running contender process (the Java Contender, with one
// Curator client, or the kazoo one): one command a line on its stdin, one
// reply a line on its stdout, one command at a time.
type proc struct {
	lang    string // "java" or "kazoo", for messages
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string   // lines printed on stdout
	stderr  *syncBuffer   // for failure messages
	read    chan struct{} // closed when stdout is drained
	mu      sync.Mutex    // one command at a time
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startJava starts a Contender with the given id, connected to servers
// and appending to logPath, and waits (bounded) until it is connected.
// The process is killed, and waited for, when the test ends. It may run
// on any goroutine: it reports failure as an error.
func startJava(t *testing.T, classPath, servers, id, logPath string) (*proc, error) {
	cmd := exec.Command("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Djava.net.preferIPv4Stack=true", "-cp", classPath, "Contender", servers, id, logPath)
	return startProc(t, "java", id, cmd)
}

// startProc starts cmd, a contender process speaking the line protocol,
// and waits (bounded) until it prints "ready". The process is killed, and
// waited for, when the test ends. It may run on any goroutine: it reports
// failure as an error.
func startProc(t *testing.T, lang, id string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{lang: lang, id: id, cmd: cmd, replies: make(chan string, 16), stderr: &syncBuffer{}, read: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("interop: starting %s: %w", lang, err)
	}
	go func() {
		defer close(p.read)
		defer close(p.replies)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.replies <- sc.Text()
		}
	}()
	t.Cleanup(p.stop)
	if err := p.await(context.Background(), "ready", 60*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

// stop asks the process to quit, kills it if it does not within a few
// seconds, and reaps it.
func (p *proc) stop() {
	_, _ = io.WriteString(p.stdin, "quit\n")
	_ = p.stdin.Close()
	exited := make(chan struct{})
	go func() {
		// Drain replies nobody waits for, so the reader can finish.
		for range p.replies {
		}
		<-p.read
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
	_ = p.cmd.Wait()
}

// call sends one command and waits for its reply, which must be want.
// The process's stderr is in the error.
func (p *proc) call(ctx context.Context, want string, command ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, strings.Join(command, " ")+"\n"); err != nil {
		return fmt.Errorf("%s %s: %v: %w%s", p.lang, p.id, command, err, p.tail())
	}
	return p.await(ctx, want, 0)
}

// await waits for the next reply, until ctx ends or, with limit > 0,
// limit passes.
func (p *proc) await(ctx context.Context, want string, limit time.Duration) error {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	select {
	case r, ok := <-p.replies:
		switch {
		case !ok:
			return fmt.Errorf("%s %s exited before %q%s", p.lang, p.id, want, p.tail())
		case r != want:
			return fmt.Errorf("%s %s: got %q, want %q%s", p.lang, p.id, r, want, p.tail())
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: no %q: %w%s", p.lang, p.id, want, ctx.Err(), p.tail())
	}
}

func (p *proc) tail() string {
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return ""
	}
	const max = 2000
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return "\n--- " + p.lang + " stderr ---\n" + s
}
