package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Time bounds of the "no call waits past its context" property.
//
// A failed or cancelled acquire waits, after its context ended, up to the
// engine's cleanup grace (recipe.WithCleanupGrace, 500ms by default) for
// its node to be deleted, so that the caller normally sees a clean
// directory; that wait is documented and part of the bound. Release has no
// such wait. On top of that, SchedulingAllowance covers the time between
// the context's timer firing and the call's goroutine running again, which
// on a loaded machine under the race detector reaches tens of
// milliseconds; it is generous so that the check catches calls that ignore
// their context (seconds late), not a busy scheduler.
const (
	CleanupGrace        = 500 * time.Millisecond
	SchedulingAllowance = 500 * time.Millisecond
	AcquireBound        = CleanupGrace + SchedulingAllowance
	ReleaseBound        = SchedulingAllowance
)

// Target is where a cell's clients connect.
type Target struct {
	Name string
	// Addrs are the servers' client addresses.
	Addrs []string
	// Proxied gives each client a fault-injecting proxy of its own in
	// front of Addrs[0], listed twice so that go-zookeeper reconnects at
	// once (it pauses a second before retrying a list it went through).
	Proxied bool
	// OneAddr lists a proxied client's proxy once, as a user lists a
	// single server: after a round of dials that failed (or a connect
	// response that said the session expired) the client paces its next
	// dial on its retry policy.
	OneAddr bool
	// SessionTimeout of every client.
	SessionTimeout time.Duration
	// Server is the standalone server behind Addrs, for restart faults.
	Server *zktest.Server
	// Ensemble is the ensemble behind Addrs, for ensemble faults.
	Ensemble *zktest.Ensemble
	// Raw is a plain connection to the servers (not through a proxy) for
	// the leak checks.
	Raw *zk.Conn
	// Bound is the liveness bound B its clients are checked against; 0:
	// Bound(SessionTimeout, DefaultMaxSleep).
	Bound time.Duration
}

// Config shapes a cell's workload.
type Config struct {
	Workers int
	// MaxCycles bounds each worker's cycles in one episode.
	MaxCycles int
	// AcquireTimeout is the usual acquire context timeout; a fraction
	// ShortTimeouts of the acquires get a random one between 20ms and
	// 400ms instead, so that contexts also end mid-create and mid-wait.
	AcquireTimeout time.Duration
	ShortTimeouts  float64
	ReleaseTimeout time.Duration
	// HoldMin..HoldMax is the usual hold time; a fraction LongHolds of the
	// holds last LongHold instead.
	HoldMin, HoldMax time.Duration
	LongHolds        float64
	LongHold         time.Duration
	// PauseMax is the longest random pause between two cycles.
	PauseMax time.Duration
	// Tolerant connects the clients with recipe.WithSuspensionTolerance:
	// a holder stops acting when its hold is suspended and acts again
	// when it resumes, and each part of the hold is an interval of its own.
	Tolerant bool
	// Auth connects the clients with credentials (recipe.WithDigestAuth),
	// which every reconnect sends again.
	Auth bool
	// Trace keeps each client's last log lines (debug level included), and
	// a worker that is not granted again after a fault gets them in the
	// notes.
	Trace bool
}

// DefaultConfig is the workload of the matrix and the soak.
func DefaultConfig(sessionTimeout time.Duration) Config {
	return Config{
		Workers:        4,
		MaxCycles:      400,
		AcquireTimeout: 2 * sessionTimeout,
		ShortTimeouts:  0.15,
		ReleaseTimeout: sessionTimeout,
		HoldMin:        5 * time.Millisecond,
		HoldMax:        40 * time.Millisecond,
		LongHolds:      0.05,
		LongHold:       400 * time.Millisecond,
		PauseMax:       20 * time.Millisecond,
	}
}

// Cell is one recipe on one lock path, with its workers, each on a client
// (a session) of its own. Cells persist across episodes: the soak keeps
// its clients for the whole run.
type Cell struct {
	Adapter *Adapter
	Path    string
	Target  *Target
	Config  Config

	Workers []*Worker

	mu       sync.Mutex
	ep       *episodeLog
	sessions map[int64]bool // every session a hold belonged to, or a client had at close

	// recovering is set once the fault is over: the workers then acquire
	// with contexts that last until recoverUntil (UnixNano) and no short
	// timeouts (see Episode).
	recovering   atomic.Bool
	recoverUntil atomic.Int64
	ghosts       []*Ghost // under mu
}

// Worker is one contender: a client (session), its proxy if the target is
// proxied, and the recipe handle.
type Worker struct {
	ID      int
	Client  *recipe.Client
	Proxy   *zktest.Proxy
	cell    *Cell
	acquire Acquirer
	rng     *rand.Rand
	holding atomic.Bool
	pinned  atomic.Bool
	granted atomic.Int64 // UnixNano of the last successful acquire
	trace   *ring        // the client's last log lines (Config.Trace)
	session int64        // last session seen, to count new ones
}

// Holding reports whether the worker holds now.
func (w *Worker) Holding() bool { return w.holding.Load() }

// Pin makes the worker keep what it holds, past its hold time, until
// Unpin or the hold is lost: so that a fault hits a holder mid-hold.
func (w *Worker) Pin() { w.pinned.Store(true) }

// Unpin ends Pin.
func (w *Worker) Unpin() { w.pinned.Store(false) }

// NewCell connects cfg.Workers clients to tg and makes a handle for each.
func NewCell(ctx context.Context, tg *Target, a *Adapter, path string, cfg Config, seed uint64) (*Cell, error) {
	c := &Cell{Adapter: a, Path: path, Target: tg, Config: cfg, sessions: make(map[int64]bool)}
	for i := range cfg.Workers {
		w := &Worker{ID: i, cell: c, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		addrs := tg.Addrs
		if tg.Proxied {
			p, err := zktest.NewProxy(tg.Addrs[0])
			if err != nil {
				c.Close()
				return nil, err
			}
			w.Proxy = p
			addrs = []string{p.Addr(), p.Addr()}
			if tg.OneAddr {
				addrs = addrs[:1]
			}
		}
		var extra []recipe.Option
		if cfg.Trace {
			w.trace = newRing()
			extra = append(extra, recipe.WithLogger(slog.New(w.trace)))
		}
		cl, err := connect(ctx, addrs, tg.SessionTimeout, cfg, extra...)
		if err != nil {
			if w.Proxy != nil {
				w.Proxy.Close()
			}
			c.Close()
			return nil, fmt.Errorf("%s worker %d: %w", a.Name, i, err)
		}
		w.Client = cl
		acq, err := a.New(cl, path)
		if err != nil {
			cl.Close()
			if w.Proxy != nil {
				w.Proxy.Close()
			}
			c.Close()
			return nil, fmt.Errorf("%s worker %d: %w", a.Name, i, err)
		}
		w.acquire = acq
		c.Workers = append(c.Workers, w)
	}
	return c, nil
}

// CellAuth is the user and password of the clients of a cell with
// Config.Auth.
var CellAuth = [2]string{"faults", "faults-secret"}

// connect connects one client of a cell to addrs as cfg says.
func connect(ctx context.Context, addrs []string, session time.Duration, cfg Config, extra ...recipe.Option) (*recipe.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := append([]recipe.Option{recipe.WithSessionTimeout(session)}, extra...)
	if cfg.Tolerant {
		opts = append(opts, recipe.WithSuspensionTolerance())
	}
	if cfg.Auth {
		opts = append(opts, recipe.WithDigestAuth(CellAuth[0], CellAuth[1]))
	}
	return recipe.Connect(cctx, addrs, opts...)
}

// Close closes every client (recording its last session) and proxy.
func (c *Cell) Close() {
	for _, w := range c.Workers {
		if w.Client != nil {
			c.noteSession(w.Client.SessionID())
			w.Client.Close()
		}
		if w.Proxy != nil {
			w.Proxy.Close()
		}
	}
}

// Sessions returns every session id seen in the cell: the owners of its
// holds and the clients' last sessions at Close.
func (c *Cell) Sessions() map[int64]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]bool, len(c.sessions))
	for s := range c.sessions {
		out[s] = true
	}
	return out
}

func (c *Cell) noteSession(s int64) {
	if s == 0 {
		return
	}
	c.mu.Lock()
	c.sessions[s] = true
	c.mu.Unlock()
}

// Proxies returns the workers' proxies (none if the target is not proxied).
func (c *Cell) Proxies() []*zktest.Proxy {
	var ps []*zktest.Proxy
	for _, w := range c.Workers {
		if w.Proxy != nil {
			ps = append(ps, w.Proxy)
		}
	}
	return ps
}

// Stats sums the clients' counters.
func (c *Cell) Stats() recipe.Stats {
	var s recipe.Stats
	for _, w := range c.Workers {
		st := w.Client.Stats()
		s.Creates += st.Creates
		s.Deletes += st.Deletes
		s.Lists += st.Lists
		s.Reads += st.Reads
		s.Wakeups += st.Wakeups
		s.Retries += st.Retries
		s.Recovered += st.Recovered
		s.Acquired += st.Acquired
		s.Lost += st.Lost
		s.EpochsEnded += st.EpochsEnded
		s.Suspensions += st.Suspensions
	}
	return s
}

// Interval is one part of one hold as its holder saw it: from the grant
// (or the end of a suspension) until the release, the loss, or the
// beginning of a suspension, whichever came first.
type Interval struct {
	Worker     int
	Mode       Mode
	Start, End time.Time
	Lost       bool   // the hold ended by Done, not by Release
	Reason     string // loss reason, when Lost
	Suspended  bool   // ended when the hold was suspended
	Resumed    bool   // began when a suspension cleared (not a new grant)
	Token      int64
	Node       string
	Session    int64 // the worker's session when it was granted, if known
}

// call is one Acquire or Release call.
type call struct {
	worker   int
	acquire  bool
	start    time.Time
	deadline time.Time
	end      time.Time
	err      error
	class    string
}

// episodeLog is what the workers of a cell record in one episode.
type episodeLog struct {
	mu        sync.Mutex
	intervals []Interval
	calls     []call
	stopAt    time.Time // when the episode's context ended
	stats     recipe.Stats
	start     time.Time
	notes     []string // observations that are not failures
	problems  []string // failures other than violations and leaks
	lostAtRel int      // releases that reported a loss Done had not shown
	guard     guardLog // guarded writes
	newSess   int      // times a worker's client moved to a new session

	expiredAt  map[int][]expiry // forced expiries of a worker's session (see Cell.expired)
	extra      []Interval       // holds of others than the workers (ghosts), for the liveness check
	violations []string         // found by the episode's checks (ghosts)
}

func (l *episodeLog) add(iv ...Interval) {
	l.mu.Lock()
	l.intervals = append(l.intervals, iv...)
	l.mu.Unlock()
}

func (l *episodeLog) addCall(c call) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *episodeLog) problem(format string, args ...any) {
	l.mu.Lock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// begin starts an episode: the cell's log is reset.
func (c *Cell) begin() {
	c.mu.Lock()
	c.ep = &episodeLog{stats: c.Stats(), start: time.Now()}
	c.mu.Unlock()
	c.recovering.Store(false)
}

func (c *Cell) log() *episodeLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ep
}

// run runs the workers until ctx ends or each has done MaxCycles cycles,
// and returns when every worker is idle.
func (c *Cell) run(ctx context.Context) {
	ep := c.log()
	var wg sync.WaitGroup
	for _, w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, ep)
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		ep.mu.Lock()
		ep.stopAt = time.Now()
		ep.mu.Unlock()
	})
	wg.Wait()
	stop()
}

// noteSession counts the worker's client moving to a new session (its
// old one expired).
func (w *Worker) noteSession(ep *episodeLog) {
	s := w.Client.SessionID()
	if s == 0 || s == w.session {
		return
	}
	if w.session != 0 {
		ep.mu.Lock()
		ep.newSess++
		ep.mu.Unlock()
	}
	w.session = s
}

func (w *Worker) loop(ctx context.Context, ep *episodeLog) {
	cfg := w.cell.Config
	defer w.noteSession(ep)
	for n := 0; n < cfg.MaxCycles && ctx.Err() == nil; n++ {
		w.noteSession(ep)
		timeout := cfg.AcquireTimeout
		short := w.rng.Float64() < cfg.ShortTimeouts
		switch {
		case w.cell.recovering.Load():
			timeout = max(time.Until(time.Unix(0, w.cell.recoverUntil.Load())), 100*time.Millisecond)
		case short:
			timeout = 20*time.Millisecond + time.Duration(w.rng.Int64N(int64(380*time.Millisecond)))
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		h, err := w.acquire(actx, w.rng)
		got := time.Now()
		cancel()
		class := classifyAcquire(w.cell.Adapter, err)
		ep.addCall(call{worker: w.ID, acquire: true, start: start, deadline: start.Add(timeout), end: got, err: err, class: class})
		if err != nil {
			if class == classUndocumented {
				ep.problem("worker %d: acquire returned an undocumented error: %v", w.ID, err)
			}
			locktest.Sleep(ctx, time.Duration(w.rng.Int64N(int64(50*time.Millisecond))))
			continue
		}
		w.granted.Store(got.UnixNano())
		w.holding.Store(true)
		w.hold(ctx, ep, h, got)
		w.holding.Store(false)
		if cfg.PauseMax > 0 {
			locktest.Sleep(ctx, time.Duration(w.rng.Int64N(int64(cfg.PauseMax))))
		}
	}
}

// hold keeps h for a random time (longer while pinned), watching every
// part's Done (and, for a tolerant client, its suspension signals), then
// releases it, and records the intervals in which the worker acted as
// holder of each part.
func (w *Worker) hold(ctx context.Context, ep *episodeLog, h *Held, start time.Time) {
	cfg := w.cell.Config
	d := cfg.HoldMin + time.Duration(w.rng.Int64N(int64(cfg.HoldMax-cfg.HoldMin)+1))
	if w.rng.Float64() < cfg.LongHolds {
		d = cfg.LongHold
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	parts := make([]partLog, len(h.Parts))
	sid := w.Client.SessionID()
	for i, p := range h.Parts {
		parts[i] = partLog{acting: true, cur: Interval{Worker: w.ID, Mode: h.Mode, Start: start, Token: p.Token, Node: p.Node, Session: sid}}
	}
	stopGuards := make(chan struct{})
	var guards sync.WaitGroup
	for _, p := range h.Parts {
		if p.Commit != nil {
			guards.Go(func() { w.guard(p, h.Mode, stopGuards, ep) })
		}
	}
	live := len(h.Parts)
	fired := false
	const perPart = 2 // Done, and Suspended or Resumed
	cases := make([]reflect.SelectCase, 2+perPart*len(h.Parts))
	never := reflect.ValueOf((<-chan struct{})(nil))
	for live > 0 {
		if fired && (!w.pinned.Load() || ctx.Err() != nil) && !suspended(parts) {
			// A suspended holder waits for the outcome, kept or lost (at
			// the latest when the session timeout of silence has passed),
			// so that the matrix sees holds kept.
			break
		}
		cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}
		cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick.C)}
		if fired {
			cases[0].Chan = reflect.ValueOf((<-chan time.Time)(nil))
		}
		for i, p := range h.Parts {
			done, signal := never, never
			if !parts[i].ended {
				done = reflect.ValueOf(p.Done)
				switch {
				case !cfg.Tolerant, p.Suspended == nil:
				case parts[i].acting:
					signal = reflect.ValueOf(p.Suspended())
				default:
					signal = reflect.ValueOf(p.Resumed())
				}
			}
			cases[2+perPart*i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: done}
			cases[3+perPart*i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: signal}
		}
		i, _, _ := reflect.Select(cases)
		now := time.Now()
		switch {
		case i == 0:
			fired = true
		case i == 1:
		case (i-2)%perPart == 0:
			parts[(i-2)/perPart].end(now, h.Parts[(i-2)/perPart], w, ep)
			live--
		default:
			parts[(i-2)/perPart].flip(now)
		}
	}
	releaseAt := time.Now()
	close(stopGuards)
	guards.Wait()
	// The timer may have won a select in which a Done was ready too: a
	// Done already closed counts as a loss seen now.
	for i, p := range h.Parts {
		if parts[i].ended {
			continue
		}
		select {
		case <-p.Done:
			parts[i].end(releaseAt, p, w, ep)
		default:
			parts[i].release(releaseAt)
		}
	}
	var ivs []Interval
	for _, p := range parts {
		ivs = append(ivs, p.ivs...)
	}
	ep.add(ivs...)
	w.cell.noteSession(w.Client.SessionID())

	rctx, cancel := context.WithTimeout(context.Background(), cfg.ReleaseTimeout)
	errs := h.Release(rctx)
	end := time.Now()
	cancel()
	for i, err := range errs {
		class := classifyRelease(err)
		ep.addCall(call{worker: w.ID, start: releaseAt, deadline: releaseAt.Add(cfg.ReleaseTimeout), end: end, err: err, class: class})
		switch {
		case class == classUndocumented:
			ep.problem("worker %d: release of %s returned an undocumented error: %v", w.ID, h.Parts[i].Node, err)
		case class == classLost && !parts[i].lost:
			ep.mu.Lock()
			ep.lostAtRel++
			ep.notes = append(ep.notes, fmt.Sprintf("worker %d: release of %s reported a loss its Done had not shown: %v", w.ID, h.Parts[i].Node, err))
			ep.mu.Unlock()
		}
	}
}

// partLog follows one part of a hold: the intervals in which the worker
// acted as its holder.
type partLog struct {
	ivs    []Interval
	cur    Interval // the interval in progress, while acting
	acting bool     // not suspended
	ended  bool     // Done closed
	lost   bool
}

// suspended reports whether a part is suspended and not ended.
func suspended(parts []partLog) bool {
	for _, p := range parts {
		if !p.acting && !p.ended {
			return true
		}
	}
	return false
}

// flip records a suspension beginning (the holder stops acting) or ending
// (it acts again).
func (pl *partLog) flip(now time.Time) {
	if pl.acting {
		pl.cur.End, pl.cur.Suspended = now, true
		pl.ivs = append(pl.ivs, pl.cur)
	} else {
		pl.cur = Interval{Worker: pl.cur.Worker, Mode: pl.cur.Mode, Start: now, Resumed: true, Token: pl.cur.Token, Node: pl.cur.Node, Session: pl.cur.Session}
	}
	pl.acting = !pl.acting
}

// end records the loss signalled by Done at now; the last interval says why.
func (pl *partLog) end(now time.Time, p Part, w *Worker, ep *episodeLog) {
	pl.ended, pl.lost = true, true
	if pl.acting {
		pl.cur.End = now
		pl.ivs = append(pl.ivs, pl.cur)
	}
	last := &pl.ivs[len(pl.ivs)-1]
	last.Lost = true
	err := p.Err()
	last.Reason = lossReason(err)
	if last.Reason == "" {
		ep.problem("worker %d: Done of %s closed while held but Err() = %v, not a documented loss", w.ID, p.Node, err)
		last.Reason = "undocumented"
	}
}

// release ends the interval in progress, if acting, at the release.
func (pl *partLog) release(now time.Time) {
	if pl.acting {
		pl.cur.End = now
		pl.ivs = append(pl.ivs, pl.cur)
	}
}

// Error classes of calls.
const (
	classOK           = "ok"
	classTimeout      = "timeout"
	classCancelled    = "cancelled"
	classGaveUp       = "gave-up"
	classLost         = "lost"
	classUndocumented = "undocumented"
)

// classifyAcquire sorts an acquire's error into the documented classes:
// every error must wrap the recipe's NotAcquired sentinel and its cause:
// the context's error, or retry.ErrGaveUp when the retry policy ran out.
func classifyAcquire(a *Adapter, err error) string {
	switch {
	case err == nil:
		return classOK
	case !errors.Is(err, a.NotAcquired):
		return classUndocumented
	case errors.Is(err, context.DeadlineExceeded):
		return classTimeout
	case errors.Is(err, context.Canceled):
		return classCancelled
	case errors.Is(err, retry.ErrGaveUp):
		return classGaveUp
	case a.AcquireLosses && lossReason(err) != "":
		return classLost
	}
	return classUndocumented
}

// classifyRelease sorts a release's error: a documented loss (ErrLost and
// its reason) or the context's error.
func classifyRelease(err error) string {
	switch {
	case err == nil:
		return classOK
	case lossReason(err) != "":
		return classLost
	case errors.Is(err, context.DeadlineExceeded):
		return classTimeout
	case errors.Is(err, context.Canceled):
		return classCancelled
	}
	return classUndocumented
}
