package analysis

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// worker is one client of one workload: its own recipe.Client, connected
// through proxies of its own to one member (pinned) or to every member.
type worker struct {
	id       int
	workload string
	member   int // -1: every member
	key      int // the counter the worker increments
	proxies  []*zktest.Proxy
	client   *recipe.Client
	gate     gate
	// holding is set while the worker holds, critical while it is
	// between its read and its write (the counter) or in its writes (the
	// store): the nemesis pauses holders there.
	holding  atomic.Bool
	critical atomic.Bool
	hist     *History
	// lastOK is the time of the worker's last successful operation
	// (UnixNano), for the progress check.
	lastOK *atomic.Int64
}

// connect starts the worker's proxies and client.
func (w *worker) connect(ctx context.Context, e *zktest.Ensemble, session time.Duration) error {
	members := []int{w.member}
	if w.member < 0 {
		members = members[:0]
		for i := range e.Servers {
			members = append(members, i)
		}
	}
	var addrs []string
	for _, m := range members {
		p, err := zktest.NewProxy(e.Servers[m].Addr())
		if err != nil {
			return err
		}
		w.proxies = append(w.proxies, p)
		addrs = append(addrs, p.Addr())
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := recipe.Connect(cctx, addrs, recipe.WithSessionTimeout(session))
	if err != nil {
		return err
	}
	w.client = c
	return nil
}

func (w *worker) close() error {
	var errs []error
	if w.client != nil {
		errs = append(errs, w.client.Close())
	}
	for _, p := range w.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

func (w *worker) partition() {
	for _, p := range w.proxies {
		p.Partition()
	}
}

func (w *worker) heal() {
	for _, p := range w.proxies {
		p.Heal()
	}
}

// expire expires the worker's session (on whichever proxy carries it).
func (w *worker) expire() error {
	var errs []error
	for _, p := range w.proxies {
		if _, err := p.ExpireSessions(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pause stops the worker at its next pause point and silences its
// network, as a process paused by the machine would be.
func (w *worker) pause() {
	w.gate.close()
	w.partition()
}

func (w *worker) resume() {
	w.heal()
	w.gate.open()
}

// ok notes a successful operation at t.
func (w *worker) ok(t time.Time) {
	for {
		old := w.lastOK.Load()
		if t.UnixNano() <= old || w.lastOK.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// watchHold records the interval of a hold from start until release is
// closed (the holder let go) or done is (the holder was told it lost).
// It returns a function that ends the interval at release, to be called
// at the start of the Release call, and that waits for the record.
func (w *worker) watchHold(start time.Time, token int64, done <-chan struct{}) (release func()) {
	w.holding.Store(true)
	rel := make(chan time.Time, 1)
	recorded := make(chan struct{})
	session := w.client.SessionID()
	go func() {
		defer close(recorded)
		iv := Interval{Workload: w.workload, Worker: w.id, Key: w.key, Start: start, Token: token, Session: session}
		select {
		case t := <-rel:
			iv.End = t
		case <-done:
			iv.End, iv.Lost = time.Now(), true
		}
		w.holding.Store(false)
		w.hist.interval(iv)
	}()
	return func() {
		rel <- time.Now()
		<-recorded
	}
}
