package leader

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Observer is a running observation of the election, made by
// [Election.Observer]: its channel C delivers the leaders, and once C is
// closed, its Err method says why the observation ended.
type Observer = recipe.Observer

// Observer watches the election and delivers on C every change of leader
// it sees, in order, and every [Election.Proclaim] of the current leader,
// until ctx ends, the client is closed or an error no retry can fix
// occurs; then C is closed and Err says why: ctx.Err(), an error wrapping
// recipe.ErrClosed, or the permanent error (see recipe.Permanent), such
// as one wrapping recipe.ErrMismatch when the path is used by another
// kind of lock (a mutex, say), or recipe.ErrPermission when the path's
// ACL does not let this client read it. (A ZooKeeper request still in
// flight at that moment ends in the background when its reply arrives,
// its connection drops or the client is closed; nothing else outlives C.)
// It works on any handle, whether it campaigns or not, and delivers the
// current leader first (nothing while nobody campaigns).
//
// A new leader's Token is greater than the previous delivery's: a
// participant that resigns and is elected again is a new delivery, with a
// new token. A delivery with the same Token as the previous one is the
// same leader, whose data was changed by [Election.Proclaim]; its Data is
// the new data. Nothing is delivered twice.
//
// How it works: it lists the path, reads the first participant's node
// with a data watch and delivers it if it is new; when that node's data
// changes it reads it again, and when the node is deleted (or the watch
// is lost), it lists again. While nobody campaigns it watches the path's
// children instead, and while the path does not exist, the path.
// Connection loss is retried until ctx ends, paced by the client's retry
// policy (see recipe.WithRetryPolicy).
//
// The limit: Observer sees the leader at the moments it looks. If
// leadership (or the leader's data) changes twice within one watch round
// trip (the notification plus the next listing and read), or while the
// receiver is not reading from C (Observer does not look again until its
// last delivery was received), the values in between are not delivered:
// the next delivery is the leader current at that time. A leader is
// reported as soon as ZooKeeper puts its node first, which can be
// slightly before the participant learns it leads, and until the server
// deletes its node, which for a participant whose process died or was cut
// off is when its session expires.
//
// A nil ctx gives an error wrapping recipe.ErrInvalidArgument, and no
// Observer.
func (e *Election) Observer(ctx context.Context) (*Observer, error) {
	o, err := e.lk.Observer(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: observe: %w", err)
	}
	return o, nil
}

// Observe is [Election.Observer] returning only the channel, C: it
// delivers the leader and every change of it (new leaders, and new data
// proclaimed by the leader) until ctx ends, the client is closed or an
// error no retry can fix occurs (logged at warn level on the client's
// logger, see recipe.WithLogger), and is then closed. Use Observer to
// learn why it was closed.
func (e *Election) Observe(ctx context.Context) (<-chan Participant, error) {
	o, err := e.Observer(ctx)
	if err != nil {
		return nil, err
	}
	return o.C, nil
}
