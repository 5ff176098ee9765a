package recipe

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Which directory ACLs a client refuses, and which clients check at all.
func TestForeignGrants(t *testing.T) {
	alice := zk.DigestACL(zk.PermAll, "alice", "secret")
	bob := zk.DigestACL(zk.PermAll, "bob", "secret")
	world := func(p int32) []zk.ACL { return zk.WorldACL(p) }
	join := func(acls ...[]zk.ACL) []zk.ACL { return slices.Concat(acls...) }
	for _, tc := range []struct {
		name   string
		client config
		dir    []zk.ACL
		checks bool
		want   []string
	}{
		{"default client: no check", config{acl: world(zk.PermAll)}, world(zk.PermAll), false, nil},
		{"any directory ACL: no check", config{acl: alice, anyDirACL: true}, world(zk.PermAll), false, nil},
		{"world without admin still checks", config{acl: world(zk.PermCreate | zk.PermDelete | zk.PermRead)}, world(zk.PermAll), true,
			[]string{"world:anyone:cdrwa"}},
		{"own directory", config{acl: alice}, alice, true, nil},
		{"own, world may read", config{acl: alice}, join(alice, world(zk.PermRead)), true, nil},
		{"open directory", config{acl: alice}, world(zk.PermAll), true, []string{"world:anyone:cdrwa"}},
		{"world may create", config{acl: alice}, join(alice, world(zk.PermCreate|zk.PermRead)), true, []string{"world:anyone:cr"}},
		{"another user, named without the hash", config{acl: alice}, join(alice, bob), true, []string{"digest:bob:cdrwa"}},
		{"more than the client has", config{acl: zk.DigestACL(zk.PermRead|zk.PermCreate, "alice", "secret")}, alice, true,
			[]string{"digest:alice:cdrwa"}},
		{"an id with controls is quoted", config{acl: alice}, join(alice, []zk.ACL{{Perms: zk.PermDelete, Scheme: "x509", ID: "CN=\x1b[2J\u202e"}}), true,
			[]string{`x509:"CN=\x1b[2J\u202e":d`}},
		{"world may write", config{acl: alice}, join(alice, world(zk.PermRead|zk.PermWrite)), true, nil},
		{"auth scheme stands for the credentials", config{acl: []zk.ACL{{Perms: zk.PermAll, Scheme: "auth"}}, auth: true,
			authUser: "alice", authPassword: "secret"}, alice, true, nil},
		{"ip grant", config{acl: alice}, join(alice, []zk.ACL{{Perms: zk.PermDelete, Scheme: "ip", ID: "10.0.0.1"}}), true,
			[]string{"ip:10.0.0.1:d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{cfg: tc.client}
			if got := c.checksDirACL(); got != tc.checks {
				t.Fatalf("checksDirACL = %v, want %v", got, tc.checks)
			}
			if !tc.checks {
				return
			}
			if got := c.foreignGrants(tc.dir, guardedPerms); !slices.Equal(got, tc.want) {
				t.Errorf("foreignGrants = %q, want %q", got, tc.want)
			}
			for _, g := range c.foreignGrants(tc.dir, guardedPerms) {
				if strings.Contains(g, bob[0].ID[len("bob:"):]) || strings.Contains(g, alice[0].ID[len("alice:"):]) {
					t.Errorf("foreignGrants names a digest hash: %q", g)
				}
			}
		})
	}
}

// A semaphore's directory (its data holds the number of leases) must not
// be writable by others; other locks' directories may be.
func TestGuardedWrite(t *testing.T) {
	alice := zk.DigestACL(zk.PermAll, "alice", "secret")
	dir := slices.Concat(alice, zk.WorldACL(zk.PermRead|zk.PermWrite))
	c := &Client{cfg: config{acl: alice}}
	for _, tc := range []struct {
		name    string
		dirData []byte
		want    []string
	}{
		{"mutex", nil, nil},
		{"semaphore", []byte("maxLeases=2"), []string{"world:anyone:rw"}},
	} {
		l := &Lock{c: c, lockKind: &lockKind{spec: LockSpec{DirData: tc.dirData}}}
		if got := c.foreignGrants(dir, l.guarded()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: foreignGrants = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDirACLsTable checks the client's table of checked directories: one
// check at a time per directory, reused until its watch fires or a lock
// needs more permissions closed, nothing kept of a check that failed, and
// the entries of directories that went swept as the table grows.
func TestDirACLsTable(t *testing.T) {
	var d dirACLs
	const dir = "/a/lock"
	checked, wait, e := d.begin(dir, guardedPerms)
	if checked || wait != nil || e == nil {
		t.Fatalf("first begin: %v, %v, %v; want to check", checked, wait, e)
	}
	if checked, wait, e2 := d.begin(dir, guardedPerms); checked || wait == nil || e2 != nil {
		t.Fatalf("begin during a check: %v, %v, %v; want to wait", checked, wait, e2)
	}
	gone := make(chan zk.Event, 1)
	d.end(dir, e, true, guardedPerms, gone)
	if checked, _, _ := d.begin(dir, guardedPerms); !checked {
		t.Fatal("begin after a check: not checked")
	}
	// A semaphore's directory needs WRITE closed too: checked again, and
	// that check serves the mutex's permissions as well.
	checked, _, e = d.begin(dir, guardedPerms|zk.PermWrite)
	if checked || e == nil {
		t.Fatal("begin for more permissions: checked")
	}
	gone2 := make(chan zk.Event, 1)
	d.end(dir, e, true, guardedPerms|zk.PermWrite, gone2)
	if checked, _, _ := d.begin(dir, guardedPerms); !checked {
		t.Fatal("begin for fewer permissions: not checked")
	}
	// The directory goes: checked again; a refusal keeps nothing.
	gone2 <- zk.Event{Type: zk.EventNodeDeleted, Path: dir}
	checked, _, e = d.begin(dir, guardedPerms)
	if checked || e == nil {
		t.Fatal("begin after the watch fired: checked")
	}
	d.end(dir, e, false, guardedPerms, nil)
	if len(d.byDir) != 0 {
		t.Fatalf("%d entries after a refused check, want 0", len(d.byDir))
	}
	// Many directories that went: swept once the table doubled.
	for i := range 1000 {
		name := fmt.Sprintf("/d%d", i)
		_, _, e := d.begin(name, guardedPerms)
		ch := make(chan zk.Event, 1)
		d.end(name, e, true, guardedPerms, ch)
		if i%10 != 0 {
			ch <- zk.Event{Type: zk.EventNodeDeleted, Path: name}
		}
	}
	if n := len(d.byDir); n > 300 {
		t.Errorf("%d entries for 100 directories still there, want the others swept", n)
	}
}
