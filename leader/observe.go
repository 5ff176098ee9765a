package leader

import (
	"context"
	"fmt"
)

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
	ch, err := e.lk.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: observe: %w", err)
	}
	return ch, nil
}
