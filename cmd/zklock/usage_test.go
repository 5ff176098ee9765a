package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/driver"
)

// run runs Main in this process with an environment of its own.
func runMain(args []string, env map[string]string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	return code, out.String(), errOut.String()
}

// TestUsageErrors checks the errors found before any I/O: the servers
// named do not exist, so reaching them would fail with another status.
func TestUsageErrors(t *testing.T) {
	env := map[string]string{"ZKLOCK_SERVERS": "127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		msg  string
	}{
		{[]string{}, nil, "missing COMMAND"},
		{[]string{"lock"}, nil, "unknown command"},
		{[]string{"run", "x", "true"}, nil, "must be absolute"},
		{[]string{"run", "/a/", "true"}, nil, "trailing slash"},
		{[]string{"run", "/zookeeper/x", "true"}, nil, "reserved"},
		{[]string{"run", "/a"}, nil, "missing CMD"},
		{[]string{"run"}, nil, "missing PATH"},
		{[]string{"run", "--leases", "0", "/a", "true"}, nil, "--leases 0"},
		{[]string{"run", "--leases", "2", "-s", "/a", "true"}, nil, "excludes"},
		{[]string{"run", "-n", "-w", "1s", "/a", "true"}, nil, "exclude each other"},
		{[]string{"run", "-w", "0", "/a", "true"}, nil, "must be positive"},
		{[]string{"run", "-w", "soon", "/a", "true"}, nil, "want a duration"},
		{[]string{"run", "-w", "1e300", "/a", "true"}, nil, `"1e300" for flag -w: out of range`},
		{[]string{"run", "-w", "inf", "/a", "true"}, nil, `"inf" for flag -w: out of range`},
		{[]string{"run", "-w", "NaN", "/a", "true"}, nil, `"NaN" for flag -w: out of range`},
		{[]string{"run", "-w", "1e10", "/a", "true"}, nil, `"1e10" for flag -w: out of range`},
		{[]string{"run", "-w", "-inf", "/a", "true"}, nil, `"-inf" for flag -w: out of range`},
		{[]string{"run", "-w", "3000000h", "/a", "true"}, nil, `"3000000h" for flag -w: out of range`},
		{[]string{"run", "--kill-after", "1e300", "/a", "true"}, nil, "out of range"},
		{[]string{"run", "--session-timeout", "inf", "/a", "true"}, nil, "out of range"},
		{[]string{"ls", "--session-timeout", "1e10", "/a"}, nil, "out of range"},
		{[]string{"run", "--acl", "everyone", "/a", "true"}, nil, "--acl everyone: want read, private or open"},
		{[]string{"run", "--acl", "read", "/a", "true"}, nil, "--acl read needs credentials"},
		{[]string{"run", "/a", "true"}, map[string]string{"ZKLOCK_SERVERS": "127.0.0.1:1", "ZKLOCK_ACL": "private"}, "ZKLOCK_ACL private needs credentials"},
		{[]string{"run", "--tls-ca", "/nonexistent/ca.pem", "/a", "true"}, nil, "TLS CA"},
		{[]string{"run", "--tls-ca", "usage_test.go", "/a", "true"}, nil, "no PEM certificate"},
		{[]string{"run", "--tls-key", "k.pem", "/a", "true"}, nil, "needs both --tls-cert and --tls-key"},
		{[]string{"run", "-E", "300", "/a", "true"}, nil, "0 to 255"},
		{[]string{"run", "-z", "/a", "true"}, nil, "unknown flag -z"},
		{[]string{"run", "--session-timeout", "-1s", "/a", "true"}, nil, "must be positive"},
		{[]string{"run", "--zk", "a:1,,b:2", "/a", "true"}, nil, "empty server"},
		{[]string{"run", "--zk", "zk1", "/a", "true"}, nil, "host:port"},
		{[]string{"run", "/a", "true"}, map[string]string{"ZKLOCK_AUTH": "nocolon"}, "ZKLOCK_AUTH"},
		{[]string{"run", "/a", "true"}, map[string]string{"ZKLOCK_AUTH": "user:"}, `ZKLOCK_AUTH: empty password for user "user"`},
		{[]string{"run", "/a", "true"}, map[string]string{"ZKLOCK_SERVERS": ""}, "ZKLOCK_SERVERS is set but empty"},
		{[]string{"ls", "/a"}, map[string]string{"ZKLOCK_SERVERS": " "}, "ZKLOCK_SERVERS is set but empty"},
		{[]string{"elect", "--id", "", "/a", "true"}, nil, "--id"},
		{[]string{"elect", "-n", "/a", "true"}, nil, "unknown flag -n"},
		{[]string{"leader", "/a", "/b"}, nil, "unexpected argument"},
		{[]string{"ls"}, nil, "missing PATH"},
		{[]string{"ls", "--leases", "0", "/a"}, nil, "--leases 0"},
		{[]string{"rm", "/a"}, nil, "missing NODE"},
		{[]string{"rm", "/a", "b/c"}, nil, "NODE"},
	} {
		e := env
		if c.env != nil {
			e = c.env
		}
		code, _, stderr := runMain(c.args, e)
		if code != exitUsage || !strings.Contains(stderr, c.msg) || !strings.Contains(stderr, "usage: zklock") {
			t.Errorf("zklock %q: exit %d, stderr %q; want %d, %q and the usage", c.args, code, stderr, exitUsage, c.msg)
		}
		if n := strings.Count(stderr, "\n"); n > 3 {
			t.Errorf("zklock %q: %d lines on stderr, want an error and the usage line:\n%s", c.args, n, stderr)
		}
	}
}

// TestHelpMatchesManual checks that every help text is in docs/cli.md
// word for word, and that the help flags print it.
func TestHelpMatchesManual(t *testing.T) {
	manual, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"--help"}, mainHelp},
		{[]string{"-h"}, mainHelp},
		{[]string{"run", "--help"}, runHelp},
		{[]string{"run", "-h"}, runHelp},
		{[]string{"elect", "--help"}, electHelp},
		{[]string{"leader", "--help"}, leaderHelp},
		{[]string{"ls", "--help"}, lsHelp},
		{[]string{"rm", "--help"}, rmHelp},
	} {
		code, stdout, _ := runMain(c.args, nil)
		if code != 0 || stdout != c.help {
			t.Errorf("zklock %q: exit %d, printed\n%s", c.args, code, stdout)
		}
		if !bytes.Contains(manual, []byte("```\n"+c.help+"```")) {
			t.Errorf("docs/cli.md lacks the help of %q, or it differs:\n%s", c.args, c.help)
		}
	}
	code, stdout, _ := runMain([]string{"--version"}, nil)
	if code != 0 || !strings.HasPrefix(stdout, "zklock ") {
		t.Errorf("--version: exit %d, %q", code, stdout)
	}
}

// TestQueueDriver checks the holder marks of ls on mixed queues, without
// a server.
func TestQueueDriver(t *testing.T) {
	for _, c := range []struct {
		name   string
		leases int
		nodes  []string
		held   []string // "y", "n", or "?" (unknown)
	}{
		{"mutex", 0, []string{"_c_a-lock-0000000001", "_c_b-lock-0000000002"}, []string{"y", "n"}},
		{"rwlock", 0, []string{"read-0000000001", "read-0000000002", "write-0000000003", "read-0000000004"}, []string{"y", "y", "n", "n"}},
		{"curator rwlock", 0, []string{"_c_a-__WRIT__0000000001", "_c_b-__READ__0000000002"}, []string{"y", "n"}},
		{"semaphore", 2, []string{"lease-0000000001", "lease-0000000002", "lease-0000000003"}, []string{"y", "y", "n"}},
		{"semaphore, leases unknown", 0, []string{"lease-0000000001"}, []string{"?"}},
		{"latch", 0, []string{"_c_a-latch-0000000004", "_c_b-latch-0000000007"}, []string{"y", "n"}},
		{"kinds apart", 0, []string{"lock-0000000001", "read-0000000002", "latch-0000000003"}, []string{"y", "y", "y"}},
	} {
		d := queueDriver(c.leases)
		for i, n := range c.nodes {
			dec, err := d.Decide(c.nodes, n)
			got := "n"
			switch {
			case err != nil:
				got = "?"
			case dec.Held:
				got = "y"
			}
			if got != c.held[i] {
				t.Errorf("%s: node %s: %s, want %s (err %v)", c.name, n, got, c.held[i], err)
			}
			// At its index, on a fresh driver and on this one (whose
			// families are those of this listing by now): the same.
			for _, d := range []driver.Driver{queueDriver(c.leases), d} {
				at, errAt := driver.DecideAt(d, c.nodes, i)
				if !reflect.DeepEqual(at, dec) || (errAt == nil) != (err == nil) {
					t.Errorf("%s: node %s: DecideAt %+v, %v; Decide %+v, %v", c.name, n, at, errAt, dec, err)
				}
			}
		}
	}
}

// TestQueueDriverListings checks that queueDriver judges each listing by
// its own families when it is asked about several, and that it judges a
// queue of 100,000 nodes, each at its index, in time linear in the queue:
// within a few seconds here (under the race detector too), where filtering the queue for each node would
// take minutes.
func TestQueueDriverListings(t *testing.T) {
	d := queueDriver(1)
	a := []string{"lock-0000000001", "lease-0000000002", "lease-0000000003"}
	b := []string{"lease-0000000001", "lock-0000000002", "lease-0000000003"}
	for _, c := range []struct {
		nodes []string
		i     int
		held  bool
	}{{a, 1, true}, {b, 2, false}, {a, 2, false}, {b, 0, true}, {b, 1, true}} {
		dec, err := driver.DecideAt(d, c.nodes, c.i)
		if err != nil || dec.Held != c.held {
			t.Errorf("%v at %d: %+v, %v; want held %v", c.nodes, c.i, dec, err, c.held)
		}
	}
	const n = 100000
	nodes := make([]string, n)
	for i := range nodes {
		kind := "lock-"
		if i%3 == 1 {
			kind = "write-"
		}
		nodes[i] = fmt.Sprintf("_c_%08d-%s%010d", i, kind, i)
	}
	d = queueDriver(0)
	start := time.Now()
	holders := 0
	for i := range nodes {
		dec, err := driver.DecideAt(d, nodes, i)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if dec.Held {
			holders++
		}
	}
	took := time.Since(start)
	t.Logf("judged %d nodes in %v", n, took)
	// The mutex nodes and the write nodes are apart: the first of each holds.
	if holders != 2 {
		t.Errorf("%d holders, want 2", holders)
	}
	if took > 5*time.Second {
		t.Errorf("judging %d nodes took %v, want within 5s", n, took)
	}
}

// TestParseLeases checks the reading of a semaphore's record of its number
// of leases.
func TestParseLeases(t *testing.T) {
	for data, want := range map[string]int{
		"maxLeases=3":                      3,
		"maxLeases=120":                    120,
		"":                                 0,
		"maxLeases=0":                      0,
		"maxLeases=-2":                     0,
		"maxLeases=03":                     0,
		"maxLeases=3\n":                    0,
		"maxLeases=":                       0,
		"maxleases=3":                      0,
		"web-3:4121":                       0,
		"maxLeases=3x":                     0,
		"maxLeases=+3":                     0,
		"maxLeases= 3":                     0,
		"maxLeases=1e3":                    0,
		"maxLeases=9999999999999999999999": 0,
	} {
		if got := parseLeases([]byte(data)); got != want {
			t.Errorf("parseLeases(%q) = %d, want %d", data, got, want)
		}
	}
}

// TestVersion: what --version says for a module build, a checkout with and
// without uncommitted changes, and a build without VCS information.
func TestVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-05T10:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3 go1.26"},
		{"(devel)", vcs("false"), "(devel) commit " + rev + " (2026-12-05T10:00:00Z) go1.26"},
		{"(devel)", vcs("true"), "(devel) commit " + rev + " (2026-12-05T10:00:00Z) +dirty go1.26"},
		{"v0.0.0-20261205100000-0123456789ab+dirty", vcs("true"), "v0.0.0-20261205100000-0123456789ab+dirty commit " + rev + " (2026-12-05T10:00:00Z) +dirty go1.26"},
		{"", nil, "(devel) go1.26"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: c.version}, Settings: c.settings}
		if got := describeBuild(bi); got != c.want {
			t.Errorf("describeBuild(%q) = %q, want %q", c.version, got, c.want)
		}
	}
	if v := version(); strings.Contains(v, "v0.1.0") {
		t.Errorf("version() = %q", v)
	}
}
