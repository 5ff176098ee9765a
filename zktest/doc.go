// Package zktest starts real Apache ZooKeeper servers for zkrecipes'
// tests: standalone servers, multi-server ensembles, and a fault-injecting
// TCP proxy to put between a client and a server.
//
// There are no mocks or in-process fakes here. The recipes' correctness
// rests on ZooKeeper's exact semantics (sequential node ordering, session
// expiry, ephemeral and container node clean-up, watch delivery, leader
// fail-over), so the tests run against the same server that production
// uses, and fail when ZooKeeper disagrees with them.
//
// Each server is a JVM started by scripts/zk.sh run (the repository's one
// way of running ZooKeeper; scripts/zk.sh install installs Debian's
// zookeeper package). It listens on a free port of 127.0.0.1 only, keeps
// its config, data and log in a temporary directory, and is tuned for
// tests: short ticks, forceSync=no unless asked for, 1s minimum session
// timeout, container and TTL node checks every second, and TTL nodes
// enabled. On Linux a server is killed if the test process dies.
//
// A test package usually runs every test against one shared server:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestLock(t *testing.T) {
//		srv := zktest.Shared(t)
//		conn := zktest.Connect(t, srv.Addr())
//		path := zktest.UniquePath(t)
//		...
//	}
//
// Tests that stop, kill or restart servers start their own with
// StartServer or StartEnsemble. Proxy loses the reply to, or drops, the
// n-th request of chosen kinds (Arm) or every n-th create
// (CutAfterCreates), records the requests it sees (Record), partitions
// the network one way or both (Partition, Blackhole) and drops connections
// (DropAll), to test how recipes recover from connection loss.
//
// Options.TLS starts a server that also serves TLS clients on its
// SecureAddr, with a certificate made in the test by NewCA and CA.Issue
// (and, with Options.TLSClientCA, requires client certificates).
//
// Under go test -short, Shared skips the test. When ZooKeeper is not
// installed, Shared fails the test with a message telling how to install
// it, so a missing server never passes silently. The script is found next
// to this package's source, or at $ZKRECIPES_ZK_SH.
package zktest
