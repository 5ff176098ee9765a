package driver

import (
	"errors"
	"slices"
	"strings"
)

// Kind is one kind of lock node this library and Apache Curator write: a
// row of the table the recipes, the engine's kind check, the holder flag
// of a queue's participants and the zklock command all read.
type Kind struct {
	// LockName is the name part of the kind's nodes, before the sequence
	// number, such as "lock-".
	LockName string
	// Name is the kind: "mutex", "read", "write", "lease" or "latch".
	Name string
	// Curator names the Apache Curator recipe that writes the same nodes,
	// "" when none does.
	Curator string
	// pair is the lock name of the other side of a read/write lock.
	pair string
}

// The kinds of lock node, by lock name.
var kinds = []Kind{
	{LockName: "lock-", Name: "mutex", Curator: "InterProcessMutex"},
	{LockName: "read-", Name: "read", pair: "write-"},  // ZooKeeper's read/write lock recipe
	{LockName: "write-", Name: "write", pair: "read-"}, // ZooKeeper's read/write lock recipe
	{LockName: "__READ__", Name: "read", Curator: "InterProcessReadWriteLock", pair: "__WRIT__"},
	{LockName: "__WRIT__", Name: "write", Curator: "InterProcessReadWriteLock", pair: "__READ__"},
	{LockName: "lease-", Name: "lease"}, // this library's semaphore
	{LockName: "latch-", Name: "latch", Curator: "LeaderLatch"},
}

// errLeases is the error of [Kind.Driver] for a lease kind without a
// number of leases.
var errLeases = errors.New("driver: a semaphore's driver needs its number of leases")

// KindNamed returns the kind whose nodes carry lockName; ok is false for
// a lock name of no known kind.
func KindNamed(lockName string) (k Kind, ok bool) {
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.LockName == lockName })
	if i < 0 {
		return Kind{}, false
	}
	return kinds[i], true
}

// Queue returns the lock names whose nodes queue together with the
// kind's: the read and the write lock name (in that order) for either side
// of a read/write lock, the kind's own lock name for the others.
func (k Kind) Queue() []string {
	switch k.Name {
	case "read":
		return []string{k.LockName, k.pair}
	case "write":
		return []string{k.pair, k.LockName}
	}
	return []string{k.LockName}
}

// Driver returns the driver that decides for the kind's nodes: [Mutex] for
// a mutex or a latch, [Read] (with the write side's lock name) or [Write]
// for the sides of a read/write lock, [Leases](leases) for a semaphore's
// (an error wrapping [ErrInvalidLeases] when leases < 1). leases is
// ignored by the other kinds.
func (k Kind) Driver(leases int) (Driver, error) {
	switch k.Name {
	case "read":
		return Read(k.pair), nil
	case "write":
		return Write(), nil
	case "lease":
		d, err := Leases(leases)
		if err != nil {
			return nil, errors.Join(errLeases, err)
		}
		return d, nil
	}
	return Mutex(), nil
}

// LockNames returns the lock names of every kind [KindOf] knows, in a
// fixed order: a queue of all of them lists any lock directory written by
// this library or by Curator.
func LockNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.LockName
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
		if strings.HasSuffix(name[:i], k.LockName) {
			return k.LockName, k.Name, true
		}
	}
	return "", "", false
}
