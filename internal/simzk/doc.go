// Package simzk is an in-memory model of ZooKeeper, as a go-zookeeper
// client sees it, for deterministic simulation of the lock engine under
// virtual time (testing/synctest). It does no I/O: the server is a tree
// behind a mutex, each client a goroutine, and time is whatever time.Now
// says, so inside a synctest bubble a session timeout costs nothing.
//
// A World is one ensemble: the tree, the zxid counter, the sessions.
// World.Connect makes a client, a Conn, with the methods of go-zookeeper's
// *zk.Conn that the engine uses, their signatures, results and errors;
// the faults (lost replies, dropped requests, broken connections,
// partitions, slow replies, session expiry) are applied from outside, by
// the simulation driver, and OnReply and OnWritten show what the engine's
// wire tap would see. The World's only internal choices (session ids, the
// order of children listings) come from its seed.
//
// Every goroutine the World starts (a session clock, one loop per Conn)
// blocks only on channels and timers of its own, and ends when the World
// is closed: create the World inside the bubble and Close it before the
// bubble's function returns. A live session pings, as go-zookeeper's do,
// so a bubble with a connected client always has a timer pending: a test
// that waits for something that never comes runs virtual time on rather
// than deadlocking, and needs a bound of its own.
//
// # What is modelled
//
// The server side follows ZooKeeper 3.8 (checked against a real server by
// the agreement tests in this package):
//
//   - Every write takes a zxid, failed ones too; sessions take one to
//     start and one to end (the ephemeral nodes of a session go in that
//     one transaction).
//   - A sequential node's suffix is ten digits of the parent's count of
//     child creates. The cversion reported in a Stat is creates plus
//     deletes (ZooKeeper stores the first and reports 2*creates -
//     children), so after a delete it is not the next suffix.
//   - Errors and their order: zk.ErrInvalidACL for an empty ACL,
//     zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoChildrenForEphemerals,
//     zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrBadArguments for the root
//     and /zookeeper; the client's own checks of paths and flags.
//   - Multi: all or none; a failure answers as go-zookeeper returns it.
//     A container create inside a multi is applied but answered with
//     zk.ErrAPIError (go-zookeeper cannot read the result), TTL flags
//     with "unknown error: -5", as the real pair do.
//   - Containers: deleted, in a transaction of their own, as soon as
//     their last child goes once they have had one (ZooKeeper's
//     container manager does it on its next check, up to a minute later).
//   - Watches: one-shot, per connection on the server, as ZooKeeper's
//     WatchManager triggers them (a data watch on set, delete, and
//     create for an exists watch; a child watch on a child's create or
//     delete and on the node's delete; a connection watching both the
//     data and the children of a deleted node is told once). A client's
//     messages (replies, watch events) reach it in the order the server
//     sent them, so a watch event comes before the reply to any request
//     sent after the change.
//   - Sessions: the server expires one it has not heard from (requests,
//     pings) for the session timeout; World.Expire expires one now.
//
// The client side follows go-zookeeper v1.0.4 with the engine's host
// provider (which never makes go-zookeeper wait a second between rounds
// or fail queued requests with zk.ErrNoServer):
//
//   - Session events: StateConnecting, StateConnected, StateHasSession
//     on connecting; StateDisconnected when a connection is lost, then
//     StateConnecting at once. On reconnecting to an expired session:
//     StateConnected, StateExpired, EventNotWatching (Err
//     zk.ErrSessionExpired) to every watcher and to onEvent,
//     StateDisconnected, then a new session. onEvent also gets the watch
//     events, as go-zookeeper's event callback does.
//   - Calls written and not answered fail with zk.ErrConnectionClosed
//     when the connection is lost; calls made while disconnected wait
//     and are written on the next connection, whichever session it has.
//   - Watches survive reconnects to the same session: the client sets
//     them again, relative to the last zxid it read, and the server fires
//     at once those whose node changed meanwhile. As in go-zookeeper, the
//     calls that waited for the connection are written before SetWatches,
//     so their replies can come before the events of changes made while
//     disconnected (go-zookeeper also races SetWatches, sent from a
//     goroutine, against calls made just after StateHasSession; here
//     only calls made from another goroutine while the loop is sending
//     the session events can pass it).
//   - Pings every third of the session timeout; the client gives the
//     connection up after 2/3 of it without a message from the server.
//
// # What is left out
//
//   - ACLs beyond "any non-empty list is fine": no permission is checked,
//     AddAuth checks no credentials (schemes digest and ip are known),
//     GetACL and SetACL are not there.
//   - Quotas, TTL nodes, Sync, Reconfig, the read-only mode, observers,
//     persistent and recursive watches (3.6's addWatch), removeWatches.
//   - A multi-server ensemble: one server, always up, that never loses
//     what it acknowledged; no leader election, no lagging follower
//     serving stale reads, no session moving between servers.
//   - Session timeout negotiation (the server grants what the client
//     asks) and the rounding of expiry to ZooKeeper's ticks.
//   - Real networks: a connection attempt takes ReconnectDelay, fails
//     after ConnectTimeout during a partition; requests written into a
//     connection the client gives up on are lost; data and path sizes
//     are not limited (jute.maxbuffer).
//   - go-zookeeper's event channel, its logger, and its quirks around
//     Close racing calls (here every call unanswered at Close fails with
//     zk.ErrConnectionClosed); Close while disconnected waits CloseWait,
//     as go-zookeeper does, and leaves the session to expire.
package simzk
