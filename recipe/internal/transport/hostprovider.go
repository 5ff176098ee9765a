package transport

import (
	"context"
	"slices"
	"sync"

	"github.com/zkrecipes/zkrecipes/retry"
)

// hostProvider hands go-zookeeper the server to dial next. go-zookeeper's
// own provider makes it sleep a whole second each time it has tried every
// server in its list, which with one server is every reconnect: a dropped
// connection then costs a second even when the server answers at once.
// This one lets the first round of dials after a connection is lost go out
// at once, and paces every further round on the client's retry policy (at
// least minBackgroundWait apart), so a blip costs a round trip and a
// server that is really down is not hammered.
//
// A round is not paced after a server answered a connect request, even
// with "session expired": the next dial opens a new session at once. And no
// pause is longer than a third of the session timeout, so that a client
// whose server restarts is back before the restarted server expires its
// session (a pause of the retry policy's, up to 2s by default, could be the
// whole of a short session), and takes its lock again within the bound of
// docs/failure-model.md.
//
// It never reports a finished round to go-zookeeper (which would sleep its
// second and fail queued requests with ErrNoServer): requests wait for the
// reconnect, bounded by their callers' contexts. Once the client is closing
// it does, so that go-zookeeper notices and stops.
//
// The pacer, which is not safe for concurrent use, is touched only by Next,
// one call at a time (round), whichever goroutines go-zookeeper and the
// wire tap call from: answered only asks for a fresh schedule.
type hostProvider struct {
	t *Conn

	round sync.Mutex   // held through Next: the pacer is Next's alone
	pace  *retry.Pacer // the schedule of the rounds since the last connection

	mu      sync.Mutex
	servers []string
	next    int  // index of the server to dial next
	tried   int  // dials since the last connection
	fresh   bool // a server answered: the schedule starts afresh
}

// Init implements zk.HostProvider. Addresses are dialled as given (host
// names are resolved at every dial), in a random order so that clients
// spread over an ensemble.
func (h *hostProvider) Init(servers []string) error {
	h.round.Lock()
	defer h.round.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers = append([]string(nil), servers...)
	slices.Sort(h.servers) // go-zookeeper has shuffled them: only our shuffle decides
	h.t.shuffle(len(h.servers), func(i, j int) { h.servers[i], h.servers[j] = h.servers[j], h.servers[i] })
	h.pace = h.t.cfg.Backoff()
	return nil
}

// Len implements zk.HostProvider.
func (h *hostProvider) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// Next implements zk.HostProvider.
func (h *hostProvider) Next() (server string, retryStart bool) {
	h.round.Lock()
	defer h.round.Unlock()
	h.mu.Lock()
	if h.fresh {
		h.fresh = false
		h.pace.Reset()
	}
	if h.tried >= len(h.servers) {
		// A whole round of dials failed: wait before the next round.
		h.tried = 0
		pace := h.pace
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(h.t.lifetime, max(h.t.SessionTimeout()/3, minBackgroundWait))
		pace.Pause(ctx)
		cancel()
		closing := h.t.lifetime.Err() != nil
		h.mu.Lock()
		if closing {
			defer h.mu.Unlock()
			return h.servers[h.next], true
		}
	}
	defer h.mu.Unlock()
	server = h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	return server, h.t.lifetime.Err() != nil
}

// Connected implements zk.HostProvider: the next loss starts with an
// immediate round again.
func (h *hostProvider) Connected() { h.answered() }

// answered starts the schedule afresh once a server answered a connect
// request, whatever it said (go-zookeeper calls Connected only for a live
// session; the wire tap also calls this for "session expired").
func (h *hostProvider) answered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = 0
	h.fresh = true
}
