package zktest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ensemble is a ZooKeeper ensemble of real servers on 127.0.0.1, each with
// its own client, peer and election ports, data directory and myid.
// Servers[i] has myid i+1. Members can be killed, stopped, frozen and
// restarted to exercise leader loss and recovery.
type Ensemble struct {
	// Servers are the ensemble's members, in myid order.
	Servers []*Server
	set     settings

	// links[i][j] are the proxies member i reaches member j through
	// (peers.go); blocked[i][j] is set while what i sends j is cut.
	links   [][]link
	linkMu  sync.Mutex
	blocked [][]bool
}

// StartEnsemble starts an ensemble of n servers (3 is the usual size) for
// the test, waits until every member serves and exactly one is the
// leader, and closes it when the test ends. An ensemble of three takes
// about two seconds to start. ZooKeeper is found as Start says (an
// ensemble always runs servers of its own: ZKTEST_ADDR does not apply);
// without an installation the test is skipped, or fails when
// ZKTEST_REQUIRED=1.
func StartEnsemble(t testing.TB, n int, opts ...Option) *Ensemble {
	t.Helper()
	skipShort(t)
	e, err := NewEnsemble(n, opts...)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("zktest: closing the ensemble: %v", err)
		}
	})
	return e
}

// NewEnsemble is StartEnsemble for programs without a testing.TB: the
// caller must Close the ensemble. On failure every server is closed.
func NewEnsemble(n int, opts ...Option) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble of %d servers", n)
	}
	set := newSettings(opts)
	if err := set.check(true); err != nil {
		return nil, err
	}
	inst, err := host.locate(set.classPath)
	if err != nil {
		return nil, err
	}
	// The ports are picked free, then given up for the servers to bind:
	// another process (or a link's listener) may take one meanwhile. A
	// member that found its port taken starts the ensemble again, on new
	// ports.
	for attempt := 1; ; attempt++ {
		e, err := startEnsemble(n, set, inst)
		if err == nil || attempt == 3 || !portTaken(err) {
			return e, err
		}
	}
}

// portTaken reports whether a start failed because a server found its
// port in use.
func portTaken(err error) bool {
	return strings.Contains(err.Error(), "java.net.BindException: Address already in use")
}

// startEnsemble is one attempt of NewEnsemble.
func startEnsemble(n int, set settings, inst installation) (*Ensemble, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	peers := make([]peer, n)
	for i := range peers {
		peers[i] = peer{id: i + 1, peerPort: ports[3*i+1], electionPort: ports[3*i+2]}
	}
	links, views, err := startLinks(peers)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{set: set, links: links, blocked: make([][]bool, n)}
	for i := range e.blocked {
		e.blocked[i] = make([]bool, n)
	}
	for i := 0; i < n; i++ {
		s, err := newServer(set, inst, ports[3*i], i+1, views[i])
		if err != nil {
			_ = e.Close()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	// Launch all JVMs at once: members wait for each other to elect.
	for _, s := range e.Servers {
		if err := s.launch(); err != nil {
			_ = e.Close()
			return nil, err
		}
	}
	if err := e.waitQuorum(set.startTimeout, true); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// member returns Servers[i], or an error for an index out of range.
func (e *Ensemble) member(i int) (*Server, error) {
	if i < 0 || i >= len(e.Servers) {
		return nil, fmt.Errorf("zktest: no server %d in an ensemble of %d", i, len(e.Servers))
	}
	return e.Servers[i], nil
}

// Kill kills server i (SIGKILL, no clean shutdown) and waits until it has
// exited. Its data is kept for Restart. It does not wait for the others
// to elect a new leader: WaitQuorum does.
func (e *Ensemble) Kill(i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	return s.Kill()
}

// Restart starts server i again with its data (stopping it first if it
// runs) and waits until the running members serve with one leader again.
func (e *Ensemble) Restart(i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	if err := s.Restart(); err != nil {
		return err
	}
	return e.WaitQuorum(e.set.startTimeout)
}

// Addrs returns the client addresses of all servers, running or not.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Leader returns the index in Servers of the server whose srvr reports
// "Mode: leader". It fails if no running server, or more than one, does
// (during an election, for example: WaitQuorum first).
func (e *Ensemble) Leader() (int, error) {
	leader := -1
	for i, s := range e.Servers {
		if !s.Running() || s.Frozen() {
			continue
		}
		if s.mode() == "leader" {
			if leader >= 0 {
				return -1, fmt.Errorf("zktest: servers %d and %d both report Mode: leader", leader, i)
			}
			leader = i
		}
	}
	if leader < 0 {
		return -1, errors.New("zktest: no server reports Mode: leader")
	}
	return leader, nil
}

// WaitQuorum waits until exactly one running server is the leader and
// every running server serves requests (srvr reports its mode). Stopped,
// killed and frozen servers are ignored; a member cut off by Partition
// does not serve, so WaitQuorum waits for Heal. It fails after timeout, with every
// server's state in the error.
func (e *Ensemble) WaitQuorum(timeout time.Duration) error {
	return e.waitQuorum(timeout, false)
}

// waitQuorum is WaitQuorum; with all, every server must be running (a
// server that exits fails the wait at once, with its log).
func (e *Ensemble) waitQuorum(timeout time.Duration, all bool) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state, dead := e.quorumState()
		if all && dead != nil {
			return fmt.Errorf("zktest: ensemble server %s exited during start-up%s", dead.Addr(), dead.logTail())
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("zktest: ensemble has no serving quorum after %v: %s", timeout, state)
			if all {
				// Show what the members were doing.
				for _, s := range e.Servers {
					err = fmt.Errorf("%w%s", err, s.logTail())
				}
			}
			return err
		}
		time.Sleep(pollInterval)
	}
}

// quorumState reports whether the running servers all serve with exactly
// one leader, a description of every server, and the first server that is
// not running.
func (e *Ensemble) quorumState() (ok bool, state string, dead *Server) {
	leaders, running, serving := 0, 0, 0
	var desc []string
	for i, s := range e.Servers {
		if !s.Running() {
			desc = append(desc, fmt.Sprintf("%d(%s)=down", i, s.Addr()))
			if dead == nil {
				dead = s
			}
			continue
		}
		if s.Frozen() {
			desc = append(desc, fmt.Sprintf("%d(%s)=frozen", i, s.Addr()))
			continue
		}
		running++
		m := s.mode()
		if m == "" {
			desc = append(desc, fmt.Sprintf("%d(%s)=not serving", i, s.Addr()))
			continue
		}
		desc = append(desc, fmt.Sprintf("%d(%s)=%s", i, s.Addr(), m))
		serving++
		if m == "leader" {
			leaders++
		}
	}
	ok = running > 0 && serving == running && leaders == 1
	return ok, strings.Join(desc, ", "), dead
}

// Close stops every server and removes their directories.
func (e *Ensemble) Close() error {
	var errs []error
	// Stop in parallel: a stopping member may wait for its peers.
	ch := make(chan error, len(e.Servers))
	for _, s := range e.Servers {
		go func() { ch <- s.Close() }()
	}
	for range e.Servers {
		if err := <-ch; err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, e.closeLinks())
	return errors.Join(errs...)
}
