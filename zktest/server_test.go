package zktest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

var openACL = zk.WorldACL(zk.PermAll)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("zktest: real ZooKeeper tests skipped under -short")
	}
}

func startServer(t *testing.T, opts zktest.Options) *zktest.Server {
	t.Helper()
	skipShort(t)
	start := time.Now()
	s, err := zktest.StartServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("standalone server on %s started in %v", s.Addr(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// mustCreate creates path (persistent) or fails the test.
func mustCreate(t *testing.T, c *zk.Conn, path string, data []byte) {
	t.Helper()
	if _, err := c.Create(path, data, 0, openACL); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

// createParents creates every ancestor of path that does not exist.
func createParents(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	p := ""
	for _, part := range parts[:len(parts)-1] {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestStandaloneStopStartKill(t *testing.T) {
	s := startServer(t, zktest.Options{})
	if r, err := s.FourLetter("ruok"); err != nil || r != "imok" {
		t.Fatalf("ruok = %q, %v", r, err)
	}
	if r, err := s.FourLetter("srvr"); err != nil || !strings.Contains(r, "Mode: standalone") {
		t.Fatalf("srvr = %q, %v", r, err)
	}

	c := zktest.Connect(t, s.Addr())
	path := zktest.UniquePath(t)
	createParents(t, c, path)
	mustCreate(t, c, path, []byte("kept"))
	if got, _, err := c.Get(path); err != nil || string(got) != "kept" {
		t.Fatalf("get %s = %q, %v", path, got, err)
	}

	// A clean stop and start keeps the data.
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if s.Running() || alive(pid) {
		t.Fatalf("server pid %d still running after Stop", pid)
	}
	if _, err := s.FourLetter("ruok"); err == nil {
		t.Fatal("stopped server still answers ruok")
	}
	start := time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(start).Round(time.Millisecond))
	c2 := zktest.Connect(t, s.Addr())
	if got, _, err := c2.Get(path); err != nil || string(got) != "kept" {
		t.Fatalf("after restart: get %s = %q, %v", path, got, err)
	}

	// SIGKILL: no clean shutdown, yet acknowledged writes survive.
	mustCreate(t, c2, path+"-before-kill", []byte("acked"))
	pid = s.PID()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || alive(pid) {
		t.Fatalf("server pid %d still running after Kill", pid)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("restarted server has the killed pid")
	}
	c3 := zktest.Connect(t, s.Addr())
	for _, p := range []string{path, path + "-before-kill"} {
		if ok, _, err := c3.Exists(p); err != nil || !ok {
			t.Fatalf("after kill and restart: exists %s = %v, %v", p, ok, err)
		}
	}

	// Close removes the directory; Close is idempotent.
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("server dir %s still exists after Close: %v", dir, err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestSharedAndHelpers(t *testing.T) {
	s := zktest.Shared(t)
	if s2 := zktest.Shared(t); s2 != s {
		t.Fatal("Shared returned two different servers")
	}
	c := zktest.Connect(t, s.Addr())
	p1, p2 := zktest.UniquePath(t), zktest.UniquePath(t)
	if p1 == p2 {
		t.Fatalf("UniquePath returned %s twice", p1)
	}
	if !strings.HasPrefix(p1, "/zktest/TestSharedAndHelpers-") {
		t.Fatalf("UniquePath = %s", p1)
	}
	t.Run("sub/test name", func(t *testing.T) {
		p := zktest.UniquePath(t)
		if !strings.HasPrefix(p, "/zktest/TestSharedAndHelpers_sub_test_name-") {
			t.Fatalf("UniquePath = %s", p)
		}
		createParents(t, c, p)
		mustCreate(t, c, p, nil)
	})
	if r, err := s.FourLetter("mntr"); err != nil || !strings.Contains(r, "zk_server_state\tstandalone") {
		t.Fatalf("mntr = %q, %v", r, err)
	}
}

// TestContainerAndTTL checks the server options reach the JVM: empty
// container nodes are removed within a few check intervals, and TTL nodes
// are enabled.
func TestContainerAndTTL(t *testing.T) {
	s := zktest.Shared(t)
	c := zktest.Connect(t, s.Addr())
	path := zktest.UniquePath(t)
	createParents(t, c, path)
	if _, err := c.CreateContainer(path, nil, zk.FlagContainer, openACL); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, path+"/child", nil)
	if err := c.Delete(path+"/child", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTTL(path+"-ttl", nil, zk.FlagTTL, openACL, 500*time.Millisecond); err != nil {
		t.Fatalf("create TTL node: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cont, _, err1 := c.Exists(path)
		ttl, _, err2 := c.Exists(path + "-ttl")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !cont && !ttl {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container exists=%v, TTL node exists=%v after 10s", cont, ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestStartFailureReportsLog(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "zk.sh")
	body := "#!/usr/bin/env bash\necho 'marker: broken server' >&2\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZKRECIPES_ZK_SH", script)
	s, err := zktest.StartServer(zktest.Options{StartTimeout: 5 * time.Second})
	if err == nil {
		s.Close()
		t.Fatal("StartServer with a broken script succeeded")
	}
	if !strings.Contains(err.Error(), "marker: broken server") || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("error does not carry the log tail: %v", err)
	}
}

func TestLogWriter(t *testing.T) {
	var buf syncBuffer
	s := startServer(t, zktest.Options{Log: &buf, TickTime: 100 * time.Millisecond, ForceSync: true})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "tickTime") && !strings.Contains(buf.String(), "QuorumPeerConfig") {
		t.Fatalf("Log writer got no server output: %q", buf.String())
	}
	b, err := os.ReadFile(s.LogPath())
	if err != nil || !strings.Contains(string(b), "QuorumPeerConfig") {
		t.Fatalf("log file %s lacks server output (%v)", s.LogPath(), err)
	}
	cfg, err := os.ReadFile(filepath.Join(s.Dir(), "zoo.cfg"))
	if err != nil || !strings.Contains(string(cfg), "forceSync=yes") || !strings.Contains(string(cfg), "tickTime=100") {
		t.Fatalf("zoo.cfg = %q, %v", cfg, err)
	}
}
