package recipe

import (
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Which directory ACLs a client refuses, and which clients check at all.
func TestForeignGrants(t *testing.T) {
	alice := zk.DigestACL(zk.PermAll, "alice", "secret")
	bob := zk.DigestACL(zk.PermAll, "bob", "secret")
	aliceID := alice[0].ID
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
		{"another user", config{acl: alice}, join(alice, bob), true, []string{"digest:" + bob[0].ID + ":cdrwa"}},
		{"more than the client has", config{acl: zk.DigestACL(zk.PermRead|zk.PermCreate, "alice", "secret")}, alice, true,
			[]string{"digest:" + aliceID + ":cdrwa"}},
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
			if got := c.foreignGrants(tc.dir); !slices.Equal(got, tc.want) {
				t.Errorf("foreignGrants = %q, want %q", got, tc.want)
			}
		})
	}
}
