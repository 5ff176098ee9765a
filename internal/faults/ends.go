package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
)

// Ends are the faults of the liveness grid: each is injected once, after
// a second of work, and ends in one of the ways a fault ends. Each first
// cuts off the cells' ghosts (see [Ghost]): a predecessor that vanishes
// mid-fault. A paused process is the process tests' (TestProcesses).
var Ends = []*Fault{
	{Key: "x", Name: "session expiry seen on reconnect", On: OnProxied, Duration: time.Minute, Inject: endExpiry},
	{Key: "ps", Name: "partition < session", On: OnProxied, Duration: time.Minute, Inject: endShortPartition},
	{Key: "pl", Name: "partition > session", On: OnProxied, Duration: time.Minute, Inject: endLongPartition},
	{Key: "r", Name: "server restart", On: OnStandalone, Duration: time.Minute, Inject: endRestart},
	{Key: "l", Name: "ensemble leader lost", On: OnEnsemble, Duration: time.Minute, Inject: endLeaderLost},
	{Key: "dr", Name: "connection dropped", On: OnProxied, Duration: time.Minute, Inject: endDrops},
}

// endWarmup is the work before an end's fault.
const endWarmup = 700 * time.Millisecond

// begin waits out the warm-up and cuts the ghosts off; false when ctx
// ended first.
func (e *Env) beginEnd(ctx context.Context) bool {
	if !locktest.Sleep(ctx, endWarmup) {
		return false
	}
	e.Vanish()
	return true
}

// victims pins, in every cell, a worker that holds (or a random one) and
// each other worker with probability others, and returns them.
func (e *Env) victims(others float64) ([]*Worker, error) {
	var vs []*Worker
	for _, c := range e.Cells {
		h := e.holder(c)
		if h.Proxy == nil {
			return nil, fmt.Errorf("%s has no proxies (target %s is not proxied)", c.Path, e.Target.Name)
		}
		vs = append(vs, h)
		for _, w := range c.Workers {
			if w != h && e.Rng.Float64() < others {
				vs = append(vs, w)
			}
		}
	}
	for _, w := range vs {
		w.Pin()
	}
	return vs, nil
}

// cut partitions the victims' proxies for d, calls during (if not nil)
// meanwhile, then heals them.
func (e *Env) cut(vs []*Worker, d time.Duration, during func() error) error {
	for _, w := range vs {
		w.Proxy.Partition()
	}
	start := time.Now()
	var err error
	if during != nil {
		err = during()
	}
	time.Sleep(d - time.Since(start))
	for _, w := range vs {
		w.Proxy.Heal()
		w.Unpin()
	}
	return err
}

// (x) The sessions of every worker are expired on the server
// (zktest.Proxy.ExpireSessions), three times 500ms apart: the server
// closes their connections, and they learn it when they reconnect, from
// the connect response. Holders are pinned, so each round finds some
// mid-hold: told, they release and acquire again at once. The server
// deletes an expired holder's node at once, before the holder can know,
// so each hold is counted as ended when its session was expired
// (Cell.ExpiredAt).
func endExpiry(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	n := 0
	for round := range 3 {
		if round > 0 && !locktest.Sleep(ctx, 500*time.Millisecond) {
			break
		}
		ws := e.pinHolders()
		for _, c := range e.Cells {
			for _, w := range c.Workers {
				sid, from := w.Client.SessionID(), time.Now()
				_, err := w.Proxy.ExpireSessions()
				c.expired(w, sid, from, time.Now())
				if err != nil {
					unpin(ws)
					return n, err
				}
			}
		}
		unpin(ws)
		n++
	}
	return n, nil
}

// (ps) A holder and half the other workers are cut off for 0.55 session
// timeouts: past the loss timeout, within the session.
func endShortPartition(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	vs, err := e.victims(0.5)
	if err != nil {
		return 0, err
	}
	return 1, e.cut(vs, e.Target.SessionTimeout*11/20, nil)
}

// (pl) A holder and half the other workers are cut off for 1.5 session
// timeouts: their sessions expire on the server, which they learn when
// they reconnect.
func endLongPartition(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	vs, err := e.victims(0.5)
	if err != nil {
		return 0, err
	}
	return 1, e.cut(vs, e.Target.SessionTimeout*3/2, nil)
}

// (r) The standalone server is stopped (SIGTERM) under pinned holders for
// half a session timeout and started again with its data.
func endRestart(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	ws := e.pinHolders()
	defer unpin(ws)
	srv := e.Target.Server
	at := time.Now()
	if err := srv.Stop(); err != nil {
		return 0, err
	}
	time.Sleep(e.Target.SessionTimeout / 2)
	if err := srv.Restart(); err != nil {
		return 0, err
	}
	e.logf("server restarted (down %v)", time.Since(at).Round(time.Millisecond))
	return 1, nil
}

// (l) The ensemble's leader is killed (SIGKILL) under pinned holders; the
// other two elect a new one; the killed member is started again.
func endLeaderLost(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	ens := e.Target.Ensemble
	i, err := ens.Leader()
	if err != nil {
		return 0, err
	}
	ws := e.pinHolders()
	defer unpin(ws)
	at := time.Now()
	_ = ens.Servers[i].Kill()
	if err := ens.WaitQuorum(30 * time.Second); err != nil {
		return 0, err
	}
	quorum := time.Since(at)
	if err := ens.Servers[i].Restart(); err != nil {
		return 0, err
	}
	if err := ens.WaitQuorum(30 * time.Second); err != nil {
		return 0, err
	}
	e.logf("ensemble leader %d killed: new quorum after %v, back with 3 after %v",
		i, quorum.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
	return 1, nil
}

// (dr) Every proxy drops its connections, three times 100ms apart.
func endDrops(ctx context.Context, e *Env) (int, error) {
	if !e.beginEnd(ctx) {
		return 0, nil
	}
	ws := e.pinHolders()
	defer unpin(ws)
	for i := range 3 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		for _, p := range e.proxies() {
			p.DropAll()
		}
	}
	return 1, nil
}

// ClientMode is one kind of client of the liveness grid.
type ClientMode struct {
	Name           string
	Tolerant, Auth bool
}

// ClientModes are the grid's kinds of client: the default, suspension
// tolerance and credentials.
var ClientModes = []ClientMode{
	{Name: "default"},
	{Name: "tolerant", Tolerant: true},
	{Name: "auth", Auth: true},
}

// Apply sets the mode on cfg.
func (m ClientMode) Apply(cfg Config) Config {
	cfg.Tolerant, cfg.Auth = m.Tolerant, m.Auth
	return cfg
}

// expiry is one forced expiry of a worker's session: from and to bound
// the moment the server ended it, session is the one the worker's client
// had when it began.
type expiry struct {
	from, to time.Time
	session  int64
}

// expired notes that w's session (sid, its client's at from) was expired
// on the server between from and to; the server deletes its nodes at
// once, so a hold of w's granted before to, or granted on that session
// at any time (decided on a listing read before the expiry, returned
// before the client learned of it), ended in truth then, whenever w
// learns it.
func (c *Cell) expired(w *Worker, sid int64, from, to time.Time) {
	ep := c.log()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.expiredAt == nil {
		ep.expiredAt = map[int][]expiry{}
	}
	ep.expiredAt[w.ID] = append(ep.expiredAt[w.ID], expiry{from, to, sid})
}

// clipExpired returns ivs with every interval that may span a forced
// expiry of its worker's session ended as early as the expiry could have
// been, and left out if that is before it began (it was granted while the
// session was being expired, or on the expired session).
func clipExpired(ivs []Interval, at map[int][]expiry) []Interval {
	if len(at) == 0 {
		return ivs
	}
	out := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		for _, x := range at[iv.Worker] {
			onIt := iv.Session != 0 && iv.Session == x.session
			if iv.End.After(x.from) && (iv.Start.Before(x.to) || onIt) {
				iv.End = x.from
			}
		}
		if iv.End.After(iv.Start) {
			out = append(out, iv)
		}
	}
	return out
}

// RollingRestart is what operators do at every upgrade: the ensemble's
// members are stopped (SIGTERM) and started again one at a time, the
// followers first and the leader last, each once the ensemble serves with
// all three again, with the holders working throughout.
var RollingRestart = &Fault{Key: "rr", Name: "rolling restart", On: OnEnsemble, Duration: 5 * time.Minute, Inject: rollingRestart}

func rollingRestart(ctx context.Context, e *Env) (int, error) {
	if !locktest.Sleep(ctx, time.Second) {
		return 0, nil
	}
	ens := e.Target.Ensemble
	l, err := ens.Leader()
	if err != nil {
		return 0, err
	}
	var order []int
	for i := range ens.Servers {
		if i != l {
			order = append(order, i)
		}
	}
	order = append(order, l)
	n := 0
	for _, i := range order {
		at := time.Now()
		if err := ens.Servers[i].Stop(); err != nil {
			return n, err
		}
		stopped := time.Now()
		if err := ens.Restart(i); err != nil {
			return n, err
		}
		n++
		role := "follower"
		if i == l {
			role = "leader"
		}
		e.logf("%s member %d (%s) stopped at %s (%v), serving with all three again at %s",
			at.Format("15:04:05.000"), i, role, stopped.Format("15:04:05.000"), stopped.Sub(at).Round(time.Millisecond), time.Now().Format("15:04:05.000"))
		if !locktest.Sleep(ctx, time.Second) {
			break
		}
	}
	return n, nil
}
