// Package rwlock is a distributed, reentrant, fair read/write lock on
// ZooKeeper: any number of readers, or one writer. It follows ZooKeeper's
// read/write lock recipe (nodes "read-" and "write-"), and with
// [WithCuratorNames] it queues together with Curator's
// InterProcessReadWriteLock on the same path.
//
//	rw, err := rwlock.New(client, "/locks/catalog")
//	if err != nil { ... }
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//
//	if err := rw.RLock(ctx); err != nil { ... } // readers share the lock
//	read(...)
//	rw.RUnlock(context.Background())
//
//	if err := rw.Lock(ctx); err != nil { ... }  // a writer is alone
//	write(rw.Token(), ...)                      // fencing token for downstream stores
//	rw.Unlock(context.Background())
//
// # How it works
//
// Readers and writers queue together in one directory: every RLock or Lock
// creates an ephemeral sequential node, and ZooKeeper's sequence numbers
// order them. A read node holds when no write node is ahead of it; a write
// node holds when it is first. The package is two instances of the shared
// engine ([recipe.Lock]) over the same directory, one with the read driver
// and one with the write driver ([driver.Read], [driver.Write]); it adds no
// wait loop of its own.
//
// # Guarantees
//
//   - Exclusion: while a writer holds the lock nobody else does; any number
//     of readers may hold it together. This holds among all handles and
//     processes using the same path, as long as sessions are live (see
//     below).
//   - Fairness, no writer starvation: a reader is blocked only by a writer
//     queued before it, and a writer waits for every node queued before it.
//     A reader that arrives while a writer waits queues behind that writer,
//     so a stream of readers cannot keep a writer out. Writers hold in the
//     order they queued.
//   - Herd-free waiting: a waiting reader watches only the nearest writer
//     ahead of it, a waiting writer only its immediate predecessor. A
//     writer's release wakes exactly the waiters that can now proceed: the
//     readers queued right behind it, or the writer queued right behind it;
//     never a writer further back, nor the readers behind that writer. A
//     reader's release wakes at most the one writer queued right behind it.
//   - Context first: RLock and Lock wait until the lock is held or ctx ends;
//     a failed or cancelled call leaves no node behind.
//   - Loss is signalled, per mode: Done and Err of [RWLock.Writer] and of
//     [RWLock.Reader] report when the session expires, the node is deleted by
//     someone else, the client is closed, or the connection has been silent
//     long enough that the server might expire the session: under network
//     silence before another client could be granted the lock, otherwise
//     (the server ends the session, someone deletes the node) one
//     notification after, fenced by Commit and the token
//     (docs/failure-model.md, "Who is told first").
//     Each side's Context gives a context cancelled at that moment, with
//     the reason as its cause.
//   - Fencing: the Token of each side returns the node's czxid,
//     strictly increasing across the ensemble; every write hold granted
//     later has a greater token.
//   - Recovery from partial failure: a create whose reply was lost is found
//     again by its UUID; no orphan node, no deadlock.
//
// # Non-guarantees
//
// No lock service can stop a process that was paused (GC, swap, a stopped
// VM) past its session timeout from acting as if it still held the lock:
// Done cannot fire while the process is not running. Pass the token to the
// systems you write to and have them reject stale tokens.
//
// A reader does not exclude other readers, so the lock protects nothing a
// reader writes. Readers queued behind a waiting writer wait even though
// only readers hold the lock: that is the price of no writer starvation.
//
// # Reentrancy, downgrade and upgrade
//
// Go has no goroutine identity, so a handle excludes like a
// [sync.RWMutex] and re-enters only when asked to: goroutines sharing a
// handle share its read lock, a Lock waits until the handle holds nothing,
// and an RLock waits while it holds the write lock. A call chain that must
// lock again while holding passes down the context [RWLock.Enter] (write)
// or [RWLock.REnter] (read) returns; calls given it only count, without
// I/O. See docs/mutex.md for the reasons.
//
// Downgrade: the write holder may take the read lock, through the write
// hold's context, and then release the write lock and keep reading, with
// no writer able to slip in between:
//
//	ctx, _ = rw.Enter(ctx)
//	update(...)
//	rw.RLock(ctx)    // never waits while this handle writes
//	rw.Unlock(ctx)   // other readers may now join; writers still wait
//	readBack(...)
//	rw.RUnlock(ctx)
//
// RLock on the write holder creates a real read node in the queue, whose
// decision ignores this handle's own write node (otherwise the read node,
// queued behind it, would wait for it forever). Nothing else can be
// holding, so when no other writer is queued the read node holds at once,
// and after Unlock it is an ordinary read hold: queued readers join it,
// writers wait for it. When another writer has queued behind this handle's
// write node in the meantime, a read node queued after that writer could
// not keep it out (a writer waits only for the nodes ahead of it), and
// waiting for that writer would deadlock (it waits for our write node). The
// read node is then deleted again, and the read hold rides on the write
// node: after Unlock the write node stays, still excluding everyone else,
// until the last RUnlock. Correctness is kept either way; only in the second
// case do other readers wait until the downgraded reader is done.
// Reader().Node() tells which node the read hold rests on.
//
// Upgrade: Lock with the context of a read hold would wait for its own
// read node and deadlock, so it fails at once, without I/O, with
// [ErrUpgrade]. (Lock with a plain context while the handle reads waits
// for the handle's readers to let go, as [sync.RWMutex.Lock] does.) Release the read lock and take the write lock, then check
// again whatever was read.
//
// # Node names
//
// Nodes are named in Curator's protected format,
// _c_<uuid>-<lock name><sequence>, with lock names [ReadLockName] and
// [WriteLockName], or with [WithCuratorNames] [CuratorReadLockName] and
// [CuratorWriteLockName]. All users of a path must agree on the names:
// nodes carrying other names are not part of the queue.
package rwlock
