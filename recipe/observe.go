package recipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
)

// Permanent reports whether err is one that no retry can fix: trying the
// same thing again, on the same client, can only fail the same way until
// someone changes the setup. A loop that keeps going through connection
// trouble (leader.Election.Run, [Lock.Observe]) stops on such an error and
// reports it instead of retrying it forever. They are errors wrapping
//
//   - [ErrClosed]: the client was closed;
//   - [ErrPermission] (or go-zookeeper's zk.ErrNoAuth, zk.ErrAuthFailed):
//     the path's ACL does not grant this client's credentials what the
//     loop needs;
//   - [ErrMismatch]: the path is used by another kind of lock, or with
//     other parameters;
//   - [ErrInvalidArgument] (and so [ErrInvalidPath]): bad input;
//   - zk.ErrNoChildrenForEphemerals: the path lies under an ephemeral
//     node, which can have no children;
//   - zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrBadArguments: the server
//     refused the request itself (the client's ACL, see WithACL, is one it
//     does not accept).
//
// Everything else is not permanent: connection loss and session expiry
// (the client reconnects), retry.ErrGaveUp (the retry policy gave up on
// a connection loss; a loop that must not give up goes on), a node that
// vanished meanwhile, and errors this function does not know. Context
// errors are not permanent either: a loop checks its own context.
func Permanent(err error) bool {
	for _, target := range permanentErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

var permanentErrors = []error{
	ErrClosed, ErrPermission, ErrMismatch, ErrInvalidArgument,
	zk.ErrNoAuth, zk.ErrAuthFailed, zk.ErrNoChildrenForEphemerals,
	zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrBadArguments,
}

// lookAgain is a closed channel: a wait on it ends at once.
var lookAgain = func() chan zk.Event { c := make(chan zk.Event); close(c); return c }()

// Observer is a running observation of the head of a lock's queue (see
// [Lock.Observer]): C delivers the heads, and once C is closed, Err says
// why.
type Observer struct {
	// C delivers the current head, then each change of head: a new
	// node, or new data in the head's node. It is closed when the
	// observation ends.
	C <-chan Participant

	mu  sync.Mutex
	err error
}

// Err returns nil while the observation goes on. Once C is closed it
// says why: ctx.Err() when the context given to Observer ended, an
// error wrapping [ErrClosed] when the client was closed, or the error no
// retry can fix that ended the observation (see [Permanent]), such as one
// wrapping [ErrMismatch] (the directory is used by another kind of lock)
// or [ErrPermission] (the directory's or the head's ACL does not let this
// client read it).
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Observer watches the head of the lock's queue without joining it, and
// delivers on C the current head and every change of it, in order, until
// ctx ends, the client is closed or an error no retry can fix occurs
// ([Permanent]); then C is closed and [Observer.Err] says why. The head
// is the first node in line, Holder set: for a lock whose driver grants
// one holder at a time (a mutex, a leader election) it is the holder.
//
// It delivers the current head first (nothing while the queue is empty),
// then each new head, whose Token is greater than the previous
// delivery's, and each change of the head's data (a leader's
// Proclaim), with the same Token and Node as the previous delivery and
// the new Data. It never delivers the same node with the same data twice.
//
// It lists the directory, reads the first node with a data watch and
// delivers it if it is new or its data is; when that node's data changes
// it reads it again, and when the node is deleted (or the watch is lost)
// it lists again. While the queue is empty it watches the directory's
// children, and while the directory does not exist, the directory.
// Connection loss is retried until ctx ends, paced by [Client.Backoff].
// A ZooKeeper request still in flight when it stops ends in the
// background when its reply arrives, its connection drops or the client
// is closed; nothing else outlives C.
//
// Nodes of another kind of lock (see [driver.KindOf]) ahead of the head,
// or in a directory where nobody of this lock's queue is, end the
// observation with an error wrapping [ErrMismatch], as they make an
// acquire fail.
//
// The promise is the latest head, not every change: every delivery is a
// head the queue really had, later than the one before (never an older
// head after a newer one, never one twice), and after the last change the
// observer delivers the head that stays, one watch round trip later. It
// sees the head at the moments it looks: heads (and data) that come and
// go within one watch round trip (a deletion's notification plus the next
// listing and read), or while the receiver is not reading C, are not
// delivered; the next delivery is the head at that time. That round trip
// grows with the load: in TestObserveLatestAtScale, 1,000 observers on
// four clients of one server, with the head changing 10 times 300 ms
// apart, each delivered 10 or 11 of the 11 heads, and all the last one
// within 0.2 s of its change (under the race detector, 2 to 5 of them,
// and the last within 1.8 s).
//
// A nil ctx gives an error wrapping [ErrInvalidArgument], and no
// Observer.
func (l *Lock) Observer(ctx context.Context) (*Observer, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	out := make(chan Participant)
	o := &Observer{C: out}
	octx, cancel := context.WithCancelCause(ctx)
	go func() {
		defer close(out)
		defer cancel(nil)
		go func() {
			// Closing the client ends the observation.
			select {
			case <-l.c.lifetime.Done():
				cancel(ErrClosed)
			case <-octx.Done():
			}
		}()
		err := l.observe(octx, out)
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case err == nil: // octx ended, and ctx did not: the client closed
			err = context.Cause(octx)
		}
		if Permanent(err) { // ErrClosed among them
			err = fmt.Errorf("observe %s: %w", l.dir, err)
			if !errors.Is(err, ErrClosed) {
				l.c.log.Warn("observation ended", "path", l.dir, "err", err)
			}
		}
		o.mu.Lock()
		o.err = err
		o.mu.Unlock()
	}()
	return o, nil
}

// Observe is [Lock.Observer] returning only the channel: it delivers the
// head of the queue and each change of it until ctx ends, the client is
// closed or an error no retry can fix occurs ([Permanent]; such an error
// is logged on the client's logger at warn level), and is then closed.
// Use Observer to learn why it was closed.
func (l *Lock) Observe(ctx context.Context) (<-chan Participant, error) {
	o, err := l.Observer(ctx)
	if err != nil {
		return nil, err
	}
	return o.C, nil
}

// observe is Observer's loop. It returns nil when ctx ends, or the error
// no retry can fix that ended it.
func (l *Lock) observe(ctx context.Context, out chan<- Participant) error {
	var seen observed
	pace := l.c.Backoff()
	var reread string // the head whose data changed: read it again, no listing
	for ctx.Err() == nil {
		rewatch := l.c.rewatchChange() // see Client.rewatched
		h, err := l.look(ctx, reread)
		reread = ""
		if err != nil {
			if Permanent(err) {
				return err
			}
			if !pace.Pause(ctx) {
				return nil
			}
			continue
		}
		pace.Reset()
		deliver, same := seen.next(h)
		if same {
			seen.version = h.version // written again with the same data
		}
		if deliver {
			select {
			case out <- h.p:
				seen = observed{h.p, h.version}
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case ev := <-h.wake:
			if ev.Type == zk.EventNodeDataChanged && h.p.Node != "" {
				reread = h.p.Node
			}
		case <-rewatch:
			// The watch may have skipped a change: list again.
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// look reads the head of the queue: the node reread again when its data
// changed, else from a listing.
func (l *Lock) look(ctx context.Context, reread string) (head, error) {
	if reread != "" {
		return l.readHead(ctx, reread)
	}
	return l.head(ctx)
}

// observed is the last head observe delivered, and its data version.
type observed struct {
	last    Participant
	version int32
}

// next says what a look that found h means: deliver it (a new head, or new
// data of the same head: Proclaim), or only note its version (the same
// data written again), or neither (nobody in line, nothing new).
func (o observed) next(h head) (deliver, same bool) {
	p := h.p
	switch {
	case p.Node == "":
		return false, false
	case p.Token == o.last.Token && h.version > o.version && bytes.Equal(p.Data, o.last.Data):
		return false, true
	}
	return p.Token > o.last.Token || p.Token == o.last.Token && h.version > o.version, false
}

// head is what one look at the queue found: its first node (a zero
// Participant with nobody in line) and that node's data version, and a
// watch that fires when that may have changed.
type head struct {
	p       Participant
	version int32
	wake    <-chan zk.Event
}

// head reads the first node of the queue with a data watch.
func (l *Lock) head(ctx context.Context) (head, error) {
	names, err := l.c.children(ctx, l.dir)
	if errors.Is(err, zk.ErrNoNode) {
		// No directory (yet, or reaped when the last node left): wait for
		// it to appear.
		ok, _, ch, err := l.c.existsW(ctx, l.dir)
		switch {
		case err != nil:
			return head{}, opError("watch", l.dir, err)
		case ok:
			return head{wake: lookAgain}, nil
		}
		return head{wake: ch}, nil
	}
	if err != nil {
		return head{}, opError("list", l.dir, err)
	}
	sorted := driver.Sort(driver.Filter(names, l.queue...), l.queue...)
	if len(sorted) == 0 {
		if err := l.otherKindAhead(names, ""); err != nil {
			return head{}, err
		}
		// Nobody in line: list again with a watch that fires when someone
		// joins (or the directory goes).
		names, ch, err := l.c.childrenW(ctx, l.dir)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return head{wake: lookAgain}, nil
		case err != nil:
			return head{}, opError("list", l.dir, err)
		}
		if sorted = driver.Sort(driver.Filter(names, l.queue...), l.queue...); len(sorted) == 0 {
			if err := l.otherKindAhead(names, ""); err != nil {
				return head{}, err
			}
			return head{wake: ch}, nil
		}
	}
	if err := l.otherKindAhead(names, sorted[0]); err != nil {
		return head{}, err
	}
	return l.readHead(ctx, sorted[0])
}

// readHead reads the node first, the head of the queue, with a data watch.
// A node gone meanwhile has the caller look again at once.
func (l *Lock) readHead(ctx context.Context, first string) (head, error) {
	data, st, ch, err := l.c.getDataW(ctx, join(l.dir, first))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return head{wake: lookAgain}, nil // it left meanwhile
	case err != nil:
		return head{}, opError("read", join(l.dir, first), err)
	}
	seq, _ := driver.Sequence(first, l.queue...)
	return head{
		p: Participant{Node: first, LockName: lockNameOf(first, l.queue), Sequence: seq, Data: data,
			Session: st.EphemeralOwner, Token: st.Czxid, Created: time.UnixMilli(st.Ctime), Holder: true},
		version: st.Version,
		wake:    ch,
	}, nil
}

// otherKindAhead returns an error wrapping ErrMismatch when names hold a
// node of a kind the library knows that is not in the lock's queue and
// that is ahead of first, the head of the queue (with first "", anywhere):
// the directory is used by another kind of lock, as an acquire would find
// ([LockSpec].Queue).
func (l *Lock) otherKindAhead(names []string, first string) error {
	ours, _ := driver.Sequence(first, l.queue...)
	for _, n := range names {
		ln, kind, known := driver.KindOf(n)
		if !known || slices.Contains(l.queue, ln) {
			continue
		}
		if seq, ok := driver.Sequence(n, ln); first == "" || ok && seq < ours {
			return fmt.Errorf("%w (%w): in use as a %s lock (node %s); this is a %s lock (%s nodes)",
				ErrMismatch, errOtherKind, kind, Quote(n), l.spec.Recipe, l.spec.LockName)
		}
	}
	return nil
}
