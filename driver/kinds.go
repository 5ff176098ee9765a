package driver

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Kind is one kind of lock node this library, Apache Curator or kazoo
// writes: a row of the table the recipes, the engine's kind check, the
// holder flag of a queue's participants and the zklock command all read.
type Kind struct {
	// LockName is the name part of the kind's nodes, before the sequence
	// number, such as "lock-".
	LockName string
	// Name is the kind: "mutex", "read", "write", "lease" or "latch".
	Name string
	// Curator names the Apache Curator recipe that writes the same nodes,
	// "" when none does.
	Curator string
	// Kazoo names the kazoo (Python) recipes that write the same nodes,
	// "" when none does.
	Kazoo string
	// Foreign is set for a kind that no recipe of this library writes
	// (kazoo's "__lock__"). The contenders of such a kind order only
	// among the names their own library knows and do not see ours, so the
	// engine refuses a directory that holds one, whatever the order of
	// the nodes, unless the kind is in the acquiring lock's queue.
	Foreign bool
	// pair is the lock name of the other kind the kind's nodes queue
	// with: the other side of a read/write lock, or the other library's
	// mutex nodes.
	pair string
}

// The kinds of lock node, by lock name.
// Rows whose nodes queue together name each other in pair, and list
// the read side before the write side and ours before the foreign one:
// Queue keeps the table's order.
var kinds = []Kind{
	{LockName: "lock-", Name: "mutex", Curator: "InterProcessMutex", pair: "__lock__"}, // also go-zookeeper's zk.Lock
	{LockName: "read-", Name: "read", pair: "write-"},                                  // ZooKeeper's read/write lock recipe
	{LockName: "write-", Name: "write", pair: "read-"},                                 // ZooKeeper's read/write lock recipe
	{LockName: "__READ__", Name: "read", Curator: "InterProcessReadWriteLock", pair: "__WRIT__"},
	{LockName: "__WRIT__", Name: "write", Curator: "InterProcessReadWriteLock", pair: "__READ__"},
	{LockName: "lease-", Name: "lease"}, // this library's semaphore
	{LockName: "latch-", Name: "latch", Curator: "LeaderLatch"},
	{LockName: "__lock__", Name: "mutex", Kazoo: "Lock, WriteLock or Election", Foreign: true, pair: "lock-"},
}

// errLeases is the error of [Kind.Driver] for a lease kind without a
// number of leases.
var errLeases = errors.New("driver: a semaphore's driver needs its number of leases")

// KindNamed returns the kind whose nodes carry lockName; ok is false for
// a lock name of no known kind.
func KindNamed(lockName string) (k Kind, ok bool) {
	i := indexOf(lockName)
	if i < 0 {
		return Kind{}, false
	}
	return kinds[i], true
}

// Queue returns the lock names whose nodes queue together with the
// kind's: the read and the write lock name (in that order) for either side
// of a read/write lock, "lock-" and kazoo's "__lock__" (in that order) for
// either mutex kind, the kind's own lock name for the others.
func (k Kind) Queue() []string {
	if k.pair == "" {
		return []string{k.LockName}
	}
	q := []string{k.LockName, k.pair}
	if indexOf(k.pair) < indexOf(k.LockName) {
		q[0], q[1] = q[1], q[0]
	}
	return q
}

// indexOf returns the row of the table whose lock name is lockName, -1
// when there is none.
func indexOf(lockName string) int {
	return slices.IndexFunc(kinds, func(k Kind) bool { return k.LockName == lockName })
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
// this library, by Curator's lock recipes or by kazoo's Lock.
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

// Class is what a child of a lock directory is to the recipes, by its
// name alone; see [Classify].
type Class int

const (
	// Unrelated is a child that is not a lock node, such as a persistent
	// child an application keeps next to its lock's nodes. The recipes
	// leave it alone.
	Unrelated Class = iota
	// Native is a node of a kind of the table that this library writes
	// (whoever wrote this one: Curator's lock recipes and go-zookeeper's
	// zk.Lock write the same names).
	Native
	// Foreign is a node of a kind of the table that only another library
	// writes ([Kind].Foreign: kazoo's "__lock__").
	Foreign
	// Unknown is a lock-like node of no kind of the table: its name ends
	// in a sequence number as ZooKeeper appends it (ten or more digits),
	// such as kazoo's read lock's "<hex>__rlock__0000000007". Nothing
	// tells how it orders against our nodes.
	Unknown
	// Layout is a child of a lock layout the recipes do not speak:
	// "leases" or "locks", the children Apache Curator's
	// InterProcessSemaphoreV2 keeps in its directory, or a name of exactly
	// 32 lowercase hex digits, a lease of kazoo's Semaphore.
	Layout
)

// String returns the class as a phrase for error messages.
func (c Class) String() string {
	switch c {
	case Unrelated:
		return "not a lock node"
	case Native:
		return "a lock node of this library's kinds"
	case Foreign:
		return "a lock node of another library's kind"
	case Unknown:
		return "a lock node of no known kind"
	case Layout:
		return "a child of another library's semaphore layout"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// seqDigits is the number of digits ZooKeeper appends to the name of a
// sequential node.
const seqDigits = 10

// curatorSemaphore lists the children Apache Curator's
// InterProcessSemaphoreV2 creates in its directory: a mutex's nodes under
// "locks", the leases under "leases".
var curatorSemaphore = []string{"leases", "locks"}

// kazooLease reports whether name is that of a lease of kazoo's
// Semaphore: a UUID as 32 lowercase hex digits.
func kazooLease(name string) bool {
	if len(name) != 32 {
		return false
	}
	for i := range len(name) {
		if c := name[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Classify tells what the child of a lock directory named name is: a node
// of a kind of the table ([Native] or [Foreign], as [KindOf] finds it), a
// lock-like node of no known kind ([Unknown]: a name ending in ten or more
// digits), a child of Curator's or kazoo's semaphore layout ([Layout]), or none of
// these ([Unrelated]).
func Classify(name string) Class {
	if ln, _, ok := KindOf(name); ok {
		if k, _ := KindNamed(ln); k.Foreign {
			return Foreign
		}
		return Native
	}
	if slices.Contains(curatorSemaphore, name) || kazooLease(name) {
		return Layout
	}
	digits := 0
	for i := len(name) - 1; i >= 0 && name[i] >= '0' && name[i] <= '9'; i-- {
		digits++
	}
	if digits >= seqDigits {
		return Unknown
	}
	return Unrelated
}
