package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) {
	code := zktest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestParseArgs(t *testing.T) {
	base := []string{"-zk", "127.0.0.1:1", "-path", "/x", "-scenario", "mutex"}
	ok, err := parseArgs(append(base, "-sessions", "8", "-leases", "2", "-reads", "0.5",
		"-session-timeout-ms", "3000", "-stall-ms", "700", "-warmup-ms", "0", "-duration-ms", "250"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := options{zk: "127.0.0.1:1", path: "/x", scenario: "mutex", sessions: 8, leases: 2, reads: 0.5,
		sessionTimeout: 3 * time.Second, stall: 700 * time.Millisecond, duration: 250 * time.Millisecond,
		connectTimeout: connectTimeout}
	if ok != want {
		t.Errorf("parseArgs = %+v, want %+v", ok, want)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no server", []string{"-path", "/x", "-scenario", "mutex"}, "-zk"},
		{"relative path", []string{"-zk", "h:1", "-path", "x", "-scenario", "mutex"}, "-path"},
		{"scenario it does not run", append(base[:4:4], "-scenario", "leader-resign"), "-scenario"},
		{"no sessions", append(base, "-sessions", "0"), "-sessions"},
		{"too many sessions", append(base, "-sessions", "100000"), "-sessions"},
		{"no leases", append(base, "-leases", "0"), "-leases"},
		{"reads above 1", append(base, "-reads", "1.5"), "-reads"},
		{"reads NaN", append(base, "-reads", "NaN"), "-reads"},
		{"no stall", append(base, "-stall-ms", "0"), "-stall-ms"},
		{"no duration", append(base, "-duration-ms", "0"), "-duration-ms"},
		{"negative warm-up", append(base, "-warmup-ms", "-1"), "-warmup-ms"},
		{"unknown flag", append(base, "-handoffs", "3"), "handoffs"},
		{"stray argument", append(base, "extra"), "unexpected"},
	} {
		if _, err := parseArgs(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.name, err, tc.want)
		}
	}
}

// runner is the runner's side of the protocol, on pipes.
type runner struct {
	stdin  io.WriteCloser
	out    *bufio.Scanner
	result chan [2]any // run's code and closed
}

func startPeer(t *testing.T, o options) *runner {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &runner{stdin: inW, out: bufio.NewScanner(outR), result: make(chan [2]any, 1)}
	go func() {
		code, closed := run(o, inR, outW, io.Discard)
		_ = outW.Close()
		r.result <- [2]any{code, closed}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
	})
	return r
}

func (r *runner) line(t *testing.T) string {
	t.Helper()
	if !r.out.Scan() {
		t.Fatalf("peer's output ended: %v", r.out.Err())
	}
	return r.out.Text()
}

func (r *runner) exit(t *testing.T) (int, bool) {
	t.Helper()
	select {
	case res := <-r.result:
		return res[0].(int), res[1].(bool)
	case <-time.After(30 * time.Second):
		t.Fatal("peer did not exit")
		return 0, false
	}
}

// TestProtocol runs each scenario through the whole protocol against a
// real server: ready, go, one result line, EOF, exit with the sessions
// closed and nothing left under the path.
func TestProtocol(t *testing.T) {
	srv := zktest.Shared(t)
	for _, tc := range []struct {
		scenario string
		sessions int
	}{
		{"mutex", 1},
		{"mutex", 3},
		{"semaphore", 4},
		{"rwlock", 3},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.scenario, tc.sessions), func(t *testing.T) {
			path := zktest.UniquePath(t) + "/lock"
			r := startPeer(t, options{zk: srv.Addr(), path: path, scenario: tc.scenario, sessions: tc.sessions,
				leases: 2, reads: 0.9, sessionTimeout: 10 * time.Second, stall: 5 * time.Second,
				warmup: 100 * time.Millisecond, duration: 300 * time.Millisecond})
			if l := r.line(t); l != "ready" {
				t.Fatalf("first line %q, want ready", l)
			}
			if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			var out output
			if err := json.Unmarshal([]byte(r.line(t)), &out); err != nil {
				t.Fatal(err)
			}
			if out.Status != "ok" || out.Errors != 0 || out.Completed == 0 || int64(len(out.LatNs)) != out.Completed {
				t.Fatalf("result %+v: want ok, no errors, completed cycles each with a latency", out)
			}
			if el := time.Duration(out.ElapsedNs); el < 300*time.Millisecond || el > 5*time.Second {
				t.Errorf("elapsed %v, want about the 300ms measured", el)
			}
			for _, l := range out.LatNs {
				if l <= 0 || time.Duration(l) > time.Duration(out.ElapsedNs)+5*time.Second {
					t.Fatalf("latency %v out of range", time.Duration(l))
				}
			}
			_ = r.stdin.Close()
			if code, closed := r.exit(t); code != 0 || !closed {
				t.Fatalf("exit %d, closed %v; want 0, true", code, closed)
			}
			names, _, err := zktest.Connect(t, srv.Addr()).Children(path)
			if err == nil {
				for _, n := range names {
					if strings.HasPrefix(n, "_c_") {
						t.Errorf("node %q left after the peer closed its sessions", n)
					}
				}
			}
		})
	}
}

// TestProtocolNoGo: a runner that closes stdin instead of saying "go" gets
// an error result, and the peer exits with its sessions closed.
func TestProtocolNoGo(t *testing.T) {
	srv := zktest.Shared(t)
	r := startPeer(t, options{zk: srv.Addr(), path: zktest.UniquePath(t) + "/lock", scenario: "mutex", sessions: 2,
		leases: 1, sessionTimeout: 10 * time.Second, stall: 5 * time.Second, duration: time.Second})
	if l := r.line(t); l != "ready" {
		t.Fatalf("first line %q, want ready", l)
	}
	_ = r.stdin.Close()
	var out output
	if err := json.Unmarshal([]byte(r.line(t)), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "error" || !strings.Contains(out.Error, `"go"`) {
		t.Errorf("result %+v, want an error about the missing go", out)
	}
	if _, closed := r.exit(t); !closed {
		t.Error("sessions not closed")
	}
}

// TestProtocolNoServer: a peer that cannot connect says so on stderr and
// exits 1 before ready.
func TestProtocolNoServer(t *testing.T) {
	o := options{zk: "127.0.0.1:1", path: "/x", scenario: "mutex", sessions: 1, leases: 1,
		sessionTimeout: 2 * time.Second, stall: time.Second, duration: time.Second,
		connectTimeout: 500 * time.Millisecond}
	var stderr strings.Builder
	code, _ := run(o, strings.NewReader(""), io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "connect") {
		t.Errorf("code %d, stderr %q; want 1 and the connect error", code, stderr.String())
	}
}
