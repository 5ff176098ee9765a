package zktest

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Ensemble is a ZooKeeper ensemble of real servers on 127.0.0.1, each with
// its own client, peer and election ports, data directory and myid.
// Servers[i] has myid i+1. Individual servers can be stopped, killed and
// started again to exercise leader loss and recovery.
type Ensemble struct {
	// Servers are the ensemble's members, in myid order.
	Servers []*Server
	opts    Options
}

// StartEnsemble starts an ensemble of n servers (normally 3) and waits
// until every server serves and exactly one of them is the leader. On
// failure every server is closed.
func StartEnsemble(n int, opts Options) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble of %d servers", n)
	}
	opts = opts.withDefaults()
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	peers := make([]peer, n)
	for i := range peers {
		peers[i] = peer{id: i + 1, peerPort: ports[3*i+1], electionPort: ports[3*i+2]}
	}
	e := &Ensemble{opts: opts}
	for i := 0; i < n; i++ {
		s, err := newServer(opts, ports[3*i], i+1, peers)
		if err != nil {
			_ = e.Close()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	// Launch all JVMs at once: members wait for each other to elect.
	for _, s := range e.Servers {
		if err := s.start(); err != nil {
			_ = e.Close()
			return nil, err
		}
	}
	if err := e.waitQuorum(opts.StartTimeout, true); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
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
// "Mode: leader". It fails if no running server, or more than one, does.
func (e *Ensemble) Leader() (int, error) {
	leader := -1
	for i, s := range e.Servers {
		if !s.Running() {
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
// every running server serves requests (srvr reports its mode). Stopped
// or killed servers are ignored. It fails after timeout, with every
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
	return errors.Join(errs...)
}
