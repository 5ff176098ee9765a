package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestPersistentNode: a persistent node with a lock name, made by hand,
// is marked by ls (SESSION "persistent", "persistent": true in JSON), and
// a run behind it fails at once with status 65 naming it, instead of
// waiting for a release that never comes.
func TestPersistentNode(t *testing.T) {
	srv := zktest.Shared(t)
	b := binary{path: buildZklock(t, t.TempDir()), servers: srv.Addr()}
	conn := zktest.Connect(t, srv.Addr())
	path := zktest.UniquePath(t)
	mkdir(t, conn, path)
	if _, err := conn.Create(path+"/lock-0000000000", []byte("by hand"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	r := b.run(t, "ls", path)
	wantCode(t, r, 0)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(rows) != 2 || !strings.Contains(rows[1], "persistent") || !strings.Contains(rows[1], "lock-0000000000") {
		t.Errorf("ls:\n%s", r.stdout)
	}
	r = b.run(t, "ls", "--json", path)
	wantCode(t, r, 0)
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Participants) != 1 || !l.Participants[0].Persistent {
		t.Errorf("ls --json:\n%s", r.stdout)
	}
	r = b.run(t, "run", "-w", "20s", path, "true")
	wantCode(t, r, exitMismatch)
	if !strings.Contains(r.stderr, path+"/lock-0000000000 is a persistent node") || r.took > 5*time.Second {
		t.Errorf("run behind a persistent node: after %v, stderr %q", r.took, r.stderr)
	}
}
