package recipe

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// go-zookeeper's requests block until their reply and take no context. So
// that a caller can stop waiting when its context ends, every request runs
// on one of the client's workers while the caller waits for it or for its
// context. (A caller whose context can never end, such as
// context.Background(), makes the call itself: see callTracked.)
//
// Workers are kept for reuse: a request hands itself to an idle worker (a
// channel send, no goroutine started), and only when none is idle is a new
// one started, up to maxWorkers. Beyond that, requests wait in a backlog
// that workers take from before they go idle, so a burst of thousands of
// acquires costs maxWorkers goroutines, not one per request in flight; a
// request whose caller gave up while it waited there is never sent.
// maxWorkers requests in flight on one connection keep a server busy: it
// answers a session's requests in order, one after the other.
//
// A worker that finds maxIdleWorkers idle already, or stays idle for
// workerIdleTime, ends: an idle client keeps no worker for long. Close
// ends the idle ones and waits for the busy ones, whose requests
// go-zookeeper fails once the connection is closed.
const (
	maxWorkers     = 64
	maxIdleWorkers = 4
	workerIdleTime = 5 * time.Second
)

// running is a go-zookeeper call handed to a worker.
type running struct {
	op        func() error
	done      chan struct{} // closed once op has returned (or was dropped)
	err       error         // op's result, once done is closed
	abandoned atomic.Bool   // the caller stopped waiting: drop it if not sent yet
}

// errAbandoned is the error of a request dropped from the backlog because
// its caller had stopped waiting; nobody reads it but cleanup, which knows
// the request may not have been sent.
var errAbandoned = errors.New("request abandoned before it was sent")

// workers is the client's pool of workers.
type workers struct {
	jobs    chan *running // hands a request to an idle worker
	mu      sync.Mutex
	idle    int // parked workers no request has claimed
	busy    int // workers alive
	backlog []*running
	closed  bool
}

// start runs op on a worker of the client's.
func (c *Client) start(op func() error) *running {
	r := &running{op: op, done: make(chan struct{})}
	p := &c.workers
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		r.err = ErrClosed
		close(r.done)
	case p.idle > 0:
		p.idle-- // claims a parked worker, which will take it
		p.mu.Unlock()
		p.jobs <- r
	case p.busy < maxWorkers:
		p.busy++
		p.mu.Unlock()
		if !c.goroutine(func() { c.work(r) }) {
			p.mu.Lock()
			p.busy--
			p.mu.Unlock()
			r.err = ErrClosed
			close(r.done)
		}
	default:
		p.backlog = append(p.backlog, r)
		p.mu.Unlock()
	}
	return r
}

// closeWorkers has the pool start nothing more; the idle workers end.
func (c *Client) closeWorkers() {
	p := &c.workers
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// work runs r, then further requests for as long as the client needs it.
func (c *Client) work(r *running) {
	p := &c.workers
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r.run()
		var park bool
		if r, park = p.next(); r != nil {
			continue // from the backlog
		}
		if !park {
			return
		}
		if timer == nil {
			timer = time.NewTimer(workerIdleTime)
		} else {
			timer.Reset(workerIdleTime)
		}
		if r = p.park(timer.C, c.lifetime.Done()); r == nil {
			return
		}
	}
}

// next returns a request of the backlog. When there is none, it counts
// the worker idle and reports park, or, when the worker is not needed (as
// many idle already, or the client closed), takes it out of the pool.
func (p *workers) next() (r *running, park bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.backlog) > 0 {
		r := p.backlog[0]
		p.backlog[0] = nil
		if p.backlog = p.backlog[1:]; len(p.backlog) == 0 {
			p.backlog = nil
		}
		if r.abandoned.Load() {
			r.err = errAbandoned
			close(r.done)
			continue
		}
		return r, false
	}
	if p.closed || p.idle >= maxIdleWorkers {
		p.busy--
		return nil, false
	}
	p.idle++
	return nil, true
}

// park waits, idle, for a request. It returns nil when the worker leaves
// the pool: it was idle for workerIdleTime, or the client closed. Workers
// are alike: the parked ones are as many as the requests that claimed one
// (see start) and are on their way, plus idle; so a worker may leave while
// idle is positive, and otherwise waits for the request on its way.
func (p *workers) park(timeout <-chan time.Time, closing <-chan struct{}) *running {
	select {
	case r := <-p.jobs:
		return r
	case <-timeout:
	case <-closing:
	}
	p.mu.Lock()
	if p.idle > 0 {
		p.idle--
		p.busy--
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return <-p.jobs
}

func (r *running) run() {
	r.err = r.op()
	r.op = nil
	close(r.done)
}
