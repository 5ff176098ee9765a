package recipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// lookAgain is a closed channel: a wait on it ends at once.
var lookAgain = func() chan zk.Event { c := make(chan zk.Event); close(c); return c }()

// Observe watches the head of the lock's queue without joining it, and
// delivers every new head it sees, in order, until ctx ends or the client
// is closed; then the channel is closed. The head is the first node in
// line, Holder set: for a lock whose driver grants one holder at a time
// (a mutex, a leader election) it is the holder. It delivers the current
// head first (nothing while the queue is empty), never the same node
// twice, and each delivery's Token is greater than the previous one's.
//
// It lists the directory, reads the first node with a data watch and
// delivers it if it is new; when that node is deleted (or the watch is
// lost) it looks again. While the queue is empty it watches the
// directory's children, and while the directory does not exist, the
// directory. Connection loss is retried until ctx ends, paced by
// [Client.Backoff]. A ZooKeeper request still in flight when it stops
// ends in the background when its reply arrives, its connection drops or
// the client is closed; nothing else outlives the channel.
//
// The limit: it sees the head at the moments it looks. Heads that come and
// go within one watch round trip (a deletion's notification plus the next
// listing and read), or while the receiver is not reading the channel,
// are not delivered: the next delivery is the head at that time.
func (l *Lock) Observe(ctx context.Context) (<-chan Participant, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	out := make(chan Participant)
	octx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(out)
		defer cancel()
		go func() {
			// Closing the client ends the observation.
			select {
			case <-l.c.lifetime.Done():
				cancel()
			case <-octx.Done():
			}
		}()
		l.observe(octx, out)
	}()
	return out, nil
}

// observe is Observe's loop.
func (l *Lock) observe(ctx context.Context, out chan<- Participant) {
	var last int64 // token of the last delivery
	pace := l.c.Backoff()
	for ctx.Err() == nil {
		head, wake, err := l.head(ctx)
		if err != nil {
			if !pace.Pause(ctx) {
				return
			}
			continue
		}
		pace.Reset()
		if head.Node != "" && head.Token > last {
			select {
			case out <- head:
				last = head.Token
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// head reads the first node of the queue with a data watch, and returns it
// and the watch. With nobody in line it returns a zero Participant and a
// watch that fires when that may have changed.
func (l *Lock) head(ctx context.Context) (Participant, <-chan zk.Event, error) {
	names, err := l.c.children(ctx, l.dir)
	if errors.Is(err, zk.ErrNoNode) {
		// No directory (yet, or reaped when the last node left): wait for
		// it to appear.
		ok, _, ch, err := l.c.existsW(ctx, l.dir)
		switch {
		case err != nil:
			return Participant{}, nil, err
		case ok:
			return Participant{}, lookAgain, nil
		}
		return Participant{}, ch, nil
	}
	if err != nil {
		return Participant{}, nil, err
	}
	sorted := driver.Sort(driver.Filter(names, l.queue...), l.queue...)
	if len(sorted) == 0 {
		// Nobody in line: list again with a watch that fires when someone
		// joins (or the directory goes).
		names, ch, err := l.c.childrenW(ctx, l.dir)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return Participant{}, lookAgain, nil
		case err != nil:
			return Participant{}, nil, err
		}
		if sorted = driver.Sort(driver.Filter(names, l.queue...), l.queue...); len(sorted) == 0 {
			return Participant{}, ch, nil
		}
	}
	first := sorted[0]
	data, st, ch, err := l.c.getDataW(ctx, join(l.dir, first))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return Participant{}, lookAgain, nil // it left meanwhile
	case err != nil:
		return Participant{}, nil, err
	}
	seq, _ := driver.Sequence(first, l.queue...)
	return Participant{Node: first, LockName: lockNameOf(first, l.queue), Sequence: seq, Data: data,
		Session: st.EphemeralOwner, Token: st.Czxid, Created: time.UnixMilli(st.Ctime), Holder: true}, ch, nil
}
