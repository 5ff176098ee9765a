package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// On is the kind of target a fault needs.
type On int

// The kinds of target.
const (
	// OnProxied: a standalone server; every client through its own proxy.
	OnProxied On = iota
	// OnStandalone: a standalone server the fault may stop and start.
	OnStandalone
	// OnEnsemble: a 3-server ensemble whose members the fault may kill.
	OnEnsemble
)

// Fault is one kind of fault and how to inject it.
type Fault struct {
	Key  string // a, b, ... as in docs/reliability.md
	Name string
	On   On
	// Duration of one episode in the matrix: long enough for a few
	// injections.
	Duration time.Duration
	// Inject injects the fault repeatedly until ctx ends and returns how
	// many times it did. It always finishes an injection it started
	// (restarting what it stopped) before it returns.
	Inject func(ctx context.Context, env *Env) (int, error)
}

// Env is what a fault acts on: a target and the cells using it.
type Env struct {
	Target *Target
	Cells  []*Cell
	Rng    *rand.Rand
	Logf   func(format string, args ...any)
}

func (e *Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

func (e *Env) proxies() []*zktest.Proxy {
	var ps []*zktest.Proxy
	for _, c := range e.Cells {
		ps = append(ps, c.Proxies()...)
	}
	return ps
}

// dur returns a random duration in [lo, hi].
func (e *Env) dur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(e.Rng.Int64N(int64(hi-lo)+1))
}

// holder returns a worker of c that holds now, or a random one.
func (e *Env) holder(c *Cell) *Worker {
	var hs []*Worker
	for _, w := range c.Workers {
		if w.Holding() {
			hs = append(hs, w)
		}
	}
	if len(hs) > 0 {
		return hs[e.Rng.IntN(len(hs))]
	}
	return c.Workers[e.Rng.IntN(len(c.Workers))]
}

// pinHolders pins every worker that holds now and returns them.
func (e *Env) pinHolders() []*Worker {
	var ws []*Worker
	for _, c := range e.Cells {
		for _, w := range c.Workers {
			if w.Holding() {
				w.Pin()
				ws = append(ws, w)
			}
		}
	}
	return ws
}

func unpin(ws []*Worker) {
	for _, w := range ws {
		w.Unpin()
	}
}

// Heal undoes every fault: proxies forward everything, servers run and an
// ensemble has a quorum.
func (e *Env) Heal() error {
	for _, c := range e.Cells {
		for _, w := range c.Workers {
			w.Unpin()
			if w.Proxy != nil {
				w.Proxy.CutAfterCreates(0)
				w.Proxy.Heal()
			}
		}
	}
	tg := e.Target
	if tg.Server != nil {
		if err := startAll([]*zktest.Server{tg.Server}); err != nil {
			return err
		}
	}
	if tg.Ensemble != nil {
		if err := startAll(tg.Ensemble.Servers); err != nil {
			return err
		}
		if err := tg.Ensemble.WaitQuorum(60 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Faults is the matrix's list of faults, in table order.
var Faults = []*Fault{
	{Key: "a", Name: "lost create reply", On: OnProxied, Duration: 8 * time.Second, Inject: injectLostCreates},
	{Key: "b", Name: "connections dropped", On: OnProxied, Duration: 8 * time.Second, Inject: injectDrops},
	{Key: "c", Name: "partition < session", On: OnProxied, Duration: 10 * time.Second, Inject: injectShortPartitions},
	{Key: "d", Name: "partition > session", On: OnProxied, Duration: 12 * time.Second, Inject: injectLongPartitions},
	{Key: "e", Name: "session expiry", On: OnProxied, Duration: 12 * time.Second, Inject: injectExpiry},
	{Key: "f", Name: "server restart", On: OnStandalone, Duration: 14 * time.Second, Inject: injectRestart},
	{Key: "g1", Name: "ensemble: kill leader", On: OnEnsemble, Duration: 14 * time.Second, Inject: injectKillLeader},
	{Key: "g2", Name: "ensemble: kill follower", On: OnEnsemble, Duration: 10 * time.Second, Inject: injectKillFollower},
	{Key: "g3", Name: "ensemble: restart all", On: OnEnsemble, Duration: 16 * time.Second, Inject: injectRestartAll},
}

// TolerantFaults is the matrix's list of faults for clients that tolerate
// suspensions (Config.Tolerant): the partitions, where the two modes
// differ. (c2) is there because it is where tolerance pays: a partition
// past the loss timeout, which ends every hold by default, is ridden out.
var TolerantFaults = []*Fault{
	faultByKey("c"),
	{Key: "c2", Name: "partition > loss timeout", On: OnProxied, Duration: 10 * time.Second, Inject: injectSuspensions},
	faultByKey("d"),
}

// faultByKey returns the fault of Faults with key k.
func faultByKey(k string) *Fault {
	for _, f := range Faults {
		if f.Key == k {
			return f
		}
	}
	panic("faults: no fault " + k)
}

// CutEvery is N of fault (a): every proxy loses the reply to every N-th
// create (creates of lock nodes and directories, and multi transactions).
const CutEvery = 4

// (a) Every proxy forwards each CutEvery-th create and then cuts the
// connection: the server applies the create, the client never sees the
// reply and must find its node by its UUID.
func injectLostCreates(ctx context.Context, e *Env) (int, error) {
	ps := e.proxies()
	cuts := func() int {
		n := 0
		for _, p := range ps {
			n += p.Stats().Cuts
		}
		return n
	}
	before := cuts()
	for _, p := range ps {
		p.CutAfterCreates(CutEvery)
	}
	<-ctx.Done()
	for _, p := range ps {
		p.CutAfterCreates(0)
	}
	return cuts() - before, nil
}

// (b) Every 50-400ms, each proxy drops its connections with probability
// one half: requests of every kind (creates, listings, watch waits,
// deletes) are cut at random points. Sessions survive (clients reconnect
// at once).
func injectDrops(ctx context.Context, e *Env) (int, error) {
	ps := e.proxies()
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(50*time.Millisecond, 400*time.Millisecond)) {
			return n, nil
		}
		for _, p := range ps {
			if e.Rng.IntN(2) == 0 {
				p.DropAll()
				n++
			}
		}
	}
}

// partition black-holes, in every cell, a holder (pinned, so the partition
// hits it mid-hold) and each other worker with probability others, for
// length; then heals and waits gap.
func partition(ctx context.Context, e *Env, length, gapLo, gapHi time.Duration, others float64) (int, error) {
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(gapLo, gapHi)) {
			return n, nil
		}
		var victims []*Worker
		for _, c := range e.Cells {
			h := e.holder(c)
			if h.Proxy == nil {
				return n, fmt.Errorf("partition: %s has no proxies (target %s is not proxied)", c.Path, e.Target.Name)
			}
			victims = append(victims, h)
			for _, w := range c.Workers {
				if w != h && e.Rng.Float64() < others {
					victims = append(victims, w)
				}
			}
		}
		for _, w := range victims {
			w.Pin()
			w.Proxy.Partition()
		}
		time.Sleep(length)
		for _, w := range victims {
			w.Proxy.Heal()
			w.Unpin()
		}
		n++
	}
}

// (c) The holder is cut off for a third of the session timeout: shorter
// than the loss timeout (half the session timeout), so it should keep its
// hold unless the connection was already silent before the partition.
func injectShortPartitions(ctx context.Context, e *Env) (int, error) {
	st := e.Target.SessionTimeout
	return partition(ctx, e, st/3, 300*time.Millisecond, 800*time.Millisecond, 0)
}

// (c2) The holder is cut off for 0.55 session timeouts: longer than the
// loss timeout (half the session timeout), so its hold is suspended (or,
// by default, lost), and shorter than the session timeout even counting
// the silence before the partition (at most a ping interval, a third of
// the session timeout), so the session survives and a tolerant client
// keeps its hold.
func injectSuspensions(ctx context.Context, e *Env) (int, error) {
	st := e.Target.SessionTimeout
	return partition(ctx, e, st*11/20, 300*time.Millisecond, 800*time.Millisecond, 0)
}

// (d) The holder is cut off for 1.5 session timeouts: it must be told
// (ErrConnectionSuspended) before the server expires its session and
// grants the lock to the next in line.
func injectLongPartitions(ctx context.Context, e *Env) (int, error) {
	st := e.Target.SessionTimeout
	return partition(ctx, e, st*3/2, st/2, st, 0)
}

// (e) The holder and each other session with probability one half are
// cut off past the session timeout, so sessions expire everywhere: in
// holders, in waiters queued or mid-create, in releases.
func injectExpiry(ctx context.Context, e *Env) (int, error) {
	st := e.Target.SessionTimeout
	return partition(ctx, e, st*3/2, st/2, st, 0.5)
}

// (f) The standalone server is stopped (SIGTERM) under pinned holders,
// left down for up to half a session timeout plus its start-up time, and
// started again on the same port with its data.
func injectRestart(ctx context.Context, e *Env) (int, error) {
	srv := e.Target.Server
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(time.Second, 2*time.Second)) {
			return n, nil
		}
		ws := e.pinHolders()
		at := time.Now()
		if err := srv.Stop(); err != nil {
			unpin(ws)
			return n, err
		}
		time.Sleep(e.dur(0, e.Target.SessionTimeout/2))
		err := srv.Restart()
		unpin(ws)
		if err != nil {
			return n, err
		}
		n++
		e.logf("server restarted (down %v)", time.Since(at).Round(time.Millisecond))
	}
}

// (g1) The ensemble's leader is killed (SIGKILL) under pinned holders; the
// other two elect a new leader; the killed server is started again.
func injectKillLeader(ctx context.Context, e *Env) (int, error) {
	ens := e.Target.Ensemble
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(time.Second, 2*time.Second)) {
			return n, nil
		}
		i, err := ens.Leader()
		if err != nil {
			return n, err
		}
		ws := e.pinHolders()
		at := time.Now()
		_ = ens.Servers[i].Kill()
		err = ens.WaitQuorum(30 * time.Second)
		quorum := time.Since(at)
		if err == nil {
			time.Sleep(e.dur(0, time.Second))
			err = ens.Servers[i].Restart()
		}
		if err == nil {
			err = ens.WaitQuorum(30 * time.Second)
		}
		unpin(ws)
		if err != nil {
			return n, err
		}
		n++
		e.logf("ensemble leader %d killed: new quorum after %v, back with 3 after %v",
			i, quorum.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
	}
}

// (g2) A follower is killed (SIGKILL) under pinned holders and started
// again a session timeout later.
func injectKillFollower(ctx context.Context, e *Env) (int, error) {
	ens := e.Target.Ensemble
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(time.Second, 2*time.Second)) {
			return n, nil
		}
		l, err := ens.Leader()
		if err != nil {
			return n, err
		}
		i := (l + 1 + e.Rng.IntN(len(ens.Servers)-1)) % len(ens.Servers)
		ws := e.pinHolders()
		at := time.Now()
		_ = ens.Servers[i].Kill()
		time.Sleep(e.Target.SessionTimeout)
		err = ens.Servers[i].Restart()
		if err == nil {
			err = ens.WaitQuorum(30 * time.Second)
		}
		unpin(ws)
		if err != nil {
			return n, err
		}
		n++
		e.logf("ensemble follower %d killed and restarted in %v", i, time.Since(at).Round(time.Millisecond))
	}
}

// (g3) All three servers are stopped (SIGTERM) under pinned holders and
// started again with their data.
func injectRestartAll(ctx context.Context, e *Env) (int, error) {
	ens := e.Target.Ensemble
	n := 0
	for {
		if !locktest.Sleep(ctx, e.dur(time.Second, 2*time.Second)) {
			return n, nil
		}
		ws := e.pinHolders()
		at := time.Now()
		var wg sync.WaitGroup
		for _, s := range ens.Servers {
			wg.Go(func() { _ = s.Stop() })
		}
		wg.Wait()
		err := startAll(ens.Servers)
		if err == nil {
			err = ens.WaitQuorum(60 * time.Second)
		}
		unpin(ws)
		if err != nil {
			return n, err
		}
		n++
		e.logf("ensemble restarted: serving again after %v", time.Since(at).Round(time.Millisecond))
	}
}

// startAll starts the servers that are not running, at the same time (an
// ensemble member waits for its peers).
func startAll(servers []*zktest.Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if !s.Running() {
			wg.Go(func() { errs[i] = s.Restart() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Episode runs the cells of env under fault f for d (and the cells in
// others, on other targets, with no fault: load that the fault does not
// touch), then heals, waits for the fault to be over (see [OverAt]) and
// for every worker of env's cells to be granted again (see [Recovery]),
// checks every cell and returns one Result per cell, env's first. A cell
// whose directory still holds nodes after the faults healed (and after
// twice the session timeout plus 5s for background clean-up) has them
// listed as leaked. The error reports a fault that could not be injected
// or healed (a harness problem, not a finding).
func Episode(ctx context.Context, f *Fault, env *Env, others []*Cell, d time.Duration) ([]Result, int, error) {
	all := append(append([]*Cell(nil), env.Cells...), others...)
	for _, c := range all {
		if err := c.ensureRegister(); err != nil {
			return nil, 0, err
		}
		c.begin()
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.run(wctx) })
	}
	injected, injErr := inject(ctx, f, env, d)
	healErr := env.Heal()
	rec := env.awaitRecovery(ctx, f)
	env.noteStuck(rec)
	stopWorkers()
	wg.Wait()
	env.settleGhosts()
	results := make([]Result, len(all))
	for i, c := range all {
		if i < len(env.Cells) {
			results[i] = c.finish(f.Name)
			results[i].Injections = injected
			c.checkLiveness(rec, &results[i])
		} else {
			results[i] = c.finish("none")
		}
	}
	// Leak check while the clients are open: every node must go once the
	// faults have healed (background clean-up retries with backoff up to
	// 2s; a suspended session's nodes go when it reconnects).
	var lwg sync.WaitGroup
	for i, c := range all {
		lwg.Go(func() {
			left, err := WaitEmpty(c.Target.Raw, c.Path, 2*c.Target.SessionTimeout+5*time.Second)
			if err != nil {
				results[i].Problems = append(results[i].Problems, fmt.Sprintf("leak check of %s: %v", c.Path, err))
			}
			for _, n := range left {
				results[i].Leaked = append(results[i].Leaked, "left while clients open: "+c.Path+"/"+n.String())
			}
		})
	}
	lwg.Wait()
	// The register last: a write abandoned during the faults may have
	// been sent once they healed.
	for i, c := range all {
		c.checkRegister(c.log(), &results[i])
	}
	return results, injected, errors.Join(injErr, healErr, rec.Err)
}

// inject runs f's injection for d, after 300ms of work without a fault,
// and returns when it returned: at the end of d, or earlier for a fault
// injected once.
func inject(ctx context.Context, f *Fault, env *Env, d time.Duration) (int, error) {
	ectx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if !locktest.Sleep(ectx, 300*time.Millisecond) {
		return 0, nil
	}
	return f.Inject(ectx, env)
}

// CheckClosed checks a cell's directory after its clients closed: nothing
// may be left; a node whose owner is one of the cell's closed sessions is
// a leak at once, any other after wait (a session whose close request was
// lost ends at its timeout).
func CheckClosed(c *Cell, wait time.Duration) []string {
	sessions := c.Sessions()
	left, err := WaitEmpty(c.Target.Raw, c.Path, wait)
	var out []string
	if err != nil {
		out = append(out, fmt.Sprintf("leak check of %s after close: %v", c.Path, err))
	}
	for _, n := range left {
		why := "left after the clients closed"
		if sessions[n.Owner] {
			why = "owned by a closed session"
		}
		out = append(out, why+": "+c.Path+"/"+n.String())
	}
	return out
}

// Raw opens a plain go-zookeeper connection for checks and waits for its
// session.
func Raw(addrs []string) (*zk.Conn, error) {
	conn, ev, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				go func() {
					for range ev {
					}
				}()
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("no session with %v within 30s", addrs)
		}
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
