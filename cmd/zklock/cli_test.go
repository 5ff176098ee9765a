package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCLI runs the built program as processes against a real server. The
// program is built once; the subtests run in parallel.
func TestCLI(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	conn := zktest.Connect(t, srv.Addr())

	t.Run("Counter", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		file := filepath.Join(t.TempDir(), "counter")
		if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		const loops, runs = 4, 10
		script := fmt.Sprintf(`for i in $(seq %d); do "$ZKLOCK_BIN" run %s sh -c 'n=$(cat "$F"); sleep 0.01; echo $((n+1)) > "$F"' || exit 1; done`, runs, path)
		var ps []*process
		for range loops {
			cmd, stdout, stderr := b.command()
			cmd.Path, cmd.Args = "/bin/sh", []string{"sh", "-c", script}
			cmd.Env = append(cmd.Env, "ZKLOCK_BIN="+b.path, "F="+file)
			ps = append(ps, startCmd(t)(cmd, stdout, stderr))
		}
		for _, p := range ps {
			wantCode(t, p.wait(t, 50*time.Second), 0)
		}
		got, _ := os.ReadFile(file)
		if n := strings.TrimSpace(string(got)); n != strconv.Itoa(loops*runs) {
			t.Fatalf("counter = %s, want %d", n, loops*runs)
		}
	})

	t.Run("Conflict", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		holder := b.start(t, "run", path, "sleep", "3")
		node := waitChildren(t, conn, path, 1)

		r := b.run(t, "run", "-n", path, "true")
		wantCode(t, r, 1)
		if r.took > time.Second {
			t.Errorf("run -n took %v, want under 1s", r.took)
		}
		wantCode(t, b.run(t, "run", "-n", "-E", "7", path, "true"), 7)
		wantCode(t, b.run(t, "run", "--nonblock", "--conflict-exit-code", "9", path, "true"), 9)
		r = b.run(t, "run", "-w", "500ms", path, "true")
		wantCode(t, r, 1)
		if r.took < 500*time.Millisecond {
			t.Errorf("run -w 500ms gave up after %v", r.took)
		}
		if !holder.running() {
			t.Fatal("holder ended before the -w run gave up")
		}
		if got := locktest.Children(t, conn, path); !slices.Equal(got, node) {
			t.Errorf("children after the failed runs = %v, want only the holder's %v", got, node)
		}
		wantCode(t, holder.wait(t, 20*time.Second), 0)
	})

	t.Run("Quiet", func(t *testing.T) {
		t.Parallel()
		path, elected := zktest.UniquePath(t), zktest.UniquePath(t)+"-elect"
		holder := b.start(t, "run", path, "sleep", "30")
		leader := b.start(t, "elect", elected, "sleep", "30")
		waitChildren(t, conn, path, 1)
		waitChildren(t, conn, elected, 1)
		for _, c := range []struct {
			args []string
			code int
			msg  string // "" for nothing on stderr
		}{
			{[]string{"run", "-n", "-E", "0", path, "true"}, 0, path + " is held elsewhere"},
			{[]string{"run", "-n", "-E", "0", "-q", path, "true"}, 0, ""},
			{[]string{"run", "--nonblock", "--quiet", path, "true"}, 1, ""},
			{[]string{"run", "-q", "-w", "300ms", path, "true"}, 1, ""},
			{[]string{"run", "-s", "-n", "-q", path, "true"}, exitMismatch, "holds another kind of lock"},
			{[]string{"elect", "-q", "-w", "300ms", elected, "true"}, 1, ""},
			{[]string{"elect", "-w", "300ms", elected, "true"}, 1, "not acquired before the timeout"},
			{[]string{"run", "-n", "-E", "0", "-q", "--zk", closedPort(t), "--session-timeout", "1s", path, "true"}, exitFailure, "cannot reach ZooKeeper"},
		} {
			r := b.run(t, c.args...)
			switch {
			case r.code != c.code:
				t.Errorf("zklock %q: exit %d, want %d; stderr %q", c.args, r.code, c.code, r.stderr)
			case c.msg == "" && r.stderr != "":
				t.Errorf("zklock %q: stderr %q, want nothing", c.args, r.stderr)
			case c.msg != "" && !strings.Contains(r.stderr, c.msg):
				t.Errorf("zklock %q: stderr %q, want %q", c.args, r.stderr, c.msg)
			}
		}
		if !holder.running() || !leader.running() {
			t.Error("the holder or the leader ended early")
		}
		if got := locktest.Children(t, conn, path); len(got) != 1 {
			t.Errorf("children %v, want only the holder's", got)
		}
	})

	t.Run("StatusAndEnv", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		wantCode(t, b.run(t, "run", path, "sh", "-c", "exit 3"), 3)
		wantCode(t, b.run(t, "run", path, "--", "sh", "-c", "kill -TERM $$"), 128+int(syscall.SIGTERM))
		wantCode(t, b.run(t, "run", path, "/nonexistent/cmd"), 127)
		show := []string{"sh", "-c", `echo "$ZKLOCK_TOKEN $ZKLOCK_PATH $ZKLOCK_NODE"`}
		var last int64
		for i := range 2 {
			r := b.run(t, append([]string{"run", path}, show...)...)
			wantCode(t, r, 0)
			f := strings.Fields(r.stdout)
			if len(f) != 3 {
				t.Fatalf("CMD printed %q, want token, path and node", r.stdout)
			}
			tok, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || tok <= 0 || tok <= last {
				t.Errorf("run %d: ZKLOCK_TOKEN %q, want a positive number above %d", i, f[0], last)
			}
			last = tok
			if f[1] != path || !strings.HasPrefix(f[2], "_c_") || !strings.Contains(f[2], mutex.LockName) {
				t.Errorf("ZKLOCK_PATH %q, ZKLOCK_NODE %q; want %s and a protected lock- node", f[1], f[2], path)
			}
		}
		for _, k := range []struct{ flag, name string }{{"-s", "read-"}, {"-x", "write-"}, {"--leases=2", "lease-"}} {
			p := zktest.UniquePath(t)
			r := b.run(t, "run", k.flag, p, "sh", "-c", `echo "$ZKLOCK_NODE"`)
			wantCode(t, r, 0)
			if !strings.Contains(r.stdout, k.name) {
				t.Errorf("run %s: node %q, want a %s node", k.flag, r.stdout, k.name)
			}
		}
	})

	t.Run("Signals", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		log := filepath.Join(t.TempDir(), "log")
		holder := b.start(t, "run", path, "sh", "-c",
			`trap 'echo int >> "$0"; exit 5' INT; echo start >> "$0"; while :; do sleep 0.05; done`, log)
		locktest.Eventually(t, 20*time.Second, "CMD started", func() bool { return len(lines(t, log)) == 1 })
		waiter := b.start(t, "run", path, "true")
		waitChildren(t, conn, path, 2)

		// SIGTERM to a zklock waiting for the lock: it gives up, leaving
		// nothing behind.
		_ = waiter.cmd.Process.Signal(syscall.SIGTERM)
		wantCode(t, waiter.wait(t, 20*time.Second), 128+int(syscall.SIGTERM))
		waitChildren(t, conn, path, 1)

		// SIGINT to a zklock running CMD: CMD gets it; the lock is
		// released after CMD exits, with CMD's status.
		_ = holder.cmd.Process.Signal(syscall.SIGINT)
		wantCode(t, holder.wait(t, 20*time.Second), 5)
		if got := lines(t, log); !slices.Equal(got, []string{"start", "int"}) {
			t.Errorf("CMD's log %v, want start and int", got)
		}
		waitChildren(t, conn, path, 0)
	})

	t.Run("Loss", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		proxy, err := zktest.NewProxy(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		log := filepath.Join(t.TempDir(), "log")
		holder := b.start(t, "run", "--zk", proxy.Addr(), "--session-timeout", "2s", "--kill-after", "5s", path,
			"sh", "-c", `trap 'echo term >> "$0"; exit 143' TERM; echo start >> "$0"; while :; do sleep 0.05; done`, log)
		locktest.Eventually(t, 20*time.Second, "holder's CMD started", func() bool { return len(lines(t, log)) == 1 })
		waiter := b.start(t, "run", path, "sh", "-c", `echo granted >> "$0"`, log)
		waitChildren(t, conn, path, 2)

		proxy.Partition()
		r := holder.wait(t, 20*time.Second)
		wantCode(t, r, exitLost)
		if !strings.Contains(r.stderr, "lost") {
			t.Errorf("stderr %q does not say the lock was lost", r.stderr)
		}
		wantCode(t, waiter.wait(t, 20*time.Second), 0)
		if got, want := lines(t, log), []string{"start", "term", "granted"}; !slices.Equal(got, want) {
			t.Errorf("events %v, want %v: the holder's CMD is told before the waiter is granted", got, want)
		}
	})

	t.Run("Elect", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		dir := t.TempDir()
		log, watched := filepath.Join(dir, "log"), filepath.Join(dir, "watched")
		cmd, _, stderr := b.command("leader", "--watch", path)
		out, err := os.Create(watched)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd.Stdout = out
		watch := startCmd(t)(cmd, nil, stderr)
		// Each term lasts until the watcher has printed its leader, so
		// that no change of leader is too quick to be seen.
		term := `echo "start $1" >> "$0"; n=0; while ! grep -qx "e$1" "$2" && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; echo "end $1" >> "$0"`
		var ps []*process
		for i := range 3 {
			ps = append(ps, b.start(t, "elect", "--id", fmt.Sprintf("e%d", i), path,
				"sh", "-c", term, log, fmt.Sprint(i), watched))
		}
		for _, p := range ps {
			wantCode(t, p.wait(t, 30*time.Second), 0)
		}
		got := lines(t, log)
		if len(got) != 6 {
			t.Fatalf("log %q, want 3 terms", got)
		}
		for i := 0; i < 6; i += 2 {
			s, e := strings.Fields(got[i]), strings.Fields(got[i+1])
			if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
				t.Fatalf("log %q: two terms overlap", got)
			}
		}
		_ = watch.cmd.Process.Signal(syscall.SIGINT)
		wantCode(t, watch.wait(t, 10*time.Second), 0)
		if got, want := lines(t, watched), []string{"e0", "e1", "e2"}; !sameSet(got, want) {
			t.Errorf("leader --watch printed %v, want %v", got, want)
		}
		wantCode(t, b.run(t, "leader", path), exitNoLeader)
	})

	t.Run("ElectHandover", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		log := filepath.Join(t.TempDir(), "log")
		const sessionTimeout = 2 * time.Second
		var ps []*process
		for i := range 2 {
			ps = append(ps, b.start(t, "elect", "--session-timeout", sessionTimeout.String(), "--id", fmt.Sprint(i), path,
				"sh", "-c", `echo "$1 $$" >> "$0"; exec sleep 60`, log, fmt.Sprint(i)))
		}
		locktest.Eventually(t, 20*time.Second, "a leader", func() bool { return len(lines(t, log)) == 1 })
		first := strings.Fields(lines(t, log)[0])
		r := b.run(t, "leader", path)
		wantCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != first[0] {
			t.Errorf("leader printed %q, the leader is %s", r.stdout, first[0])
		}
		i, _ := strconv.Atoi(first[0])
		killed := time.Now()
		_ = ps[i].cmd.Process.Kill()
		locktest.Eventually(t, 20*time.Second, "the next leader", func() bool { return len(lines(t, log)) == 2 })
		took := time.Since(killed)
		if second := strings.Fields(lines(t, log)[1]); second[0] == first[0] {
			t.Fatalf("log %q: the same leader twice", lines(t, log))
		}
		if took > sessionTimeout+3*time.Second {
			t.Errorf("handover took %v, session timeout %v", took, sessionTimeout)
		}
		pid, _ := strconv.Atoi(first[1])
		if alive(pid) {
			t.Errorf("the killed leader's CMD (pid %d) still runs", pid)
		}
	})

	t.Run("LsRm", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		var ps []*process
		for i, args := range [][]string{{"sleep", "30"}, {"true"}, {"true"}} {
			ps = append(ps, b.start(t, append([]string{"run", path}, args...)...))
			waitChildren(t, conn, path, i+1)
		}
		r := b.run(t, "ls", "--json", path)
		wantCode(t, r, 0)
		var l listing
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatalf("ls --json: %v\n%s", err, r.stdout)
		}
		if len(l.Participants) != 3 {
			t.Fatalf("ls --json listed %d nodes, want 3:\n%s", len(l.Participants), r.stdout)
		}
		host, _ := os.Hostname()
		for i, e := range l.Participants {
			want := fmt.Sprintf("%s:%d", host, ps[i].cmd.Process.Pid)
			switch {
			case e.Position != i, e.Kind != "mutex", e.Holder == nil, *e.Holder != (i == 0):
				t.Errorf("entry %d: %+v", i, e)
			case e.Data != want:
				t.Errorf("entry %d: data %q, want %q", i, e.Data, want)
			case e.AgeSeconds == nil || *e.AgeSeconds < 0 || e.Token <= 0 || e.Session == "0x0":
				t.Errorf("entry %d: age, token or session missing: %+v", i, e)
			case i > 0 && (*e.AgeSeconds > *l.Participants[i-1].AgeSeconds || e.Token <= l.Participants[i-1].Token):
				t.Errorf("entry %d is not younger than entry %d", i, i-1)
			}
		}
		r = b.run(t, "ls", path)
		wantCode(t, r, 0)
		rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(rows) != 4 || !strings.Contains(rows[1], "holds") || !strings.Contains(rows[2], "waits") ||
			!strings.Contains(rows[1], l.Participants[0].Node) {
			t.Errorf("ls:\n%s", r.stdout)
		}

		// rm the zklock holder: it is told, stops CMD and exits 75; the
		// first waiter gets the lock.
		holderNode := l.Participants[0].Node
		r = b.run(t, "rm", path, holderNode)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "would delete") || len(locktest.Children(t, conn, path)) != 3 {
			t.Fatalf("rm without --force: %q, children %v", r.stdout, locktest.Children(t, conn, path))
		}
		wantCode(t, b.run(t, "rm", "--force", path, holderNode), 0)
		wantCode(t, ps[0].wait(t, 20*time.Second), exitLost)
		wantCode(t, ps[1].wait(t, 20*time.Second), 0)
		wantCode(t, ps[2].wait(t, 20*time.Second), 0)
		wantCode(t, b.run(t, "rm", "--force", path, holderNode), exitConflict)
	})

	t.Run("LsSemaphore", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		var ps []*process
		for i := range 3 {
			ps = append(ps, b.start(t, "run", "--leases", "2", path, "sleep", "30"))
			waitChildren(t, conn, path, i+1)
		}
		// ls reads the number of leases the semaphore recorded in PATH.
		r := b.run(t, "ls", "--json", path)
		wantCode(t, r, 0)
		var l listing
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatalf("ls --json: %v\n%s", err, r.stdout)
		}
		if l.Leases != 2 || len(l.Participants) != 3 {
			t.Fatalf("ls --json without --leases:\n%s", r.stdout)
		}
		for i, e := range l.Participants {
			if e.Kind != "lease" || e.Holder == nil || *e.Holder != (i < 2) {
				t.Errorf("entry %d: %+v, want a lease that %s", i, e, map[bool]string{true: "holds", false: "waits"}[i < 2])
			}
		}
		r = b.run(t, "ls", path)
		wantCode(t, r, 0)
		rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(rows) != 4 || !strings.Contains(rows[1], "holds") || !strings.Contains(rows[2], "holds") ||
			!strings.Contains(rows[3], "waits") || r.stderr != "" {
			t.Errorf("ls:\n%s\nstderr: %s", r.stdout, r.stderr)
		}
		// --leases wins over the record, with a warning.
		r = b.run(t, "ls", "--json", "--leases", "3", path)
		wantCode(t, r, 0)
		l = listing{}
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatal(err)
		}
		if e := l.Participants[2]; e.Holder == nil || !*e.Holder || l.Leases != 3 {
			t.Errorf("ls --leases 3: third entry %+v, leases %d; want it to hold", e, l.Leases)
		}
		if !strings.Contains(r.stderr, "records 2 leases; using --leases 3") {
			t.Errorf("ls --leases 3: stderr %q, want a warning", r.stderr)
		}
		// rm shows the state as ls does.
		r = b.run(t, "rm", path, l.Participants[0].Node)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "holds") {
			t.Errorf("rm without --force:\n%s", r.stdout)
		}
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}

		// A directory without the record: lease nodes stay unknown.
		bare := zktest.UniquePath(t)
		mkdir(t, conn, bare)
		_, err := conn.Create(bare+"/_c_"+uuid.NewString()+"-lease-", []byte("x"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		r = b.run(t, "ls", "--json", bare)
		wantCode(t, r, 0)
		l = listing{}
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Participants) != 1 || l.Participants[0].Holder != nil || l.Leases != 0 {
			t.Errorf("ls of a lease node with no record:\n%s", r.stdout)
		}
	})

	t.Run("RmLibraryHolder", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path, mutex.WithData([]byte("orders-worker-7")))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		r := b.run(t, "rm", path, m.Node())
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "orders-worker-7") || locktest.Closed(m.Done()) {
			t.Fatalf("rm without --force: %q, done %v", r.stdout, locktest.Closed(m.Done()))
		}
		wantCode(t, b.run(t, "rm", "--force", path, m.Node()), 0)
		select {
		case <-m.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the holder's Done did not fire after rm --force")
		}
		if !errors.Is(m.Err(), recipe.ErrNodeDeleted) {
			t.Errorf("holder's Err = %v, want node deleted", m.Err())
		}
	})

	t.Run("LsCuratorQueue", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		rw := zktest.UniquePath(t) + "-rw"
		mkdir(t, conn, path)
		mkdir(t, conn, rw)
		create := func(dir, name, data string) {
			t.Helper()
			_, err := conn.Create(dir+"/_c_"+uuid.NewString()+"-"+name, []byte(data), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			if err != nil {
				t.Fatal(err)
			}
		}
		create(path, "lock-", "curator-a")
		create(path, "lock-", "curator-b")
		create(rw, "__WRIT__", "w")
		create(rw, "__READ__", "r1")
		create(rw, "__READ__", "r2")
		for _, c := range []struct {
			path  string
			kinds []string
			held  []bool
			data  []string
		}{
			{path, []string{"mutex", "mutex"}, []bool{true, false}, []string{"curator-a", "curator-b"}},
			{rw, []string{"write", "read", "read"}, []bool{true, false, false}, []string{"w", "r1", "r2"}},
		} {
			r := b.run(t, "ls", "--json", c.path)
			wantCode(t, r, 0)
			var l listing
			if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Participants) != len(c.kinds) {
				t.Fatalf("ls %s:\n%s", c.path, r.stdout)
			}
			for i, e := range l.Participants {
				if e.Kind != c.kinds[i] || e.Holder == nil || *e.Holder != c.held[i] || e.Data != c.data[i] {
					t.Errorf("ls %s entry %d: %+v", c.path, i, e)
				}
			}
		}
	})

	t.Run("LsCurator", func(t *testing.T) {
		t.Parallel()
		java := curatorCommand(t)
		path := zktest.UniquePath(t)
		java.Args = append(java.Args, srv.Addr(), path, "curator-holder")
		stdin, err := java.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := java.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var jerr bytes.Buffer
		java.Stderr = &jerr
		curator := startCmd(t)(java, nil, &jerr)
		held := make(chan struct{})
		go func() {
			if line, _ := bufio.NewReader(stdout).ReadString('\n'); line == "held\n" {
				close(held)
			}
			_, _ = io.Copy(io.Discard, stdout)
		}()
		select {
		case <-held:
		case <-curator.exited:
			t.Fatalf("Curator holder ended: %s", jerr.String())
		case <-time.After(40 * time.Second):
			t.Fatalf("Curator holder did not take the lock: %s", jerr.String())
		}
		waiter := b.start(t, "run", path, "true")
		waitChildren(t, conn, path, 2)
		r := b.run(t, "ls", "--json", path)
		wantCode(t, r, 0)
		var l listing
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Participants) != 2 || l.Participants[0].Data != "curator-holder" || !*l.Participants[0].Holder ||
			l.Participants[0].Kind != "mutex" || *l.Participants[1].Holder {
			t.Fatalf("ls of a Curator holder and a zklock waiter:\n%s", r.stdout)
		}
		if !waiter.running() {
			t.Fatal("zklock ran while Curator held the lock")
		}
		stdin.Close()
		wantCode(t, waiter.wait(t, 20*time.Second), 0)
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		for _, c := range []struct {
			name string
			args []string
			code int
			msg  string
		}{
			{"relative path", []string{"run", "locks/x", "true"}, exitUsage, "absolute"},
			{"missing CMD", []string{"run", path}, exitUsage, "missing CMD"},
			{"missing CMD after --", []string{"run", path, "--"}, exitUsage, "missing CMD"},
			{"no leases", []string{"run", "--leases", "0", path, "true"}, exitUsage, "--leases 0"},
			{"unknown flag", []string{"run", "--bogus", path, "true"}, exitUsage, "unknown flag --bogus"},
			{"shared and exclusive", []string{"run", "-s", "-x", path, "true"}, exitUsage, "exclude"},
			{"unknown command", []string{"lock", path}, exitUsage, "unknown command"},
			{"ls extra argument", []string{"ls", path, "x"}, exitUsage, "unexpected argument"},
		} {
			r := b.run(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
				t.Errorf("%s: exit %d, stderr %q; want %d and %q", c.name, r.code, r.stderr, c.code, c.msg)
			}
			if c.code == exitUsage && !strings.Contains(r.stderr, "usage: zklock") {
				t.Errorf("%s: no usage in stderr %q", c.name, r.stderr)
			}
		}
		if exists(t, conn, path) {
			t.Errorf("%s was created by bad invocations", path)
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		refused := closedPort(t)
		// A name that is not a valid domain name: Go's resolver (forced
		// below) says "no such host" without asking a DNS server.
		const unknown = "nonexistent-.invalid:2181"
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		for _, c := range []struct {
			name    string
			args    []string
			servers string
			want    []string
		}{
			{"refused", []string{"run", path, "true"}, refused,
				[]string{"cannot reach ZooKeeper at " + refused + " within 1s", "dial tcp " + refused, "connection refused"}},
			{"unknown host", []string{"ls", path}, unknown,
				[]string{"cannot reach ZooKeeper at " + unknown, "lookup nonexistent-.invalid", "no such host"}},
			{"both", []string{"leader", path}, refused + "," + unknown,
				[]string{"connection refused; dial tcp: lookup nonexistent-.invalid", "no such host"}},
			{"no answer", []string{"rm", path, "lock-0000000001"}, silent.Addr().String(),
				[]string{silent.Addr().String() + " accepted the connection but opened no session"}},
		} {
			cmd, stdout, stderr := b.command(append([]string{c.args[0], "--zk", c.servers, "--session-timeout", "1s"}, c.args[1:]...)...)
			cmd.Env = append(cmd.Env, "GODEBUG=netdns=go")
			r := startCmd(t)(cmd, stdout, stderr).wait(t, 30*time.Second)
			wantCode(t, r, exitFailure)
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s: stderr %q lacks %q", c.name, r.stderr, w)
				}
			}
			if n := strings.Count(r.stderr, "\n"); n != 1 {
				t.Errorf("%s: %d lines on stderr, want 1:\n%s", c.name, n, r.stderr)
			}
			if r.took > 10*time.Second {
				t.Errorf("%s: gave up after %v with a 1s session timeout", c.name, r.took)
			}
		}
		if exists(t, conn, path) {
			t.Errorf("%s was created", path)
		}
	})

	t.Run("KindMismatch", func(t *testing.T) {
		t.Parallel()
		path := zktest.UniquePath(t)
		holder := b.start(t, "run", path, "sleep", "30")
		node := waitChildren(t, conn, path, 1)
		r := b.run(t, "run", "-s", "-w", "2s", path, "true")
		if r.code == 0 && !strings.Contains(r.stderr, "kind") {
			_ = holder.cmd.Process.Kill()
			t.Skip("the engine does not refuse mixed kinds yet (recipe.ErrMismatch for kinds comes with the framework step)")
		}
		wantCode(t, r, exitMismatch)
		if !strings.Contains(r.stderr, "mutex") || !strings.Contains(r.stderr, "read") {
			t.Errorf("stderr %q does not name both kinds", r.stderr)
		}
		if got := locktest.Children(t, conn, path); !slices.Equal(got, node) {
			t.Errorf("children %v, want only the holder's %v", got, node)
		}
	})
}

// closedPort returns the address of a loopback port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// alive reports whether pid runs (a zombie counts as ended).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil && !errors.Is(err, os.ErrNotExist)
	}
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// curatorJars are the jars of Debian's libcurator-recipes-java and its
// dependencies that CuratorHold needs.
var curatorJars = []string{"curator-client", "curator-framework", "curator-recipes",
	"zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop"}

// curatorCommand returns the command that runs testdata/CuratorHold.java,
// or skips the test when Java or Curator's jars are not installed.
func curatorCommand(t *testing.T) *exec.Cmd {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java: install default-jre-headless and libcurator-recipes-java to test against Curator")
	}
	var cp []string
	for _, j := range curatorJars {
		p := filepath.Join("/usr/share/java", j+".jar")
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s: install libcurator-recipes-java to test against Curator", p)
		}
		cp = append(cp, p)
	}
	return exec.Command(java, "-cp", strings.Join(cp, ":"), filepath.Join("testdata", "CuratorHold.java"))
}

// mkdir creates the persistent node p, and its parent if needed.
func mkdir(t *testing.T, conn *zk.Conn, p string) {
	t.Helper()
	// The tests' parent is a container the server may reap while empty:
	// create it again when it is gone.
	for try := 0; ; try++ {
		_, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNoNode) && try < 5 {
			if _, err := conn.Create(parentDir(p), nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// parentDir returns the parent of the ZooKeeper path p.
func parentDir(p string) string { return p[:strings.LastIndex(p, "/")] }
