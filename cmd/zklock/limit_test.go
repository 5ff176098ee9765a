package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLsLimit checks that ls ends at its limit, with an error that says
// so, when the queue is too long to read within it: here 5,000 nodes (a
// read each) against a limit of 100ms. The same queue is read in full
// under the default limit.
func TestLsLimit(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	const n = 5000
	for i := 1; i <= len(path); i++ { // containers, which the server reaps
		if i == len(path) || path[i] == '/' {
			_, err := raw.CreateContainer(path[:i], nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
	}
	for made := 0; made < n; made += 1000 {
		ops := make([]any, 1000)
		for i := range ops {
			ops[i] = &zk.CreateRequest{Path: path + "/_c_00000000-0000-0000-0000-000000000000-lock-", Data: []byte("x"),
				Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral | zk.FlagSequence}
		}
		if _, err := raw.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	ls := func(limit time.Duration) (time.Duration, string, error) {
		cmd := newLsCommand()
		rest, _, err := cmd.parse([]string{"--zk", srv.Addr(), path})
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		start := time.Now()
		err = cmd.run(&proc{stdout: &out, stderr: &errOut, getenv: func(string) (string, bool) { return "", false },
			queueLimit: limit}, rest)
		return time.Since(start), out.String(), err
	}

	const limit = 100 * time.Millisecond
	took, out, err := ls(limit)
	t.Logf("ls of %d nodes with a limit of %v: %v after %v", n, limit, err, took.Round(time.Millisecond))
	var ee *exitError
	switch {
	case err == nil:
		t.Fatalf("ls of %d nodes within %v: no error (printed %d bytes)", n, limit, len(out))
	case !errors.As(err, &ee) || ee.code != exitFailure:
		t.Fatalf("ls: %v, want exit status %d", err, exitFailure)
	case !strings.Contains(ee.msg, "not done within 100ms, the limit of ls"):
		t.Errorf("ls: %q, want it to name the limit", ee.msg)
	case out != "":
		t.Errorf("ls printed %q past its limit", out)
	}
	// Connecting comes first and is not counted against the limit.
	if took > limit+2*time.Second {
		t.Errorf("ls ended %v after its start, want within its limit (%v) and the connect", took, limit)
	}

	took, out, err = ls(0)
	if err != nil {
		t.Fatalf("ls under the default limit: %v", err)
	}
	if lines := strings.Count(out, "\n"); lines != n+1 {
		t.Errorf("ls printed %d lines, want %d and a header", lines, n)
	}
	t.Logf("ls of %d nodes under the default limit: %v", n, took.Round(time.Millisecond))
}
