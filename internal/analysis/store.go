package analysis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
)

// The fenced store: a store outside ZooKeeper (here in the process, as a
// database would be on the network) that a mutex's holders write to,
// each write carrying the holder's fencing token. The guarded store
// refuses a write whose token is older than one it accepted; its holders
// stop writing when Done closes. The control's store accepts every write
// and its holders ignore Done.
//
// Checked on the store's own order of accepted writes: the writes of one
// grant must not interleave with those of another (two grants writing
// turn about is two holders at once), and tokens must not go back.

// fencedStore is the store.
type fencedStore struct {
	check bool
	mu    sync.Mutex
	max   int64
	seq   int64
	log   []storeWrite
}

// storeWrite is one write the store accepted or refused.
type storeWrite struct {
	Seq      int64     `json:"seq"` // order of acceptance (0: refused)
	Worker   int       `json:"worker"`
	Token    int64     `json:"token"`
	Accepted bool      `json:"accepted"`
	At       time.Time `json:"at"`
}

// write offers a write with token and reports whether it was accepted.
func (s *fencedStore) write(worker int, token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := storeWrite{Worker: worker, Token: token, At: time.Now()}
	if !s.check || token >= s.max {
		s.seq++
		w.Seq, w.Accepted = s.seq, true
		s.max = max(s.max, token)
	}
	s.log = append(s.log, w)
	return w.Accepted
}

func (s *fencedStore) writes() []storeWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storeWrite(nil), s.log...)
}

type storeLoad struct {
	name    string
	base    string
	guarded bool
	store   *fencedStore
}

// work takes the mutex and writes to the store a few times per hold.
func (l *storeLoad) work(ctx context.Context, w *worker, r *rand.Rand) {
	m, err := mutex.New(w.client, path.Join(l.base, "lock"))
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := m.Lock(lctx)
		cancel()
		if err != nil {
			_ = m.Unlock(context.Background())
			locktest.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		token := m.Token()
		release := w.watchHold(time.Now(), token, m.Done())
		writes := 4 + r.IntN(12) // a hold of 0.2 to 1.2 s
		w.critical.Store(true)
		for i := 0; i < writes && ctx.Err() == nil; i++ {
			w.gate.wait(ctx)
			if l.guarded && m.Err() != nil {
				break // told lost: stop writing
			}
			op := Op{Workload: l.name, Worker: w.id, Kind: "write", Token: token, Call: time.Now()}
			if l.store.write(w.id, token) {
				op.Status = OK
			} else {
				op.Status = Refused
			}
			op.Return = time.Now()
			if op.Status == OK {
				w.ok(op.Return)
			}
			w.hist.op(op)
			locktest.Sleep(ctx, time.Duration(20+r.IntN(40))*time.Millisecond)
		}
		w.critical.Store(false)
		release()
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.Unlock(uctx)
		cancel()
	}
}

// checkStore checks the store's accepted writes: per grant (worker and
// token) the span from its first to its last accepted write, in the
// store's order; no two spans may overlap, and tokens never go back.
func checkStore(writes []storeWrite) []Finding {
	type grant struct {
		worker      int
		token       int64
		first, last int64
		at          time.Time // of the first write
	}
	spans := map[[2]int64]*grant{}
	var out []Finding
	var prev int64
	for _, w := range writes {
		if !w.Accepted {
			continue
		}
		if w.Token < prev {
			out = append(out, Finding{w.At, fmt.Sprintf("store write %d: token %#x accepted after token %#x", w.Seq, w.Token, prev)})
		}
		prev = max(prev, w.Token)
		k := [2]int64{int64(w.Worker), w.Token}
		g, ok := spans[k]
		if !ok {
			g = &grant{worker: w.Worker, token: w.Token, first: w.Seq, at: w.At}
			spans[k] = g
		}
		g.last = w.Seq
	}
	gs := make([]*grant, 0, len(spans))
	for _, g := range spans {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].first < gs[j].first })
	for i := 1; i < len(gs); i++ {
		for j := 0; j < i; j++ {
			if gs[j].last > gs[i].first {
				out = append(out, Finding{gs[i].at, fmt.Sprintf("store writes %d-%d of worker %d (token %#x) interleave with writes %d-%d of worker %d (token %#x)",
					gs[i].first, gs[i].last, gs[i].worker, gs[i].token, gs[j].first, gs[j].last, gs[j].worker, gs[j].token)})
			}
		}
	}
	return out
}
