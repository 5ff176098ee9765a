package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// lightRow is what a ParticipantNode and a Participant both say of a node,
// with the mode of a read/write lock's node ("" elsewhere).
type lightRow struct {
	Node, LockName string
	Sequence       int64
	Holder         bool
	Mode           string
}

// queueCase builds one recipe's queue on path with handles of c, its
// holders holding and the others waiting in goroutines of waiters, and
// returns the two listings of a handle of observer on the same path, as
// rows, and the number of holders the queue must show.
type queueCase struct {
	build func(t *testing.T, ctx context.Context, waiters *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int)
}

// wait runs acquire in a goroutine of wg; it is expected to end when ctx
// does (the test's end), having never acquired.
func wait(t *testing.T, ctx context.Context, wg *sync.WaitGroup, what string, acquire func(context.Context) error) {
	wg.Go(func() {
		if err := acquire(ctx); err == nil {
			t.Errorf("%s acquired; want it to wait until the test ends", what)
		}
	})
}

var queueCases = map[string]queueCase{
	// A holder and two waiters.
	"mutex": {func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int) {
		for i := range 3 {
			m, err := mutex.New(c, path)
			must(t, err)
			if i == 0 {
				must(t, m.Lock(ctx))
				continue
			}
			wait(t, ctx, wg, "mutex waiter", m.Lock)
			locktest.Queued(t, i+1, m.Participants)
		}
		obs, err := mutex.New(observer, path)
		must(t, err)
		light, full = views(obs.ParticipantNodes, obs.Participants)
		return light, full, 1
	}},
	// Our holder, then nodes of other kinds and names: a kazoo lock node
	// (a contender of the mutex's queue), a persistent "lock-" node
	// without a sequence number (sorted last, Sequence -1), and a child
	// that is no lock node (left out).
	"mutex with foreign nodes": {func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int) {
		m, err := mutex.New(c, path)
		must(t, err)
		must(t, m.Lock(ctx))
		if _, err := raw.Create(path+"/0123456789abcdef0123456789abcdef__lock__", []byte("kazoo"),
			zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"lock-by-hand", "config"} {
			if _, err := raw.Create(path+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			for _, name := range []string{"lock-by-hand", "config"} {
				_ = raw.Delete(path+"/"+name, -1)
			}
		})
		obs, err := mutex.New(observer, path)
		must(t, err)
		light, full = views(obs.ParticipantNodes, obs.Participants)
		return light, full, 1
	}},
	// Both sides: two readers hold, a writer waits behind them and a
	// reader behind the writer.
	"rwlock": {func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int) {
		var queued func(context.Context) ([]rwlock.Participant, error)
		for i, side := range []string{"read", "read", "write", "read"} {
			rw, err := rwlock.New(c, path)
			must(t, err)
			queued = rw.Participants
			take := rw.RLock
			if side == "write" {
				take = rw.Lock
			}
			if i < 2 {
				must(t, take(ctx))
				continue
			}
			wait(t, ctx, wg, "rwlock "+side+" waiter", take)
			locktest.Queued(t, i+1, queued)
		}
		obs, err := rwlock.New(observer, path)
		must(t, err)
		return func(ctx context.Context) ([]lightRow, error) {
				ps, err := obs.ParticipantNodes(ctx)
				rows := make([]lightRow, len(ps))
				for i, p := range ps {
					rows[i] = nodeRow(p.ParticipantNode, p.Mode.String())
				}
				return rows, err
			}, func(ctx context.Context) ([]lightRow, error) {
				ps, err := obs.Participants(ctx)
				rows := make([]lightRow, len(ps))
				for i, p := range ps {
					rows[i] = participantRow(p.Participant, p.Mode.String())
				}
				return rows, err
			}, 2
	}},
	// Three leases held, two waiting.
	"semaphore": {func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int) {
		for i := range 5 {
			s, err := semaphore.New(c, path, 3)
			must(t, err)
			if i < 3 {
				_, err := s.Acquire(ctx)
				must(t, err)
				continue
			}
			wait(t, ctx, wg, "semaphore waiter", func(ctx context.Context) error {
				_, err := s.Acquire(ctx)
				return err
			})
			locktest.Queued(t, i+1, s.Participants)
		}
		obs, err := semaphore.New(observer, path, 3)
		must(t, err)
		light, full = views(obs.ParticipantNodes, obs.Participants)
		return light, full, 3
	}},
	// A leader and two candidates.
	"leader": {func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c, observer *recipe.Client, raw *zk.Conn, path string) (light, full func(context.Context) ([]lightRow, error), holders int) {
		for i := range 3 {
			e, err := leader.New(c, path)
			must(t, err)
			if i == 0 {
				must(t, e.Campaign(ctx))
				continue
			}
			wait(t, ctx, wg, "candidate", e.Campaign)
			locktest.Queued(t, i+1, e.Participants)
		}
		obs, err := leader.New(observer, path)
		must(t, err)
		light, full = views(obs.ParticipantNodes, obs.Participants)
		return light, full, 1
	}},
}

func nodeRow(p recipe.ParticipantNode, mode string) lightRow {
	return lightRow{p.Node, p.LockName, p.Sequence, p.Holder, mode}
}

func participantRow(p recipe.Participant, mode string) lightRow {
	return lightRow{p.Node, p.LockName, p.Sequence, p.Holder, mode}
}

// views are the two views of a queue for the recipes whose nodes and
// participants are the engine's: ParticipantNodes and Participants, as
// rows.
func views(nodes func(context.Context) ([]recipe.ParticipantNode, error), parts func(context.Context) ([]recipe.Participant, error)) (light, full func(context.Context) ([]lightRow, error)) {
	return func(ctx context.Context) ([]lightRow, error) {
			ps, err := nodes(ctx)
			return nodeRows(ps), err
		}, func(ctx context.Context) ([]lightRow, error) {
			ps, err := parts(ctx)
			return participantRows(ps), err
		}
}

func nodeRows(ps []recipe.ParticipantNode) []lightRow {
	rows := make([]lightRow, len(ps))
	for i, p := range ps {
		rows[i] = nodeRow(p, "")
	}
	return rows
}

func participantRows(ps []recipe.Participant) []lightRow {
	rows := make([]lightRow, len(ps))
	for i, p := range ps {
		rows[i] = participantRow(p, "")
	}
	return rows
}

// ParticipantNodes lists the queue of every recipe in one request: the
// same nodes in the same order as Participants, with the same lock
// names, sequence numbers and holders (the holders first: one for a mutex
// and a leader, two readers ahead of a writer, three leases of five), where
// Participants costs a request per node more.
func TestParticipantNodes(t *testing.T) {
	srv := zktest.Shared(t)
	for name, qc := range queueCases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var waiters sync.WaitGroup
			defer waiters.Wait()
			defer cancel()
			c := locktest.Client(t, []string{srv.Addr()})
			observer := locktest.Client(t, []string{srv.Addr()}) // its requests are counted
			path := zktest.UniquePath(t)
			raw := zktest.Connect(t, srv.Addr())
			light, full, holders := qc.build(t, ctx, &waiters, c, observer, raw, path)
			locktest.Settle(t, observer)

			before := observer.Stats()
			nodes, err := light(ctx)
			st := observer.Stats().Sub(before)
			must(t, err)
			if st.Lists != 1 || st.RoundTrips() != 1 {
				t.Errorf("ParticipantNodes: %d lists, %d requests; want 1 list and nothing else", st.Lists, st.RoundTrips())
			}
			before = observer.Stats()
			ps, err := full(ctx)
			st = observer.Stats().Sub(before)
			must(t, err)
			t.Logf("Participants: %d lists, %d reads for %d nodes; ParticipantNodes: %v", st.Lists, st.Reads, len(ps), nodes)
			if len(nodes) != len(ps) || len(nodes) < holders+1 || fmt.Sprint(nodes) != fmt.Sprint(ps) {
				t.Errorf("ParticipantNodes:\n%v\nParticipants:\n%v", nodes, ps)
			}
			for i, n := range nodes {
				if n.Holder != (i < holders) || n.Node == "" || n.LockName == "" || n.Sequence < -1 {
					t.Errorf("node %d of %d: %+v; want the first %d holding, each with a name and lock name", i, len(nodes), n, holders)
				}
			}
		})
	}
}

// ParticipantNodes of a directory that does not exist is empty, with no
// error, after its one listing; a nil context is refused before any
// request, by the engine and by every recipe; a context that has ended
// ends the call before any request, with its error.
func TestParticipantNodesEdges(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	path := zktest.UniquePath(t)
	lk, err := recipe.NewLock(c, path, recipe.LockSpec{Recipe: "test", LockName: "lock-", Driver: driver.Mutex()}, nil)
	must(t, err)
	ctx := locktest.Ctx(t, 30*time.Second)

	before := c.Stats()
	nodes, err := lk.ParticipantNodes(ctx)
	if st := c.Stats().Sub(before); err != nil || nodes != nil || st.Lists != 1 || st.RoundTrips() != 1 {
		t.Errorf("ParticipantNodes of a missing directory = %v, %v after %d requests; want nil, nil after one listing", nodes, err, st.RoundTrips())
	}

	m, err := mutex.New(c, path)
	must(t, err)
	rw, err := rwlock.New(c, path+"-rw")
	must(t, err)
	s, err := semaphore.New(c, path+"-sem", 2)
	must(t, err)
	e, err := leader.New(c, path+"-leader")
	must(t, err)
	calls := map[string]func(context.Context) (any, error){
		"recipe.Lock":         func(ctx context.Context) (any, error) { return lk.ParticipantNodes(ctx) },
		"mutex.Mutex":         func(ctx context.Context) (any, error) { return m.ParticipantNodes(ctx) },
		"rwlock.RWLock":       func(ctx context.Context) (any, error) { return rw.ParticipantNodes(ctx) },
		"semaphore.Semaphore": func(ctx context.Context) (any, error) { return s.ParticipantNodes(ctx) },
		"leader.Election":     func(ctx context.Context) (any, error) { return e.ParticipantNodes(ctx) },
	}
	var nilCtx context.Context // the bad input under test
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range calls {
		before := c.Stats()
		if _, err := call(nilCtx); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s.ParticipantNodes(nil) = %v; want ErrInvalidArgument", name, err)
		}
		if _, err := call(ended); !errors.Is(err, context.Canceled) {
			t.Errorf("%s.ParticipantNodes(ended) = %v; want context.Canceled", name, err)
		}
		if n := c.Stats().Sub(before).RoundTrips(); n != 0 {
			t.Errorf("%s: %d requests for a nil and an ended context; want none", name, n)
		}
	}

	// With the mutex held, the engine's listing shows its node, holding.
	must(t, m.Lock(ctx))
	defer func() { must(t, m.Unlock(ctx)) }()
	nodes, err = lk.ParticipantNodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Node != m.Node() || !nodes[0].Holder {
		t.Fatalf("ParticipantNodes = %+v, %v; want the mutex's node, holding", nodes, err)
	}
}

// The listing of ParticipantNodes is retried under the client's policy
// when its reply is lost (the connection cut after the server answered),
// and the call ends with its context while the server cannot be reached.
func TestParticipantNodesFaults(t *testing.T) {
	srv := zktest.Shared(t)
	p := srv.Proxy(t)
	c := p.Client(t)
	path := zktest.UniquePath(t)
	m, err := mutex.New(c, path)
	must(t, err)
	ctx := locktest.Ctx(t, 30*time.Second)
	must(t, m.Lock(ctx))
	defer func() { must(t, m.Unlock(ctx)) }()
	locktest.Settle(t, c)

	p.Arm(zktest.LoseReply, 1, zktest.OpGetChildren, zktest.OpGetChildren2)
	before := c.Stats()
	nodes, err := m.ParticipantNodes(ctx)
	st := c.Stats().Sub(before)
	if err != nil || len(nodes) != 1 || nodes[0].Node != m.Node() || !nodes[0].Holder {
		t.Fatalf("ParticipantNodes after a lost reply = %+v, %v; want the holder's node", nodes, err)
	}
	if st.Lists != 2 || st.Retries < 1 {
		t.Errorf("ParticipantNodes after a lost reply: %d lists, %d retries; want the listing sent again once", st.Lists, st.Retries)
	}
	if m.Err() != nil {
		t.Fatalf("the hold did not survive a cut connection: %v", m.Err())
	}

	p.Partition()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = m.ParticipantNodes(short)
	took := time.Since(start)
	p.Heal()
	if !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Errorf("ParticipantNodes while partitioned, 300ms context = %v after %v; want DeadlineExceeded at its deadline", err, took)
	}
	locktest.Eventually(t, 10*time.Second, "listing after the partition healed", func() bool {
		nodes, err := m.ParticipantNodes(ctx)
		return err == nil && len(nodes) == 1
	})
}
