package driver

import "strings"

// The kinds of lock node this library and Apache Curator write, by the lock
// name before the sequence number.
var kinds = []struct{ lockName, kind string }{
	{"lock-", "mutex"},    // mutex; Curator's InterProcessMutex
	{"read-", "read"},     // read side of a read/write lock
	{"write-", "write"},   // write side of a read/write lock
	{"__READ__", "read"},  // Curator's InterProcessReadWriteLock
	{"__WRIT__", "write"}, // Curator's InterProcessReadWriteLock
	{"lease-", "lease"},   // semaphore
	{"latch-", "latch"},   // leader election; Curator's LeaderLatch
}

// LockNames returns the lock names of every kind [KindOf] knows, in a
// fixed order: a queue of all of them lists any lock directory written by
// this library or by Curator.
func LockNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.lockName
	}
	return out
}

// KindOf tells which kind of lock node name is: its lock name, directly
// followed by a sequence number that ends the name, and the kind ("mutex",
// "read", "write", "lease" or "latch"). ok is false for names of no known
// kind, which are left alone.
func KindOf(name string) (lockName, kind string, ok bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || len(name)-i > maxDigits {
		return "", "", false
	}
	for _, k := range kinds {
		if strings.HasSuffix(name[:i], k.lockName) {
			return k.lockName, k.kind, true
		}
	}
	return "", "", false
}
