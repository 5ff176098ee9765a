package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The peers are other ZooKeeper lock libraries, measured by small programs
// of ours in internal/bench/peers/ that the runner starts as processes
// pointed at its server (or at its fault proxy):
//
//   - Curator: CuratorPeer.java, Apache Curator's InterProcessMutex,
//     InterProcessSemaphoreV2, InterProcessReadWriteLock and LeaderLatch
//     (Debian's libcurator-recipes-java), compiled here with javac.
//   - kazoo: kazoo_peer.py, kazoo's Lock, Semaphore, ReadLock/WriteLock
//     and Election (Debian's python3-kazoo).
//
// The protocol (peers/README.md): the peer prints "ready" once its
// sessions are open (and warmed up), the runner takes the server's request
// count and writes "go", the peer measures and prints one line of JSON,
// the runner takes the count again (and counts orphaned nodes) and closes
// the peer's stdin, and the peer closes its sessions and exits.

// peerPrograms knows how to start the peers.
type peerPrograms struct {
	dir      string // the programs' sources
	classDir string // CuratorPeer.class; "" when Curator is not used
	python   string
	tmp      string        // removed by close
	baseline *baselinePeer // -baseline's program; nil when not used
}

// Peer names.
const (
	peerCurator = "Curator"
	peerKazoo   = "kazoo"
)

// curatorJars are the jars (in /usr/share/java) CuratorPeer needs.
var curatorJars = []string{
	"curator-recipes", "curator-framework", "curator-client", "guava",
	"zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-nop",
}

// javaDir is where Debian installs jars.
const javaDir = "/usr/share/java"

// defaultPeersDir returns the peers directory next to this file's source.
func defaultPeersDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "internal/bench/peers"
	}
	return filepath.Join(filepath.Dir(file), "peers")
}

// defaultPython returns Debian's python3, where python3-kazoo installs
// kazoo, or "python3".
func defaultPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// preparePeers checks that the peers the scenarios use are installed and
// compiles the Java one. It returns nil when no scenario uses a peer.
func preparePeers(cfg config, scenarios []scenario) (*peerPrograms, error) {
	uses := map[string]bool{}
	for _, s := range scenarios {
		for _, p := range []string{peerCurator, peerKazoo, peerBaseline} {
			if strings.HasPrefix(s.title, p+" ") {
				uses[p] = true
			}
		}
	}
	if len(uses) == 0 {
		return nil, nil
	}
	p := &peerPrograms{dir: cfg.peersDir, python: cfg.python}
	if uses[peerBaseline] {
		progress := func(format string, args ...any) {
			if cfg.verbose {
				fmt.Fprintf(os.Stderr, format+"\n", args...)
			}
		}
		b, err := buildBaseline(cfg.baseline, p.dir, progress)
		if err != nil {
			return nil, err
		}
		p.baseline = b
	}
	if uses[peerKazoo] {
		out, err := exec.Command(p.python, "-c", "import kazoo").CombinedOutput()
		if err != nil {
			p.close()
			return nil, fmt.Errorf("kazoo: %s cannot import kazoo (install Debian's python3-kazoo: make bench-peers does): %v %s",
				p.python, err, bytes.TrimSpace(out))
		}
	}
	if uses[peerCurator] {
		cp, err := curatorClassPath()
		if err != nil {
			p.close()
			return nil, err
		}
		if p.tmp, err = os.MkdirTemp("", "zkrecipes-bench-peers-"); err != nil {
			p.close()
			return nil, err
		}
		p.classDir = p.tmp
		src := filepath.Join(p.dir, "CuratorPeer.java")
		out, err := exec.Command("javac", "-nowarn", "-Xlint:-path", "-cp", cp, "-d", p.classDir, src).CombinedOutput()
		if err != nil {
			p.close()
			return nil, fmt.Errorf("javac %s: %v\n%s", src, err, out)
		}
	}
	return p, nil
}

// curatorClassPath returns the class path of Curator and its dependencies.
func curatorClassPath() (string, error) {
	var cp []string
	for _, j := range curatorJars {
		f := filepath.Join(javaDir, j+".jar")
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("curator: %s is missing (install Debian's libcurator-recipes-java: make bench-peers does)", f)
		}
		cp = append(cp, f)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return "", errors.New("curator: javac is missing (install a JDK, e.g. Debian's default-jdk-headless)")
	}
	return strings.Join(cp, ":"), nil
}

func (p *peerPrograms) close() {
	if p == nil {
		return
	}
	if p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
	}
	p.baseline.close()
}

// command returns the command line that runs peer with args.
func (p *peerPrograms) command(peer string, args []string) ([]string, error) {
	switch {
	case p == nil:
		return nil, errors.New("peers not prepared")
	case peer == peerCurator && p.classDir != "":
		cp, err := curatorClassPath()
		if err != nil {
			return nil, err
		}
		return append([]string{"java", "-Xmx256m", "-cp", p.classDir + ":" + cp, "CuratorPeer"}, args...), nil
	case peer == peerKazoo:
		return append([]string{p.python, filepath.Join(p.dir, "kazoo_peer.py")}, args...), nil
	case peer == peerBaseline && p.baseline != nil:
		return append([]string{p.baseline.binary}, args...), nil
	case peer == peerBaseline:
		return nil, errNoBaseline
	}
	return nil, fmt.Errorf("peer %s not prepared", peer)
}

// peerOutput is the JSON line a peer prints.
type peerOutput struct {
	Status    string     `json:"status"`
	ElapsedNs int64      `json:"elapsed_ns"`
	Errors    int        `json:"errors"`
	Completed int64      `json:"completed"`
	Error     string     `json:"error"`
	LatNs     []int64    `json:"lat_ns"`
	HeldNs    [][2]int64 `json:"held_ns"`
	// Of a queue drain (the scale suite): when the holder's release was
	// called and returned, and the used heap before the waiters started
	// and once they were queued (absent when the peer cannot tell).
	ReleaseNs  [2]int64 `json:"release_ns"`
	HeapBefore *int64   `json:"heap_before"`
	HeapAfter  *int64   `json:"heap_after"`
}

// peerRun is one run of a peer program.
type peerRun struct {
	peer string
	args []string
	// limit bounds the whole run; a peer still running then is killed
	// and its result has status statusStalled.
	limit time.Duration
	// beforeGo, when set, is called after the first request count and
	// before "go" (the lost-reply run arms its proxy there).
	beforeGo func()
	// afterResult, when set, is called after the second request count,
	// while the peer's sessions are still open.
	afterResult func()
	// queued, when set, makes the run start with a step of its own: the
	// peer says "started" once its waiters are starting to queue, queued
	// waits until they are all queued, and the runner says "measure"; the
	// peer then says "ready" as usual. An error wrapping errNotQueued
	// ends the run as stalled.
	queued func() error
}

// runPeer runs r and returns the peer's output and the number of request
// packets the server received between "go" and the result (-1 when the
// server did not say).
func (e *env) runPeer(ctx context.Context, r peerRun) (peerOutput, int64, error) {
	argv, err := e.peers.command(r.peer, r.args)
	if err != nil {
		return peerOutput{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.limit)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return peerOutput{}, 0, err
	}
	// An os.Pipe of our own, not StdoutPipe: Wait would close that one,
	// and could lose the last line of a peer that exits right after it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return peerOutput{}, 0, err
	}
	cmd.Stdout = pw
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		_ = pr.Close()
		return peerOutput{}, 0, fmt.Errorf("%s: %w", r.peer, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	done := make(chan struct{})
	defer close(done)
	defer func() {
		_ = stdin.Close()
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			_ = cmd.Process.Kill() // the process started here, by its pid
			<-exited
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	next := func() (string, error) {
		select {
		case l, ok := <-lines:
			if !ok {
				<-exited
				return "", fmt.Errorf("%s exited: %s; stderr: %s", r.peer, cmd.ProcessState, stderr.String())
			}
			return l, nil
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				_ = cmd.Process.Kill()
				return "", nil // reported as stalled
			}
			_ = cmd.Process.Kill()
			return "", ctx.Err()
		}
	}
	line, err := next()
	if err != nil || line == "" {
		return peerOutput{Status: statusStalled}, -1, err
	}
	if r.queued != nil && line == "started" {
		if err := r.queued(); err != nil {
			if errors.Is(err, errNotQueued) {
				return peerOutput{Status: statusStalled, Error: err.Error()}, -1, nil
			}
			return peerOutput{}, 0, err
		}
		if _, err := io.WriteString(stdin, "measure\n"); err != nil {
			return peerOutput{}, 0, fmt.Errorf("%s: %w; stderr: %s", r.peer, err, stderr.String())
		}
		if line, err = next(); err != nil || line == "" {
			return peerOutput{Status: statusStalled}, -1, err
		}
	}
	var p0 int64
	p0ok := false
	if line == "ready" {
		p0, p0ok = e.serverPackets()
		if r.beforeGo != nil {
			r.beforeGo()
		}
		if _, err := io.WriteString(stdin, "go\n"); err != nil {
			return peerOutput{}, 0, fmt.Errorf("%s: %w; stderr: %s", r.peer, err, stderr.String())
		}
		if line, err = next(); err != nil || line == "" {
			return peerOutput{Status: statusStalled}, -1, err
		}
	}
	p1, p1ok := e.serverPackets()
	var out peerOutput
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		return out, 0, fmt.Errorf("%s: bad result line %.200q: %w", r.peer, line, err)
	}
	switch out.Status {
	case "ok":
		out.Status = ""
	case "stalled":
		out.Status = statusStalled
	case "timeout":
		out.Status = statusTimeout
	case "error":
		out.Status = statusError
	}
	if r.afterResult != nil && out.Status == "" {
		r.afterResult()
	}
	packets := int64(-1)
	if p0ok && p1ok {
		packets = p1 - p0
	}
	return out, packets, nil
}

// result turns a peer's output into a result.
func (o peerOutput) result(packets int64) result {
	m := meter{elapsed: time.Duration(o.ElapsedNs), packets: packets, packetsOK: packets >= 0}
	for _, v := range o.LatNs {
		m.lat = append(m.lat, time.Duration(v))
	}
	r := m.result()
	r.Status, r.Detail, r.Errors, r.Orphans = o.Status, o.Error, o.Errors, -1
	return r
}

// peerCycling returns the run of a cycling scenario ("mutex", "semaphore",
// "rwlock") of peer on sessions sessions.
func peerCycling(peer, scenario string, sessions int) func(context.Context, *env, string) (result, error) {
	return func(ctx context.Context, e *env, path string) (result, error) {
		out, packets, err := e.runPeer(ctx, peerRun{
			peer:  peer,
			args:  e.peerArgs(scenario, path, sessions, "-warmup-ms", ms64(e.cfg.warmup), "-duration-ms", ms64(e.cfg.duration)),
			limit: peerStartLimit + e.cfg.warmup + e.cfg.duration + 2*e.cfg.stall,
		})
		if err != nil {
			return result{}, err
		}
		return out.result(packets), nil
	}
}

// peerStartLimit bounds a peer's start and its sessions' connection.
const peerStartLimit = 30 * time.Second

// peerArgs returns the flags every peer takes, and extra.
func (e *env) peerArgs(scenario, path string, sessions int, extra ...string) []string {
	return append([]string{
		"-zk", e.addr, "-path", path, "-scenario", scenario,
		"-sessions", strconv.Itoa(sessions),
		"-session-timeout-ms", ms64(e.cfg.sessionTimeout),
		"-stall-ms", ms64(e.cfg.stall),
		"-leases", strconv.Itoa(semLeases),
		"-reads", strconv.FormatFloat(rwReadShare, 'f', -1, 64),
	}, extra...)
}

func ms64(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf); n > 4096 {
		t.buf = t.buf[n-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
