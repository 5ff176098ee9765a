// Package migrate measures what changes for a service that moves its locks
// from go-zookeeper's zk.Lock to this module's mutex: the same faults, the
// same two contenders, zk.Lock and ours side by side. It produces the
// comparison table of docs/migrating.md:
//
//	MIGRATE_COMPARE=1 go test -run TestCompareWithZkLock -v ./internal/migrate/
//
// (with GOWORK set as the make targets set it). The run takes about two
// minutes and needs ZooKeeper (see zktest). MIGRATE_TABLE=file also writes
// the table to file.
//
// The faults are made in one process: a server restart with zktest's
// Restart, expiries with zktest.Proxy.ExpireSessions, a SIGKILLed holder as
// the server sees one (its connection closed, nothing closes the session,
// nothing reconnects), a SIGTERMed waiter as signal.NotifyContext hands it
// to a service (its context cancelled).
package migrate
