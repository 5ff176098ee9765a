package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestLsKazoo: zklock sees the nodes of kazoo's Lock ("<hex>__lock__<seq>",
// made here by hand with kazoo's names): ls lists them in the mutex's
// queue with their data, run -n finds the lock taken, and run refuses a
// path with a node of kazoo's read lock ("__rlock__").
func TestLsKazoo(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	conn := zktest.Connect(t, srv.Addr())
	kazoo := func(dir, lockName, data string) string {
		t.Helper()
		p, err := conn.Create(dir+"/"+strings.ReplaceAll(uuid.NewString(), "-", "")+lockName, []byte(data),
			zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		return p[len(dir)+1:]
	}

	path := zktest.UniquePath(t)
	mkdir(t, conn, path)
	first := kazoo(path, "__lock__", "kazoo-a")
	r := b.run(t, "run", "-n", path, "true")
	wantCode(t, r, exitConflict)

	m, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path, mutex.WithData([]byte("go-b")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx(t)) }()
	waitChildren(t, conn, path, 2)
	last := kazoo(path, "__lock__", "kazoo-c")

	r = b.run(t, "ls", "--json", path)
	wantCode(t, r, 0)
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, e := range l.Participants {
		held := "?"
		if e.Holder != nil {
			held = fmt.Sprint(*e.Holder)
		}
		got = append(got, fmt.Sprintf("%s %s %s", e.Kind, held, e.Data))
	}
	want := []string{"mutex true kazoo-a", "mutex false go-b", "mutex false kazoo-c"}
	if strings.Join(got, "|") != strings.Join(want, "|") || l.Participants[0].Node != first || l.Participants[2].Node != last {
		t.Fatalf("ls --json lists %q, want %q (%s first, %s last):\n%s", got, want, first, last, r.stdout)
	}
	r = b.run(t, "ls", path)
	wantCode(t, r, 0)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(rows) != 4 || !strings.Contains(rows[1], first) || !strings.Contains(rows[1], "holds") {
		t.Errorf("ls:\n%s", r.stdout)
	}

	// kazoo's holder leaves: our mutex holds, the later kazoo node waits.
	if err := conn.Delete(path+"/"+first, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mutex still waits after kazoo's holder left")
	}
	defer func() { _ = m.Unlock(ctx(t)) }()

	// A kazoo read lock's node: zklock cannot order it and refuses.
	rpath := zktest.UniquePath(t)
	mkdir(t, conn, rpath)
	rlock := kazoo(rpath, "__rlock__", "kazoo-r")
	r = b.run(t, "run", rpath, "true")
	wantCode(t, r, exitMismatch)
	if !strings.Contains(r.stderr, rlock) {
		t.Errorf("run next to %s: stderr %q does not name it", rlock, r.stderr)
	}
}
