package recipe

import "sync/atomic"

// Stats counts what a [Client] has done since it connected: ZooKeeper
// requests by kind, wake-ups of waiters, retries and losses. It exists for
// operators and for tests and benchmarks that check round trips and herd
// behaviour.
type Stats struct {
	// Creates, Deletes, Lists and Reads count requests sent by the recipes
	// (create, delete, getChildren, getData/exists).
	Creates, Deletes, Lists, Reads int64
	// Wakeups counts watch events that woke a waiting acquire.
	Wakeups int64
	// Retries counts operations retried after a connection-loss error.
	Retries int64
	// Recovered counts creates whose reply was lost and whose node was
	// found again by its UUID instead of being created twice.
	Recovered int64
	// Acquired counts successful acquires (reentrant ones excluded).
	Acquired int64
	// Lost counts holds that lost ownership.
	Lost int64
	// EpochsEnded counts the times the session stopped being trusted
	// (expiry, suspension, close).
	EpochsEnded int64
}

// RoundTrips returns the number of requests counted in s.
func (s Stats) RoundTrips() int64 { return s.Creates + s.Deletes + s.Lists + s.Reads }

// Sub returns s minus o, field by field: the activity between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Creates: s.Creates - o.Creates, Deletes: s.Deletes - o.Deletes,
		Lists: s.Lists - o.Lists, Reads: s.Reads - o.Reads,
		Wakeups: s.Wakeups - o.Wakeups, Retries: s.Retries - o.Retries,
		Recovered: s.Recovered - o.Recovered, Acquired: s.Acquired - o.Acquired, Lost: s.Lost - o.Lost,
		EpochsEnded: s.EpochsEnded - o.EpochsEnded,
	}
}

type stats struct {
	creates, deletes, lists, reads atomic.Int64
	wakeups, retries, recovered    atomic.Int64
	acquired, lost, epochsEnded    atomic.Int64
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Creates: s.creates.Load(), Deletes: s.deletes.Load(),
		Lists: s.lists.Load(), Reads: s.reads.Load(),
		Wakeups: s.wakeups.Load(), Retries: s.retries.Load(),
		Recovered: s.recovered.Load(), Acquired: s.acquired.Load(), Lost: s.lost.Load(),
		EpochsEnded: s.epochsEnded.Load(),
	}
}
