// Package semaphore is a distributed counting semaphore on ZooKeeper: at
// most maxLeases holders at once, across every process that uses the same
// path, granted first come, first served.
//
//	s, err := semaphore.New(client, "/pools/db-connections", 3)
//	if err != nil { ... }
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	lease, err := s.Acquire(ctx) // errors.Is(err, context.DeadlineExceeded)
//	if err != nil { ... }
//	defer lease.Release(context.Background())
//	write(lease.Token(), ...)     // fencing token for downstream stores
//
// # Layout
//
// Every lease or waiter is one EPHEMERAL_SEQUENTIAL node
// _c_<uuid>-lease-<sequence> under the path, a CONTAINER node that records
// the number of leases ("maxLeases=3") when it is created. A node holds a
// lease when fewer than maxLeases nodes are ahead of it in sequence order.
// Every acquire checks the recorded number in the same round trip as its
// first listing of the queue, before it decides anything, so a client
// configured with another number fails with [ErrMaxLeasesMismatch] (and
// deletes its node) instead of breaking the bound. (A path that exists
// without a record, made by hand or by another tool, is accepted as it is:
// then nothing checks that clients agree.) The layout is not that
// of Curator's InterProcessSemaphoreV2; do not mix the two on one path.
//
// # Guarantees
//
//   - Bounded: at most maxLeases leases are held at once on a path, as long
//     as sessions are live (see below).
//   - Fairness: leases are granted in the order the contenders queued;
//     a waiter is never overtaken by one that queued after it.
//   - Liveness: whenever any lease is released, the first waiter is told
//     and takes it. A waiter at queue position i >= maxLeases watches its
//     maxLeases immediate predecessors. The obvious rule, watching only the
//     node maxLeases places ahead (the one whose deletion would make the
//     waiter's position exactly maxLeases-1), is not live: with two leases
//     held by A and B, in that order, and C waiting on A, B's release frees
//     a lease that nobody notices, and it stays idle until A also leaves.
//     With the predecessors rule, a waiter at position i holds once
//     i - maxLeases + 1 of the i nodes ahead of it are gone; only
//     i - maxLeases of them are unwatched, so at least one deletion it needs
//     is one it watches.
//   - Herd-free: a node is watched only by the maxLeases nodes behind it,
//     so one release wakes at most maxLeases waiters, never the whole
//     queue, and exactly one of them gets the lease (a waiter that gives up
//     likewise wakes at most maxLeases others).
//   - AcquireN is all or nothing: its n nodes are created in one
//     transaction, so they sit next to each other in the queue, and it
//     returns n leases or none. Its first nodes keep their places while the
//     rest wait, so a large request is not starved by a stream of small
//     ones, and two callers of AcquireN never deadlock each holding part of
//     what the other needs: everything ahead of a partly granted request
//     holds a lease and will release it.
//   - Context first: Acquire waits until a lease is held or ctx ends; a
//     failed or cancelled acquire leaves no node behind.
//   - Loss is signalled: a Lease's Done is closed and Err says why when the
//     session expires, the node is deleted by someone else, the client is
//     closed, or the connection has been silent long enough that the server
//     might expire the session, before the lease could be granted to
//     someone else; [Lease.Context] gives a context cancelled at that
//     moment, with the reason as its cause.
//   - Fencing: Lease.Token returns the node's czxid, unique across the
//     ensemble and increasing in the order leases are granted. With one
//     lease it fences exactly like a mutex's token; with several, holders
//     at the same time have different tokens, so a store can tell grants
//     apart but cannot order concurrent holders by them.
//   - Recovery from partial failure: a create whose reply was lost is found
//     again by its UUID; no orphan node, no lease held twice.
//
// # Cost
//
// An uncontended Acquire costs one round trip: the read of the path's
// recorded number of leases and the listing of the queue are sent right
// behind the create (whose reply carries the token) and answered with it;
// three requests. After an acquire that found every lease taken, the reads
// are sent once the create is answered: two round trips. A lease held
// longer than 100 ms, or whose Done or Err is asked for, arms a watch on
// its own node (one more read, off the critical path), so that a deletion
// by someone else is reported through Done. The first acquire on a new
// path also creates the path: its first create fails, the path is created,
// and the create is sent again (two more round trips, more if parents are
// missing too). A waiter arms, in one round trip, one watch per predecessor
// it watches and one on its own node; when a watched node is deleted it
// decides again from the queue it knows, and lists the path once only if
// nodes it knew of are still ahead. Release is one delete. AcquireN(n)
// costs one transaction, then one round trip per node that lists the queue
// and also reads the node.
//
// # Non-guarantees
//
// No lock service can stop a process that was paused (GC, swap, a stopped
// VM) past its session timeout from acting as if it still held a lease:
// Done cannot fire while the process is not running, and meanwhile its
// lease may have gone to someone else. Pass [Lease.Token] to the systems
// you write to and have them reject stale holders.
//
// Leases are not reentrant and not tied to goroutines: each Acquire takes
// one more lease, also on a handle that holds some already.
package semaphore
