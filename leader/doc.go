// Package leader is leader election on ZooKeeper: of all the participants
// on one path, one at a time leads, and when it stops, fails or is cut off,
// the next in line takes over. It uses the node layout of Curator's
// LeaderLatch: protected ephemeral sequential "latch-" nodes, ordered by
// sequence, with the participant's id as data. [WithMutexNodes] uses the
// mutex's "lock-" nodes instead, the layout of a singleton held with a lock
// (go-zookeeper's zk.Lock, Curator's LeaderSelector), so that such a
// singleton moves to Run one process at a time.
//
// Most services use [Election.Run], which campaigns, runs the leader's work
// with a context that is cancelled the moment leadership is lost, and
// campaigns again afterwards:
//
//	e, err := leader.New(client, "/services/billing/leader", leader.WithData([]byte("billing-7")))
//	if err != nil { ... }
//	err = e.Run(ctx, func(ctx context.Context) error {
//		// Leading until ctx is cancelled. Pass e.Token() to every system
//		// written to, so that it can refuse a deposed leader.
//		return billing.Loop(ctx, e.Token())
//	})
//	// err is ctx.Err() once ctx ends.
//
// [Election.Campaign] and [Election.Resign] are the same steps by hand,
// [Election.Observe] tells anyone, participant or not, who leads, and
// [Election.Proclaim] lets the leader change the data they see, in one
// write fenced to its term.
//
// # How it works
//
// Each participant creates an EPHEMERAL_SEQUENTIAL node
// _c_<uuid>-latch-<sequence> under the path (a CONTAINER node) holding its
// id, and the participant whose node is first in sequence order leads. Each
// of the others watches only the node just ahead of it, so a change of
// leader wakes one participant, not all of them. The package adds no wait
// loop of its own: it is the shared lock engine ([recipe.Lock]) with the
// mutex driver, plus [Election.Run] and [Election.Observe].
//
// # Guarantees
//
//   - At most one leader at a time, among all participants on the path, as
//     long as sessions are live and a leader stops when told (below).
//   - Loss is signalled: [Election.Done] is closed and [Election.Err] says
//     why (and [Election.Context], of which Run's term context is one, is
//     cancelled with the reason as its cause) when the session
//     expires, the node is deleted by someone else, the client is closed,
//     or the connection has been silent long enough (by default half the
//     session timeout) that the server might expire the session. Under
//     network silence that is before the server could let the next
//     participant lead. When the server ends the session itself, or
//     someone else deletes the node, the next participant may lead first
//     and the old leader is told one notification later (milliseconds on
//     a LAN): in that gap [Election.Commit] refuses its writes and its
//     token is lower than the next leader's. See docs/leader.md.
//   - Failover: when a leader resigns or its client closes, the next
//     participant leads within one watch notification and one round trip.
//     When a leader's process dies or is cut off without closing, the next
//     leads once the server expires its session: within the session timeout
//     (plus the server's expiry tick).
//   - Fencing: [Election.Token] is the czxid of the leader's node, strictly
//     increasing from one term to the next across the ensemble.
//   - Order: participants lead in the order they campaigned; one that
//     resigns and campaigns again goes to the back of the line.
//   - Context first: Campaign waits until elected or ctx ends; a failed or
//     cancelled Campaign leaves no node behind.
//
// # Non-guarantees
//
// ZooKeeper cannot stop a process. A leader that is paused (a long garbage
// collection, swapping, a stopped virtual machine) past its session timeout
// may wake up and act before its own client has noticed that the session
// expired and another participant leads: Done cannot be closed, nor a
// context cancelled, while the process is not running. Likewise a leader
// whose code ignores its cancelled context goes on acting. At-most-one
// leader therefore holds for what the participants believe, not for what
// reaches the systems they write to. Only those systems can close the gap:
// pass the term's token with every write and have them refuse a token lower
// than one they have already seen (a fencing token). With that, a deposed
// leader's late writes are refused instead of corrupting state.
//
// Loss is judged by the client's clock and the server's; both must run at
// roughly the same rate. Leadership is not handed over on a schedule: a
// leader leads until it resigns or fails, so a participant that must
// eventually lead should ensure the others resign (Run resigns whenever its
// function returns).
//
// # Run
//
// Run loops until its context ends: campaign; when elected, call the
// function with a term context; when the function returns or leadership is
// lost (the term context is then cancelled, with the reason as its
// [context.Cause]), resign and campaign again. Errors from the function are
// logged (see [WithLogger]) and followed by a pause that grows with each
// consecutive error, on the schedule of the client's retry policy
// (recipe.WithRetryPolicy), at least 100ms, keeping its last pace where the
// policy would give up. Run returns ctx.Err() when its context ends, after
// resigning, so that no node outlives it.
//
// A panic in the function is not recovered: it goes on to Run's caller,
// after Run cancelled the term's context and resigned on the way out, so
// that the next participant leads at once.
//
// # Errors no retry can fix
//
// Run and Observe keep going through connection loss, session expiry and
// errors they do not know. They stop on errors no retry can fix (see
// recipe.Permanent), and report them: the client was closed
// (recipe.ErrClosed), the path is used by another kind of lock, such as a
// mutex (recipe.ErrMismatch), its ACL refuses this client
// (recipe.ErrPermission), bad input (recipe.ErrInvalidArgument), or the
// server refused the request itself (the path lies under an ephemeral
// node, an ACL it does not accept). Run returns such an error from the
// first campaign that meets it; Observe closes its channel, and
// [Observer.Err] returns the error. Errors returned by Run's function
// never end Run.
//
// # Observe
//
// Observe delivers each new leader, in order, without duplicates, with
// strictly increasing tokens, and each change of the current leader's data
// again, with the same token. It looks again each time the leader's node
// is deleted, so two changes within one watch round trip are seen as one:
// the observer sees only the later leader. [Election.Observer] is the same
// with the reason the observation ended.
package leader
