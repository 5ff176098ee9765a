// Package zktest runs real Apache ZooKeeper servers for tests, and puts
// real faults between them and the code under test: network partitions
// (both ways or one way), dropped connections, lost replies, session
// expiry on demand, frozen and killed servers, and ensembles that lose
// their leader.
//
// It is the kit zkrecipes tests itself with, made for the tests of code
// that uses zkrecipes (or any ZooKeeper client): there are no mocks here.
// Locks rest on ZooKeeper's exact semantics (sequential node order,
// session expiry, ephemeral and container node clean-up, watch delivery,
// leader fail-over), so a test is only as good as the server it runs
// against.
//
// # Servers
//
// Start starts a standalone server for one test on a free port of
// 127.0.0.1 and stops it when the test ends; StartEnsemble starts an
// ensemble whose members can be killed (Ensemble.Kill), restarted
// (Ensemble.Restart) or frozen (Server.Freeze). A server takes about a
// second to start, so a package of tests usually shares one server, each
// test under a path of its own:
//
//	func TestMain(m *testing.M) { zktest.Main(m) }
//
//	func TestOrders(t *testing.T) {
//		srv := zktest.Shared(t)
//		client := zktest.Client(t, srv.Addr())
//		path := zktest.UniquePath(t) // "/zktest/TestOrders-<random>"
//		...
//	}
//
// # Faults
//
// Server.Proxy puts a TCP proxy between a client and the server. Clients
// that connect to its Addr can be cut off (Proxy.Partition, then
// Proxy.Heal), cut off in one direction only (Proxy.PartitionOneWay),
// disconnected (Proxy.DropAll), made to lose the reply to a request the
// server applied (Proxy.LoseNextReply) or to lose a request
// (Proxy.DropNextRequest), and have their sessions expired at once, as
// the server would after a long partition (Proxy.ExpireSessions).
//
// # Faults between the members of an ensemble
//
// The members of an Ensemble reach each other through byte-level proxies
// of the kit (NewByteProxy), one per direction and port, so the network
// between them can be cut too: Ensemble.Partition between chosen groups of
// members, Ensemble.PartitionOneWay for the messages one group sends
// another, Ensemble.Isolate for one member, Ensemble.Heal to end them.
// Ensemble.Freeze stops a chosen member with SIGSTOP (Ensemble.Thaw), and
// Ensemble.MemberClient connects a client to one chosen member only, as a
// client next to a minority of the ensemble would be.
//
// # Where ZooKeeper comes from
//
// The kit runs java itself, from WithClassPath, else ZOOKEEPER_HOME (an
// unpacked Apache release), else Debian's zookeeper package (apt-get
// install zookeeper). It writes only in temporary directories, so it works
// from the read-only module cache. With ZKTEST_ADDR=host:port, Start and
// Shared use that running server instead (for machines without Java;
// faults then come from the proxy alone). When nothing is found, tests
// are skipped with a message saying what to install; with
// ZKTEST_REQUIRED=1 they fail instead, so CI cannot pass by skipping.
// Under go test -short, the tests that need a server are skipped.
//
// On Linux a server is killed if the test process dies.
package zktest
