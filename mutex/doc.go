// Package mutex is a distributed, reentrant, fair mutual-exclusion lock on
// ZooKeeper, compatible with Curator's InterProcessMutex, go-zookeeper's
// zk.Lock and kazoo's Lock on the same path.
//
//	m, err := mutex.New(client, "/locks/orders")
//	if err != nil { ... }
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	if err := m.Lock(ctx); err != nil { ... } // errors.Is(err, context.DeadlineExceeded)
//	defer m.Unlock(context.Background())
//	write(m.Token(), ...)                      // fencing token for downstream stores
//
// # Guarantees
//
//   - Mutual exclusion among all handles and processes using the same path,
//     as long as sessions are live (see below).
//   - Fairness: the lock is granted in the order the contenders queued.
//   - Herd-free waiting: each waiter watches only its predecessor; a
//     release wakes exactly one waiter.
//   - Context first: Lock waits until the lock is held or ctx ends; a failed
//     or cancelled Lock leaves no node behind.
//   - Loss is signalled: Done is closed and Err says why when the session
//     expires, the node is deleted by someone else, the client is closed, or
//     the connection has been silent long enough that the server might
//     expire the session. Under network silence that is before another
//     client could be granted the lock; when the server ends the session
//     itself, or someone else deletes the node, the next holder may be
//     granted first and the holder is told one notification later, while
//     Commit refuses its writes and its token is the lower one
//     (docs/failure-model.md, "Who is told first").
//     [Mutex.Context] gives a context cancelled at the same moment, with the
//     reason as its cause, for the calls made as holder (no goroutine each).
//   - Fencing: Token returns the node's czxid, strictly increasing from one
//     holder to the next across the ensemble.
//   - Recovery from partial failure: a create whose reply was lost is found
//     again by its UUID; no orphan node, no deadlock.
//
// # Non-guarantees
//
// No lock service can stop a process that was paused (GC, swap, a stopped
// VM) past its session timeout from acting as if it still held the lock:
// Done cannot fire while the process is not running. Pass [Mutex.Token] to
// the systems you write to and have them reject stale tokens.
//
// # Guarded writes
//
// When the state the mutex protects is in ZooKeeper, write it with
// [Mutex.Commit]: the writes go in one transaction with a check that the
// holder's node still exists, so they land only while the lock is held,
// however late the request arrives. Read the state with
// [recipe.Client.Get] and write against the version read; make parents
// beforehand with [recipe.Client.EnsurePath]:
//
//	state, version, err := client.Get(ctx, "/orders/state")
//	...
//	_, err = m.Commit(ctx, recipe.SetDataVersion("/orders/state", next(state), version))
//	// errors.Is(err, mutex.ErrLost): the lock was lost and nothing was written
//
// # Other libraries on the same path
//
// The mutex writes Curator's node names ("_c_<uuid>-lock-<sequence>"), so
// a Curator InterProcessMutex and go-zookeeper's zk.Lock queue with it. It
// also counts kazoo's Lock and WriteLock nodes ("<hex>__lock__<sequence>")
// as contenders, in one queue ordered by sequence number: it never holds
// next to them. kazoo sees our nodes only when told their name:
//
//	client.Lock(path, identifier, extra_lock_patterns=["-lock-"])
//
// Without it, kazoo's Lock takes the lock while ours holds. Lock nodes the
// mutex cannot order (kazoo's read lock's "__rlock__" nodes, any other
// name ending in a sequence number, Curator's semaphore children "leases"
// and "locks") make Lock and TryLock fail with recipe.ErrMismatch. See
// docs/interop.md.
//
// # Reentrancy and goroutines
//
// Go has no goroutine identity, so a handle excludes like a [sync.Mutex]
// and re-enters only when asked to: Lock on a handle that holds (from any
// goroutine) waits for the handle's hold to be released, then queues.
// Goroutines may share a handle, such as a map of one mutex per tenant,
// and still exclude each other. A call chain that must lock again while
// holding passes down the context [Mutex.Enter] returns:
//
//	ctx, err := m.Enter(ctx) // carries the hold
//	if err != nil { ... }
//	defer m.Unlock(context.Background())
//	step(ctx)                // m.Lock(ctx) in here only counts, without I/O
//
// The reasons and trade-offs are in docs/mutex.md.
package mutex
