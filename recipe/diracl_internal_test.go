package recipe

import (
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
		l := &Lock{c: c, spec: LockSpec{DirData: tc.dirData}}
		if got := c.foreignGrants(dir, l.guarded()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: foreignGrants = %q, want %q", tc.name, got, tc.want)
		}
	}
}
