package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// lookAgain is a closed channel: a wait on it ends at once.
var lookAgain = func() chan zk.Event { c := make(chan zk.Event); close(c); return c }()

// Observe watches the election and delivers every change of leader it sees,
// in order, until ctx ends or the client is closed; then the channel is
// closed. (A ZooKeeper request still in flight at that moment ends in the
// background when its reply arrives, its connection drops or the client is
// closed; nothing else outlives the channel.) It works on any
// handle, whether it campaigns or not, and delivers the current leader
// first (nothing while nobody campaigns).
//
// No leader is delivered twice, and each delivery's Token is greater than
// the previous one's: a participant that resigns and is elected again is a
// new delivery, with a new token.
//
// How it works: it lists the path, reads the first participant's node with
// a data watch and delivers it if it is new; when that node is deleted (or
// the watch is lost), it looks again. While nobody campaigns it watches the
// path's children instead, and while the path does not exist, the path.
// Connection loss is retried until ctx ends, paced by the client's retry
// policy (see recipe.WithRetryPolicy).
//
// The limit: Observe sees the leader at the moments it looks. If
// leadership changes twice within one watch round trip (the notification
// of a deletion plus the next listing and read), or while the receiver is
// not reading from the channel (Observe does not look again until its last
// delivery was received), the leaders in between are not delivered: the
// next delivery is the leader current at that time. A leader is reported as
// soon as ZooKeeper puts its node first, which can be slightly before the
// participant learns it leads, and until the server deletes its node, which
// for a participant whose process died or was cut off is when its session
// expires.
//
// A nil ctx gives an error wrapping recipe.ErrInvalidArgument, and no
// channel.
func (e *Election) Observe(ctx context.Context) (<-chan Participant, error) {
	if ctx == nil {
		return nil, fmt.Errorf("leader: observe: %w: nil context", recipe.ErrInvalidArgument)
	}
	out := make(chan Participant)
	octx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(out)
		defer cancel()
		go func() {
			// Closing the client ends the observation.
			select {
			case <-engine.Of(e.c).Done():
				cancel()
			case <-octx.Done():
			}
		}()
		e.observe(octx, out)
	}()
	return out, nil
}

// observe is Observe's loop.
func (e *Election) observe(ctx context.Context, out chan<- Participant) {
	var last int64 // token of the last delivery
	pace := engine.Of(e.c).Backoff()
	for ctx.Err() == nil {
		info, wake, err := e.head(ctx)
		if err != nil {
			if !pace.Pause(ctx) {
				return
			}
			continue
		}
		pace.Reset()
		if info.Node != "" && info.Token > last {
			select {
			case out <- info:
				last = info.Token
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

// head reads the first participant's node with a data watch, and returns
// it and the watch. With nobody in line it returns a zero Participant and
// a watch that fires when that may have changed.
func (e *Election) head(ctx context.Context) (Participant, <-chan zk.Event, error) {
	dir := e.Path()
	zc := engine.Of(e.c)
	names, err := zc.Children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		// No directory (yet, or reaped when the last participant left):
		// wait for it to appear.
		ok, _, ch, err := zc.ExistsW(ctx, dir)
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
	sorted := driver.Sort(driver.Filter(names, LockName), LockName)
	if len(sorted) == 0 {
		// Nobody in line: list again with a watch that fires when someone
		// joins (or the directory goes).
		names, ch, err := zc.ChildrenW(ctx, dir)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return Participant{}, lookAgain, nil
		case err != nil:
			return Participant{}, nil, err
		}
		if sorted = driver.Sort(driver.Filter(names, LockName), LockName); len(sorted) == 0 {
			return Participant{}, ch, nil
		}
	}
	first := sorted[0]
	data, st, ch, err := zc.GetW(ctx, dir+"/"+first)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return Participant{}, lookAgain, nil // it left meanwhile
	case err != nil:
		return Participant{}, nil, err
	}
	seq, _ := driver.Sequence(first, LockName)
	return Participant{Node: first, LockName: LockName, Sequence: seq, Data: data,
		Session: st.EphemeralOwner, Token: st.Czxid, Created: time.UnixMilli(st.Ctime), Holder: true}, ch, nil
}
