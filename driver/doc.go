// Package driver holds the decision at the heart of every queue-based
// ZooKeeper recipe (mutex, semaphore, read/write lock, leader latch): given
// the children of a lock directory and the name of our own node, do we hold
// the lock, and if not, whose deletion should we wait for?
//
// It is the Go counterpart of Apache Curator's LockInternalsDriver. The
// package performs no I/O and depends only on the standard library: a
// [Driver] is a pure function, which makes the recipes' correctness
// argument testable without a ZooKeeper ensemble.
//
// # Node names
//
// Every contender creates an EPHEMERAL_SEQUENTIAL child of the lock
// directory. Recipes create "protected" names that carry a random UUID so
// that a client can recognize its own node after a connection loss:
//
//	_c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000042
//
// Nodes written by other tools may be unprotected ("lock-0000000042"), and
// the directory may contain unrelated children. ZooKeeper appends a
// zero-padded sequence number of ten digits to the requested name; the
// lock name ("lock-" above, or "read-" and "write-" for a read/write lock)
// marks where the sequence begins. [Sequence] extracts it, [Filter] keeps
// the children that carry a lock name, and [Sort] puts them in queue order.
//
// # Kinds of node
//
// One table ([KindNamed], [KindOf], [LockNames]) names the kinds of lock
// node the recipes know: ours ("lock-", "read-"/"write-", "lease-",
// "latch-"), the names Apache Curator's lock recipes and go-zookeeper's
// zk.Lock write ("lock-", "__READ__"/"__WRIT__", "latch-"), and kazoo's
// Lock ("__lock__", [Kind].Foreign: no recipe of ours writes it). A
// mutex's queue holds both "lock-" and "__lock__" nodes, ordered by
// their sequence numbers, which the directory's counter gives them.
// [Classify] sorts every other child: a lock-like name of no known kind
// (ending in ten or more digits, such as kazoo's read lock's "__rlock__"
// nodes), Curator's semaphore layout ("leases", "locks") and kazoo's
// semaphore leases (32 hex digits) are nodes no recipe here can order,
// which the engine refuses; anything else is left alone.
//
// # Using a driver
//
// A recipe lists the children of its lock directory and asks the driver:
//
//	sorted := driver.Sort(driver.Filter(children, lockNames...), lockNames...)
//	d, err := drv.Decide(sorted, ourNode)
//
// If d.Held, the recipe owns the lock (or lease, or leadership). Otherwise
// it sets an exists-watch on every name in d.Watch and waits for one of
// them to be deleted. The contract of [Driver] (a verdict depends only on
// the nodes ahead of ours, and deleting nodes never takes a held lock away)
// lets the recipe re-decide after a deletion by removing the deleted name
// from its sorted slice, without listing the children again.
//
// The drivers are [Mutex], [Write], [Leases] (a semaphore) and [Read]. A
// leader latch or election uses [Mutex]. [DriverFunc] adapts a function
// for custom recipes.
package driver
