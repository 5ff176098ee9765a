package recipe

import "sync/atomic"

// Stats counts what a client has done since it connected: ZooKeeper
// requests by kind, wake-ups of waiters, retries and losses. They are
// plain counters for metrics and tests: the number of requests per
// acquire, say, is exact, where a time is not.
type Stats struct {
	// Creates, Deletes, Lists and Reads count the requests the engine
	// sent (create or multi, delete, getChildren, getData or exists).
	Creates, Deletes, Lists, Reads int64
	// Writes counts setData requests (revocation).
	Writes int64
	// Commits counts guarded transactions sent ([Hold.Commit]).
	Commits int64
	// Wakeups counts watch events that woke a waiting acquire.
	Wakeups int64
	// Retries counts operations retried after a connection-loss error.
	Retries int64
	// Recovered counts creates whose reply was lost and whose node was
	// found again by its UUID instead of being created twice.
	Recovered int64
	// Acquired counts successful acquires (not the reentrant ones of a
	// recipe handle).
	Acquired int64
	// Lost counts holds that lost ownership.
	Lost int64
	// EpochsEnded counts the times the session stopped being trusted
	// (expiry, suspension, close).
	EpochsEnded int64
	// Suspensions counts the suspensions of a client that tolerates them
	// ([WithSuspensionTolerance]): silences past the loss timeout that
	// did not end the epoch.
	Suspensions int64
	// RefusedFrames counts the frames from servers that the client
	// refused (too long, too short, out of step, or not parsing for the
	// request they answer), each of which ended its connection.
	RefusedFrames int64
}

// RoundTrips returns the number of requests counted in s.
func (s Stats) RoundTrips() int64 {
	return s.Creates + s.Deletes + s.Lists + s.Reads + s.Writes + s.Commits
}

// Sub returns s minus o, field by field: the activity between two
// snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Creates: s.Creates - o.Creates, Deletes: s.Deletes - o.Deletes,
		Lists: s.Lists - o.Lists, Reads: s.Reads - o.Reads, Writes: s.Writes - o.Writes, Commits: s.Commits - o.Commits,
		Wakeups: s.Wakeups - o.Wakeups, Retries: s.Retries - o.Retries,
		Recovered: s.Recovered - o.Recovered, Acquired: s.Acquired - o.Acquired, Lost: s.Lost - o.Lost,
		EpochsEnded: s.EpochsEnded - o.EpochsEnded, Suspensions: s.Suspensions - o.Suspensions,
		RefusedFrames: s.RefusedFrames - o.RefusedFrames,
	}
}

// stats are a client's counters, as Stats reports them.
type stats struct {
	creates, deletes, lists, reads atomic.Int64
	wakeups, retries, recovered    atomic.Int64
	acquired, lost, epochsEnded    atomic.Int64
	writes, suspensions, commits   atomic.Int64
	refusedFrames                  atomic.Int64
}

func (s *stats) snapshot() Stats {
	return Stats{
		Creates: s.creates.Load(), Deletes: s.deletes.Load(),
		Lists: s.lists.Load(), Reads: s.reads.Load(),
		Wakeups: s.wakeups.Load(), Retries: s.retries.Load(),
		Recovered: s.recovered.Load(), Acquired: s.acquired.Load(), Lost: s.lost.Load(),
		EpochsEnded: s.epochsEnded.Load(), Suspensions: s.suspensions.Load(), Writes: s.writes.Load(), Commits: s.commits.Load(),
		RefusedFrames: s.refusedFrames.Load(),
	}
}
