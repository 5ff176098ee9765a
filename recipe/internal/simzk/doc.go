// Package simzk is a model ZooKeeper server that speaks the client
// protocol over in-memory connections, for deterministic simulation of
// the recipes under virtual time (testing/synctest). The client under
// test is the one users run: go-zookeeper dials the model through a
// Host's Dial (a zk.Dialer), with HostProvider, which resolves nothing,
// or with the recipe client's own provider. Network and server are
// simulated; the client is not.
//
// A World is the server (every address a client dials reaches it): the
// tree, the zxid counter, the sessions, and one goroutine per connection that reads the connection's requests in
// order, applies each and writes its reply. A Host is a client's machine
// and its link to the server. Connections are built on channels and
// timers only, so every goroutine waiting on one is durably blocked in a
// bubble and virtual time moves on; a write never blocks (the model takes
// TCP's buffers to be large enough) and arrives after the link's delay.
// The World's only internal choices (session ids and passwords, the order
// of children listings) come from its seed.
//
// Create the World inside the bubble that uses it; close every client,
// then the World, before the bubble's function returns (go-zookeeper
// reconnects until it is closed).
//
// # Faults
//
// The faults are those of a TCP link and of a server, applied from
// outside by the simulation driver:
//
//   - Host.DieAfterApply: the connection dies once the server has applied
//     the next request (of an opcode, or any), before the reply;
//     Host.DieBeforeRead: it dies as the request arrives. A connection
//     that dies is reset: both ends fail at once and what was in flight
//     is lost.
//   - Host.Drop: every connection of the host is reset.
//   - Host.Partition: both ways or one way, for a time. Bytes are held
//     up, not lost (TCP retransmits them once the partition heals, if
//     neither end gave up); a dial waits for the end of a partition or
//     times out.
//   - Host.Slow: a delay on every frame, one way, for a time.
//   - Host.Pieces: every write arrives in pieces a little apart.
//   - World.Expire: the server expires a session now and closes its
//     connection; the client learns of the expiry when it reconnects.
//   - World.Restart: the server is down for a time with its state kept:
//     every connection is reset, dials are refused, and the sessions get
//     their whole timeout again once it is back.
//   - World.Lag: the server at an address is a follower behind the
//     others for a time: a client that reconnects to it having seen a
//     later zxid is refused, and must find another server.
//
// # What is modelled
//
// The server follows ZooKeeper 3.8 (checked against a real server, with
// the same go-zookeeper client on both, by the agreement tests of this
// package):
//
//   - The protocol: the connect request and response (a new session, a
//     resumed one, or session id 0 for one that has ended or a wrong
//     password, after which the server closes the connection; a client
//     that has seen a later zxid than the server's is refused), ping,
//     close, create, create2, createContainer, delete, exists, getData,
//     setData, getChildren, getChildren2, check, multi, setWatches and
//     setAuth, and watch events (xid -1). Frames are encoded by
//     recipe/internal/jute. A request that does not parse closes the
//     connection.
//   - Every write takes a zxid, failed ones too; sessions take one to
//     start and one to end (the ephemeral nodes of a session go in that
//     one transaction). Reads and pings are answered with the last zxid,
//     credentials with zxid 0.
//   - A sequential node's suffix is ten digits of the parent's count of
//     child creates. The cversion reported in a Stat is creates plus
//     deletes (ZooKeeper stores the first and reports 2*creates -
//     children), so after a delete it is not the next suffix.
//   - Errors and their order: invalid ACL for an empty ACL, no node, node
//     exists, no children for ephemerals, bad version, not empty, bad
//     arguments for the root, /zookeeper and invalid paths.
//   - Multi: all or none. A failed multi answers an error result for
//     every operation (0 before the one that failed, its code, then
//     runtime inconsistency); a container create inside a multi is
//     applied and answered with a createContainer result (which
//     go-zookeeper v1.0.4 cannot read); TTL flags refuse the whole
//     request with a marshalling error.
//   - Containers: deleted, in a transaction of their own, as soon as
//     their last child goes once they have had one (ZooKeeper's
//     container manager does it on its next check, up to a minute later).
//   - Watches: one-shot, per connection, as ZooKeeper's WatchManager
//     triggers them (a data watch on set, delete, and create for an
//     exists watch; a child watch on a child's create or delete and on
//     the node's delete; a connection watching both the data and the
//     children of a deleted node is told once). A connection's frames
//     leave in the order the server made them, so a watch event comes
//     before the reply to any request read after the change. setWatches
//     fires at once the watches whose node changed after the client's
//     last zxid.
//   - Sessions: the server expires one it has not heard from (requests,
//     pings) for the session timeout; a session moves to the newest
//     connection that resumes it, and the server closes the old one.
//
// # What is left out
//
//   - ACLs beyond "any non-empty list is fine": no permission is checked,
//     setAuth checks no credentials (schemes digest and ip are known,
//     others fail and close the connection), getACL and setACL are not
//     served.
//   - Quotas, TTL nodes, sync, reconfig, the read-only mode, observers,
//     persistent and recursive watches (3.6's addWatch), removeWatches,
//     getEphemerals, getAllChildrenNumber.
//   - Most of an ensemble: every address is served from one tree that
//     never loses what it acknowledged. A lagging follower only refuses
//     the reconnects of clients that have seen more than it applied; it
//     serves no stale read, and there is no leader election, no loss of
//     quorum, and no server that holds a session the others do not know.
//   - Session timeout negotiation (the server grants what the client
//     asks) and the rounding of expiry to ZooKeeper's ticks.
//   - Sizes: jute.maxbuffer is checked on the frames the server reads,
//     not on what it sends; TCP buffers are unbounded, so a writer never
//     blocks on a peer that does not read.
//   - The process: a paused client is a partition plus what its driver
//     does; the client's own timers keep running.
package simzk
