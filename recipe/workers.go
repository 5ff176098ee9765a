package recipe

import (
	"errors"
	"sync"
	"sync/atomic"
)

// go-zookeeper's requests block until their reply and take no context. So
// that a caller can stop waiting when its context ends, every request runs
// on one of the client's workers while the caller waits for it or for its
// context. (A caller whose context can never end, such as
// context.Background(), makes the call itself: see callTracked.)
//
// Workers are kept for reuse: a request is handed to an idle worker (a
// send on that worker's own channel, no goroutine started), and only when
// none is idle is a new one started, up to maxWorkers. Beyond that,
// requests wait in a backlog that workers take from before they go idle,
// so a burst of thousands of acquires costs maxWorkers goroutines, not one
// per request in flight; a request whose caller gave up while it waited
// there is never sent. maxWorkers requests in flight on one connection
// keep a server busy: it answers a session's requests in order.
//
// A worker that finds maxIdleWorkers idle already ends, so a burst leaves
// at most maxIdleWorkers behind, parked on a channel receive each (no
// timer). Close ends the idle ones and waits for the busy ones, whose
// requests go-zookeeper fails once the connection is closed.
const (
	maxWorkers     = 64
	maxIdleWorkers = 4
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
	mu      sync.Mutex
	idle    []chan *running // parked workers, the last parked last
	busy    int             // workers alive, idle ones included
	backlog []*running
	closed  bool
}

// start runs op on a worker of the client's.
func (c *Client) start(op func() error) *running {
	r := &running{op: op, done: make(chan struct{})}
	c.hand(r, true)
	return r
}

// spawn runs f on a worker that can take it now, an idle one or a new one,
// and on a goroutine of its own when the pool is full: what a worker waits
// for must never wait in the backlog behind that worker. (The reads sent
// behind a create run so, while the create's worker waits for them.)
func (c *Client) spawn(f func()) {
	r := &running{op: func() error { f(); return nil }, done: make(chan struct{})}
	if !c.hand(r, false) {
		go f()
	}
}

// hand gives r to an idle worker or a new one; when there is neither, it
// puts r in the backlog if it may wait, or reports false. A closed client
// fails r with ErrClosed if it may wait, and reports false if not.
func (c *Client) hand(r *running, mayWait bool) bool {
	p := &c.workers
	p.mu.Lock()
	switch {
	case p.closed && !mayWait:
		p.mu.Unlock()
		return false
	case p.closed:
		p.mu.Unlock()
		r.err = ErrClosed
		close(r.done)
	case len(p.idle) > 0:
		w := p.idle[len(p.idle)-1] // the one parked last: its stack is warm
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		w <- r // buffered: never blocks
	case p.busy < maxWorkers:
		p.busy++
		p.mu.Unlock()
		if !c.goroutine(func() { c.work(r) }) {
			p.mu.Lock()
			p.busy--
			p.mu.Unlock()
			if !mayWait {
				return false
			}
			r.err = ErrClosed
			close(r.done)
		}
	case mayWait:
		p.backlog = append(p.backlog, r)
		p.mu.Unlock()
	default:
		p.mu.Unlock()
		return false
	}
	return true
}

// closeWorkers has the pool start nothing more and ends the idle workers.
func (c *Client) closeWorkers() {
	p := &c.workers
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.idle {
		w <- nil
	}
	p.busy -= len(p.idle)
	p.idle = nil
}

// work runs r, then further requests for as long as the client needs it.
func (c *Client) work(r *running) {
	p := &c.workers
	var mine chan *running // this worker's channel, made when it first parks
	for r != nil {
		r.err = r.op()
		r.op = nil
		close(r.done)
		r = p.next(&mine)
		if r == nil && mine != nil {
			r = <-mine // parked; nil: the client closed
		}
	}
}

// next returns a request of the backlog. When there is none, it parks the
// worker (its channel, made on first use, joins idle) and returns nil, or,
// when the worker is not needed (as many idle already, or the client
// closed), takes it out of the pool and sets *mine to nil.
func (p *workers) next(mine *chan *running) *running {
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
		return r
	}
	if p.closed || len(p.idle) >= maxIdleWorkers {
		p.busy--
		*mine = nil
		return nil
	}
	if *mine == nil {
		*mine = make(chan *running, 1)
	}
	p.idle = append(p.idle, *mine)
	return nil
}
