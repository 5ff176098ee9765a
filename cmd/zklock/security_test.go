package main

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

const aliceAuth = "alice:S3CRET-PW-XYZ"

// startWith starts zklock with extra environment variables.
func (b binary) startWith(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd, stdout, stderr := b.command(args...)
	cmd.Env = append(cmd.Env, env...)
	return startCmd(t)(cmd, stdout, stderr)
}

// runWith runs zklock with extra environment variables to its end.
func (b binary) runWith(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return b.startWith(t, env, args...).wait(t, 60*time.Second)
}

// TestProtectedLock is the operator's scenario: zklock with credentials
// (ZKLOCK_AUTH) takes a lock on a path whose directories it creates. The
// directories and the lock node carry alice's ACL and world READ only; a
// client without credentials can read (zklock ls works) but cannot
// delete the node (zklock rm --force exits 77, a raw delete fails), rewrite
// it, change its ACL, queue in the directory or rewrite the directory; the
// holder keeps its lock. With the credentials, rm --force clears it (the
// holder exits 75). Before: zklock created every node world:anyone:cdrwa,
// and the outsider's rm --force deleted the holder's node.
func TestProtectedLock(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	raw := zktest.Connect(t, srv.Addr()) // no credentials
	parent := zktest.UniquePath(t)
	path := parent + "/jobs/nightly"
	auth := []string{"ZKLOCK_AUTH=" + aliceAuth}

	holder := b.startWith(t, auth, "run", path, "sleep", "60")
	node := waitChildren(t, raw, path, 1)[0]
	nodePath := path + "/" + node

	// The server shows a digest's hash only to whom may ADMIN the node:
	// to the outsider, "alice:x".
	wantACL := []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "alice:x"}, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}
	for _, p := range []string{parent + "/jobs", path, nodePath} {
		acl, _, err := raw.GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sameACL(acl, wantACL) {
			t.Errorf("ACL of %s = %v, want %v", p, acl, wantACL)
		}
	}
	if err := raw.Delete(nodePath, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's delete of the lock node: %v, want no auth", err)
	}
	if _, err := raw.Set(nodePath, []byte("fake-host:1"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's set of the lock node: %v, want no auth", err)
	}
	if _, err := raw.SetACL(nodePath, zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's setAcl of the lock node: %v, want no auth", err)
	}
	if _, err := raw.SetACL(path, zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's setAcl of the directory: %v, want no auth", err)
	}
	if _, err := raw.Create(path+"/_c_00000000-0000-0000-0000-000000000000-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's create in the directory: %v, want no auth", err)
	}
	r := b.run(t, "rm", "--force", path, node)
	wantCode(t, r, exitPermission)
	if !holder.running() || !exists(t, raw, nodePath) {
		t.Fatalf("the outsider's rm --force took the lock: holder running %v; stderr %s", holder.running(), r.stderr)
	}
	r = b.run(t, "ls", path)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, node) || !strings.Contains(r.stdout, "holds") {
		t.Errorf("outsider's ls:\n%s", r.stdout)
	}

	wantCode(t, b.runWith(t, auth, "rm", "--force", path, node), 0)
	wantCode(t, holder.wait(t, 20*time.Second), exitLost)
}

// sameACL reports whether a and b hold the same entries, in any order.
func sameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return false
		}
	}
	return true
}

// TestDirectoryACLCheck: with credentials, zklock runs the library's check
// of the lock directory: an open directory someone else made is refused
// with status 77 naming the grant, before zklock queues; --acl open
// accepts it. --acl private gives the world nothing, not even READ.
// Before: zklock with credentials queued in an open directory without a
// word.
func TestDirectoryACLCheck(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	raw := zktest.Connect(t, srv.Addr())
	auth := []string{"ZKLOCK_AUTH=" + aliceAuth}
	open := zktest.UniquePath(t)
	mkdir(t, raw, open)

	r := b.runWith(t, auth, "run", open, "true")
	wantCode(t, r, exitPermission)
	if !strings.Contains(r.stderr, open+" grants world:anyone:cdrwa") {
		t.Errorf("stderr %q; want the grant named", r.stderr)
	}
	if n := locktest.Children(t, raw, open); len(n) != 0 {
		t.Errorf("nodes left in the refused directory: %v", n)
	}
	wantCode(t, b.runWith(t, auth, "run", "--acl", "open", open, "true"), 0)
	wantCode(t, b.runWith(t, append(auth, "ZKLOCK_ACL=open"), "run", open, "true"), 0)

	private := zktest.UniquePath(t) + "/private"
	holder := b.startWith(t, auth, "run", "--acl", "private", private, "sleep", "30")
	locktest.Eventually(t, 20*time.Second, "the private lock taken", func() bool {
		_, err := raw.Create(private+"/x", nil, 0, zk.WorldACL(zk.PermAll))
		return errors.Is(err, zk.ErrNoAuth)
	})
	if _, _, err := raw.Children(private); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("outsider's listing of a private directory: %v, want no auth", err)
	}
	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	holder.wait(t, 20*time.Second)

	r = b.run(t, "run", "--acl", "private", private, "true")
	wantCode(t, r, exitUsage)
	if !strings.Contains(r.stderr, "needs credentials") {
		t.Errorf("--acl private without credentials: stderr %q", r.stderr)
	}
}

// TestCredentialsNotInherited: CMD does not get ZKLOCK_AUTH (before, "env"
// in CMD printed alice's password); a variable of another name, the way
// docs/cli.md passes credentials on deliberately, reaches it.
func TestCredentialsNotInherited(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	r := b.runWith(t, []string{"ZKLOCK_AUTH=" + aliceAuth, "APP_ZK_AUTH=" + aliceAuth},
		"run", zktest.UniquePath(t), "sh", "-c", "env")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "ZKLOCK_AUTH") {
		t.Errorf("CMD's environment has ZKLOCK_AUTH:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "APP_ZK_AUTH="+aliceAuth) || !strings.Contains(r.stdout, "ZKLOCK_TOKEN=") {
		t.Errorf("CMD's environment lacks APP_ZK_AUTH or ZKLOCK_TOKEN:\n%s", r.stdout)
	}
}

// TestTLSFlags: zklock connects over TLS with the CA, the client
// certificate and key from flags or the environment, to a server that
// requires client certificates; without a client certificate, with
// another CA, or in plain TCP it is refused (69).
func TestTLSFlags(t *testing.T) {
	ca, err := zktest.NewCA("zklock test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue()
	if err != nil {
		t.Fatal(err)
	}
	other, err := zktest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := zktest.Start(t, zktest.WithTLS(cert), zktest.WithTLSClientCA(ca))
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", ca.PEM())
	otherFile := write("other.pem", other.PEM())
	certFile := write("cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))

	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.SecureAddr()}
	path := zktest.UniquePath(t)
	tlsFlags := []string{"--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile}
	r := b.run(t, append(append([]string{"run"}, tlsFlags...), path, "true")...)
	wantCode(t, r, 0)
	r = b.runWith(t, []string{"ZKLOCK_TLS_CA=" + caFile, "ZKLOCK_TLS_CERT=" + certFile, "ZKLOCK_TLS_KEY=" + keyFile, "ZKLOCK_TLS_SERVER_NAME=localhost"},
		"run", path, "true")
	wantCode(t, r, 0)

	for _, c := range []struct {
		name string
		args []string
	}{
		{"no client certificate", []string{"--tls-ca", caFile}},
		{"another CA", []string{"--tls-ca", otherFile, "--tls-cert", certFile, "--tls-key", keyFile}},
		{"a server name the certificate lacks", append(tlsFlags[:6:6], "--tls-server-name", "zk.example.com")},
		{"plain TCP", nil},
	} {
		args := append(append([]string{"run", "--session-timeout", "2s"}, c.args...), path, "true")
		r := b.run(t, args...)
		if r.code != exitFailure {
			t.Errorf("%s: exit %d, want %d; stderr %q", c.name, r.code, exitFailure, r.stderr)
		}
	}
	r = b.run(t, "run", "--tls-cert", certFile, path, "true")
	wantCode(t, r, exitUsage)
}

// TestSignalWhileConnecting: SIGINT or SIGTERM while zklock connects to a
// server that never answers ends it at once with 130 or 143. Before, run
// and elect exited 69 when the session timeout (30 s here) ran out.
func TestSignalWhileConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 100)
	defer func() {
		ln.Close()
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c: // accepted, never answered
			default:
				c.Close()
			}
		}
	}()
	b := binary{path: buildZklock(t, t.TempDir()), servers: ln.Addr().String()}
	for _, c := range []struct {
		args []string
		sig  syscall.Signal
	}{
		{[]string{"run", "--session-timeout", "30s", "/a", "true"}, syscall.SIGINT},
		{[]string{"run", "--session-timeout", "30s", "/a", "true"}, syscall.SIGTERM},
		{[]string{"elect", "--session-timeout", "30s", "/a", "true"}, syscall.SIGTERM},
	} {
		p := b.start(t, c.args...)
		time.Sleep(700 * time.Millisecond) // connecting by now
		sent := time.Now()
		_ = p.cmd.Process.Signal(c.sig)
		r := p.wait(t, 40*time.Second)
		if took := time.Since(sent); r.code != 128+int(c.sig) || took > 3*time.Second {
			t.Errorf("zklock %q: %v while connecting: exit %d after %v; want %d at once; stderr %q", c.args, c.sig, r.code, took.Round(time.Millisecond), 128+int(c.sig), r.stderr)
		}
	}
}

// TestOthersDataPrintedAsData: ids, node data and node names others wrote
// reach the terminal quoted, controls escaped (C0, C1, bidi), long values
// cut with their length named, in leader, leader --watch, ls and its JSON.
// Before, leader printed a participant's --id raw (retitling, clearing and
// recolouring the terminal), ls passed C1 and U+202E through, and 1 MB of
// data was printed whole.
func TestOthersDataPrintedAsData(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	raw := zktest.Connect(t, srv.Addr())
	const evil = "\x1b]0;PWNED-TITLE\a\x1b[2J\x1b[31mRED\r\nfake line\u009b31m\u0085\u202e"
	clean := func(what, out string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\a", "\r", "\u009b", "\u0085", "\u202e"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s prints %q raw:\n%q", what, bad, out)
			}
		}
	}

	elected := zktest.UniquePath(t)
	leader := b.start(t, "elect", "--id", evil, elected, "sleep", "30")
	waitChildren(t, raw, elected, 1)
	watch := b.start(t, "leader", "--watch", elected)
	r := b.run(t, "leader", elected)
	wantCode(t, r, 0)
	clean("leader", r.stdout)
	if !strings.Contains(r.stdout, `PWNED-TITLE\a\x1b[2J`) {
		t.Errorf("leader printed %q; want the id quoted", r.stdout)
	}
	node := waitChildren(t, raw, elected, 1)[0]
	big := strings.Repeat("x", 1_000_000) + evil
	if _, err := raw.Set(elected+"/"+node, []byte(big), -1); err != nil {
		t.Fatal(err)
	}
	r = b.run(t, "leader", elected)
	clean("leader of 1 MB", r.stdout)
	cut := fmt.Sprintf("(cut, %d bytes)", len(big))
	if len(r.stdout) > 400 || !strings.Contains(r.stdout, cut) {
		t.Errorf("leader of 1 MB printed %d bytes: %.120q", len(r.stdout), r.stdout)
	}
	time.Sleep(2 * time.Second) // for the watch to see the new data
	_ = watch.cmd.Process.Signal(syscall.SIGTERM)
	wr := watch.wait(t, 10*time.Second)
	clean("leader --watch", wr.stdout)
	if !strings.Contains(wr.stdout, cut) {
		t.Errorf("leader --watch printed %.300q; want the new data, cut", wr.stdout)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait(t, 10*time.Second)

	dir := zktest.UniquePath(t)
	mkdir(t, raw, dir)
	for _, n := range []struct{ name, data string }{
		{"_c_2b8f3c1e-0a44-4c8e-9a77-1f0e6d2c9b10-lock-0000000001", big},
		{"x\u202egnp.exe-lock-0000000002", evil},
	} {
		if _, err := raw.Create(dir+"/"+n.name, []byte(n.data), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r = b.run(t, "ls", dir)
	wantCode(t, r, 0)
	clean("ls", r.stdout)
	if len(r.stdout) > 2000 || !strings.Contains(r.stdout, `"x\u202egnp.exe-lock-0000000002"`) {
		t.Errorf("ls printed %d bytes:\n%.2000s", len(r.stdout), r.stdout)
	}
	r = b.run(t, "ls", "--json", dir)
	wantCode(t, r, 0)
	clean("ls --json", r.stdout)
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Participants) != 2 || l.Participants[1].Node != "x\u202egnp.exe-lock-0000000002" {
		t.Errorf("ls --json: %v; %+v", err, l)
	}
}

// TestLsNames: names whose sequence does not parse (a negative one, one
// beyond int64) are shown as of no known kind and state, "?", not as a
// holding mutex; a PATH that does not exist is said so with status 66.
func TestLsNames(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	raw := zktest.Connect(t, srv.Addr())
	dir := zktest.UniquePath(t)
	mkdir(t, raw, dir)
	for _, n := range []string{"_c_x-lock--1", "_c_x-lock-9223372036854775808"} {
		if _, err := raw.Create(dir+"/"+n, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r := b.run(t, "ls", "--json", dir)
	wantCode(t, r, 0)
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Participants {
		if e.Kind != "?" || e.Holder != nil {
			t.Errorf("ls shows %s as kind %s, holder %v; want ? and unknown", e.Node, e.Kind, e.Holder)
		}
	}
	r = b.run(t, "ls", dir+"/nothing-here")
	wantCode(t, r, exitNoInput)
	if !strings.Contains(r.stderr, "no lock directory "+dir+"/nothing-here") {
		t.Errorf("ls of a missing path: stderr %q", r.stderr)
	}
}
