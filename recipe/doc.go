// Package recipe is the engine shared by every zkrecipes primitive: a
// ZooKeeper [Client] with contexts, connection-state fan-out and loss
// detection, and a lock engine ([Lock]) that the mutex, read/write lock,
// semaphore and leader election specialise with a driver from package
// [github.com/zkrecipes/zkrecipes/driver].
//
// Most programs use this package only to [Connect] and then hand the client
// to a recipe:
//
//	c, err := recipe.Connect(ctx, []string{"127.0.0.1:2181"})
//	...
//	defer c.Close()
//	m, err := mutex.New(c, "/locks/orders")
//
// # Building a recipe
//
// A recipe is a lock name, a driver and an API. [NewLock] takes a
// [LockSpec] naming both; [Lock.Acquire] waits, [Lock.TryAcquire] looks
// once, [Lock.AcquireN] takes n consecutive places, and each returns a
// [Hold]: [Hold.Release], [Hold.Done] and [Hold.Err] (the loss signal),
// [Hold.Context] (a context that ends on loss, for the calls made as holder),
// [Hold.Token] (the fencing token), [Hold.Node]. The rules a driver must
// keep are on [github.com/zkrecipes/zkrecipes/driver.Driver];
// examples/custom-recipe builds one outside this module, and
// docs/custom-recipe.md walks through it.
//
// # One vocabulary
//
// Every recipe's errors match the engine's sentinels with [errors.Is]: a
// failed acquire [ErrNotAcquired] (and ctx.Err() when its context ended),
// a try that finds the lock held elsewhere [ErrWouldBlock], a release of
// nothing held [ErrNotHeld], Err after a loss [ErrLost] and the reason.
// An acquire that finds another kind of lock queued ahead of it in its
// directory fails with [ErrMismatch]: kinds never mix on one path. So does
// one that finds, before or after its own node, a lock node no kind in
// its queue can order: another library's (kazoo's), a name ending in a
// sequence number of no known kind, or Curator's semaphore children
// ("leases", "locks"). The error names the node; see docs/interop.md.
//
// # How a lock is acquired
//
// An acquire creates an EPHEMERAL_SEQUENTIAL node named
// _c_<uuid>-<lockName><sequence> in the lock directory (Curator's
// "protected" format; missing directories are created as CONTAINER nodes,
// which the server removes once empty). Its create reply carries the
// node's czxid, the fencing token. The listing of the directory is sent
// right behind the create, on the same connection, so an uncontended
// acquire is one round trip (a Lock whose last acquire found the lock taken
// lists after the create's reply instead). The driver decides from the sorted queue whether
// the node holds; if not, the engine watches only the nodes the driver
// names (for a mutex, the immediate predecessor) with getData watches, so a
// release wakes one waiter, not all of them. When a watched node is deleted
// the engine decides again from the queue it already knows, without listing
// the directory: drivers only look at nodes ahead of ours, and sequence
// numbers only grow.
//
// # Failure handling
//
// Connection-loss errors are retried under a [retry.Policy]. A create whose
// reply was lost is found again by its UUID instead of being made twice. A
// failed or cancelled acquire deletes its node before returning, or, while
// the connection is down, in the background for as long as the session that
// owns the node lives.
//
// # Loss signal
//
// A [Hold] closes its Done channel when ownership is lost or can no longer
// be guaranteed: the session expired ([ErrSessionExpired]), another client
// deleted the node ([ErrNodeDeleted]), the client was closed ([ErrClosed]),
// or the client heard nothing from ZooKeeper for the loss timeout
// ([ErrConnectionSuspended]; by default half the session timeout, which is
// before the server could expire the session and grant the lock to someone
// else).
//
// # What no ZooKeeper lock guarantees
//
// A holder that is paused (GC, swap, a stopped VM) past its session timeout
// can wake up still believing it holds the lock while another process holds
// it. Done cannot fire while the process is not running. This is why every
// hold has a fencing token ([Hold.Token], the node's czxid, strictly
// increasing across the ensemble): pass it to the systems you write to and
// have them reject writes with a token lower than one they have seen.
//
// # Guarded writes
//
// For state kept in ZooKeeper itself, a hold can do better than a token:
// [Hold.Commit] sends the caller's ops ([Create], [CreateSequential],
// [SetData], [SetDataVersion], [Delete], [Check]) in one transaction with
// a check that the hold's node still exists. The server applies them all,
// at one point of its order of writes, only if the hold is in force then,
// or none of them; no write of a holder whose session expired or whose
// node was deleted can land, however late it arrives. Every [Held] has
// Commit. A refused op is an [*OpError]; a transaction whose reply never
// came is [ErrCommitUnknown] and is not sent again. docs/fencing.md says
// when to use which, and what to do with each error.
//
// # Known issue: a data race in go-zookeeper
//
// go-zookeeper v1.0.4 reads and writes its connection's last zxid from two
// goroutines without synchronization when it reconnects with watches set.
// Programs built with -race that lose their connection under load can see
// the race detector report it; the racing value is one 64-bit zxid used
// to re-send watches, and builds without -race do not check for it. The fix is go-zookeeper pull request 35; until a release has
// it, a replace directive in your go.mod can point go-zookeeper to a copy
// with the fix, as this module's own builds do (the patch in patches/,
// applied by scripts/patched-zk.sh). A second patch there fixes a
// narrower race: CreateContainer, on a client closed during the call,
// reads a reply its receive loop may still be writing.
package recipe
