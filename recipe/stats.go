package recipe

import (
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/engine"
)

// stats are a client's counters (see engine.Stats).
type stats struct {
	creates, deletes, lists, reads atomic.Int64
	wakeups, retries, recovered    atomic.Int64
	acquired, lost, epochsEnded    atomic.Int64
	writes, suspensions            atomic.Int64
}

func (s *stats) snapshot() engine.Stats {
	return engine.Stats{
		Creates: s.creates.Load(), Deletes: s.deletes.Load(),
		Lists: s.lists.Load(), Reads: s.reads.Load(),
		Wakeups: s.wakeups.Load(), Retries: s.retries.Load(),
		Recovered: s.recovered.Load(), Acquired: s.acquired.Load(), Lost: s.lost.Load(),
		EpochsEnded: s.epochsEnded.Load(), Suspensions: s.suspensions.Load(), Writes: s.writes.Load(),
	}
}
