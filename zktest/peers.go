package zktest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// How the members of an ensemble reach each other.
//
// Every member has its own zoo.cfg. Its own server.N line names its real
// quorum and election ports; the line of every other member names two
// byte-level proxies of the kit (NewByteProxy) that forward to that
// member's real ports. So every connection member i opens to member j
// (a follower to its leader's quorum port, election traffic both ways)
// passes through links[i][j], and the kit can cut it: 2·n·(n−1) proxies,
// 12 for three members, 40 for five. Dynamic reconfiguration is off
// (reconfigEnabled=false), so no member adopts another's view of the
// addresses.
//
// A member that receives an election connection from a member with a
// lower id closes it and connects back to the address the lower member
// announced in its first message (ZooKeeper's QuorumCnxManager). That
// address is the lower member's real election port, which would bypass
// the proxies, so the election proxies rewrite it into the address of the
// proxy the higher member must use (electionGreeting).

// link is the pair of proxies member from dials member to through.
type link struct {
	quorum, election *Proxy
}

// electionVersions are the protocol versions of the first message of an
// election connection that carry the sender's address
// (QuorumCnxManager.PROTOCOL_VERSION_V1 and V2).
const (
	electionProtocolV1 = -65536
	electionProtocolV2 = -65535
	// maxElectionAddr bounds the announced address the proxy reads.
	maxElectionAddr = 4096
)

// electionGreeting returns a greet function for an election proxy: it
// reads the first message (version, sid, address) and returns it with
// the address replaced by announce. A first message of an older protocol
// (a bare sid) passes unchanged.
func electionGreeting(announce string) func(*bufio.Reader) ([]byte, error) {
	return func(r *bufio.Reader) ([]byte, error) {
		var head [20]byte
		if _, err := io.ReadFull(r, head[:8]); err != nil {
			return nil, err
		}
		v := int64(binary.BigEndian.Uint64(head[:8]))
		if v != electionProtocolV1 && v != electionProtocolV2 {
			return head[:8:8], nil
		}
		if _, err := io.ReadFull(r, head[8:20]); err != nil {
			return nil, err
		}
		n := int32(binary.BigEndian.Uint32(head[16:20]))
		if n < 0 || n > maxElectionAddr {
			return nil, fmt.Errorf("zktest: election message announces an address of %d bytes", n)
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return nil, err
		}
		out := make([]byte, 20, 20+len(announce))
		copy(out, head[:16])
		binary.BigEndian.PutUint32(out[16:20], uint32(len(announce)))
		return append(out, announce...), nil
	}
}

// startLinks starts the proxies between n members whose real quorum and
// election ports are real[i] (with id 0), and returns them with the
// peers each member's zoo.cfg lists.
func startLinks(real []peer) ([][]link, [][]peer, error) {
	n := len(real)
	links := make([][]link, n)
	for i := range links {
		links[i] = make([]link, n)
	}
	// The quorum proxies first, then the election proxies, whose greeting
	// needs the address of the proxy in the other direction: listen first
	// and learn the ports, then wire the greetings.
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			l, err := newLink(real[j])
			if err != nil {
				closeLinkProxies(links)
				return nil, nil, err
			}
			links[i][j] = l
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				// What i announces to j must be where j reaches i.
				e := links[i][j].election
				e.mu.Lock()
				e.greet = electionGreeting(links[j][i].election.Addr())
				e.mu.Unlock()
			}
		}
	}
	return links, peerViews(real, links), nil
}

// newLink starts the quorum and election proxies to member to.
func newLink(to peer) (link, error) {
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	q, err := NewByteProxy(addr(to.peerPort))
	if err != nil {
		return link{}, err
	}
	e, err := NewByteProxy(addr(to.electionPort))
	if err != nil {
		_ = q.Close()
		return link{}, err
	}
	return link{quorum: q, election: e}, nil
}

// closeLinkProxies closes the proxies of links started so far.
func closeLinkProxies(links [][]link) {
	for _, row := range links {
		for _, l := range row {
			for _, p := range []*Proxy{l.quorum, l.election} {
				if p != nil {
					_ = p.Close()
				}
			}
		}
	}
}

// peerViews returns the peers each member's zoo.cfg lists: itself at its
// real ports, every other member at the ports of its proxies to it.
func peerViews(real []peer, links [][]link) [][]peer {
	n := len(real)
	views := make([][]peer, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			p := peer{id: j + 1, peerPort: real[j].peerPort, electionPort: real[j].electionPort}
			if i != j {
				p.peerPort = links[i][j].quorum.ln.Addr().(*net.TCPAddr).Port
				p.electionPort = links[i][j].election.ln.Addr().(*net.TCPAddr).Port
			}
			views[i] = append(views[i], p)
		}
	}
	return views
}

// closeLinks closes every proxy between the members.
func (e *Ensemble) closeLinks() error {
	var errs []error
	for _, row := range e.links {
		for _, l := range row {
			for _, p := range []*Proxy{l.quorum, l.election} {
				if p != nil {
					errs = append(errs, p.Close())
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Partition cuts the network between the members in a and those in b
// (indexes into Servers), in both directions: no byte of the quorum or
// election traffic between a member of a and a member of b gets through,
// while the TCP connections stay open, as in a real partition. Links
// within a group, and members in neither group, are not touched;
// partitions add up until Heal. A member of a group that is a minority
// stops serving its clients once it notices (ZooKeeper's syncLimit, about
// two seconds here), and its clients' sessions expire on the majority
// side after their timeout; the majority elects a leader among itself if
// the leader is not in it.
//
// Clients are not affected: put a Proxy between a client and a member
// (Server.Proxy) for that, or use MemberClient for a client that can
// reach one member only.
func (e *Ensemble) Partition(a, b []int) error {
	if err := e.cut(a, b, true); err != nil {
		return err
	}
	return e.cut(b, a, true)
}

// PartitionOneWay cuts the messages that members in from send to members
// in to, and only those: what members in to send to members in from
// still arrives. A follower whose messages do not reach its leader keeps
// hearing the leader but cannot acknowledge proposals or pings, so the
// leader drops it after syncLimit; a leader whose messages do not reach
// its followers is abandoned by them. Like Partition, it adds to the
// partitions in place until Heal.
func (e *Ensemble) PartitionOneWay(from, to []int) error {
	return e.cut(from, to, true)
}

// Isolate cuts member i from every other member, both ways: Partition
// of {i} and the rest.
func (e *Ensemble) Isolate(i int) error {
	if _, err := e.member(i); err != nil {
		return err
	}
	var rest []int
	for j := range e.Servers {
		if j != i {
			rest = append(rest, j)
		}
	}
	return e.Partition([]int{i}, rest)
}

// Heal lifts every partition between members. The connections that were
// cut are closed (their streams lost bytes), so the members reconnect at
// once; a member that was on a minority side rejoins the quorum within
// an election and a synchronisation (WaitQuorum waits for it).
func (e *Ensemble) Heal() error {
	e.linkMu.Lock()
	defer e.linkMu.Unlock()
	for i := range e.blocked {
		clear(e.blocked[i])
	}
	e.applyLocked()
	return nil
}

// Partitioned reports whether messages from member from to member to are
// cut (by Partition, PartitionOneWay or Isolate).
func (e *Ensemble) Partitioned(from, to int) bool {
	e.linkMu.Lock()
	defer e.linkMu.Unlock()
	if from < 0 || from >= len(e.blocked) || to < 0 || to >= len(e.blocked) {
		return false
	}
	return e.blocked[from][to]
}

// cut marks the messages from every member of from to every member of to
// as cut (or not) and applies the result to the proxies.
func (e *Ensemble) cut(from, to []int, on bool) error {
	for _, g := range [][]int{from, to} {
		for _, i := range g {
			if _, err := e.member(i); err != nil {
				return err
			}
		}
	}
	e.linkMu.Lock()
	defer e.linkMu.Unlock()
	for _, i := range from {
		for _, j := range to {
			if i != j {
				e.blocked[i][j] = on
			}
		}
	}
	e.applyLocked()
	return nil
}

// applyLocked sets every proxy's black holes from blocked. The proxies of
// links[i][j] carry the connections i opens to j: their client->server
// direction is what i sends to j, their server->client direction what j
// sends to i.
func (e *Ensemble) applyLocked() {
	for i, row := range e.links {
		for j, l := range row {
			if i == j {
				continue
			}
			var d Direction
			if e.blocked[i][j] {
				d |= ClientToServer
			}
			if e.blocked[j][i] {
				d |= ServerToClient
			}
			l.quorum.PartitionOneWay(d)
			l.election.PartitionOneWay(d)
		}
	}
}

// Freeze stops member i with SIGSTOP (Server.Freeze): it stays a member
// but answers nobody, neither its peers nor its clients, until Thaw. A
// frozen leader is replaced by the others once they notice (syncLimit);
// WaitQuorum leaves frozen members out.
func (e *Ensemble) Freeze(i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	return s.Freeze()
}

// Thaw resumes member i after Freeze (Server.Thaw).
func (e *Ensemble) Thaw(i int) error {
	s, err := e.member(i)
	if err != nil {
		return err
	}
	return s.Thaw()
}

// MemberClient connects a recipe.Client to member i only, as [Client]
// does for one server, and closes it when the test ends: when member i is
// cut off, frozen or down, the client has no other server to move to,
// as a client in the same network segment as a minority of the ensemble
// would. It fails the test if the member does not serve (a minority
// member does not).
func (e *Ensemble) MemberClient(t testing.TB, i int, opts ...recipe.Option) *recipe.Client {
	t.Helper()
	s, err := e.member(i)
	if err != nil {
		t.Fatal(err)
	}
	return connectClient(t, []string{s.Addr()}, opts)
}
