// Command bench measures what a lock cycle of the recipes costs, next to
// the least any ZooKeeper lock cycle can cost and next to go-zookeeper's
// own zk.Lock, all in one process against one ZooKeeper server.
//
// Scenarios:
//
//   - floor: raw go-zookeeper on one session: create an
//     EPHEMERAL_SEQUENTIAL child, list the parent's children, delete the
//     child. Three round trips, two of them writes: the minimum a lock
//     cycle costs.
//   - zk.Lock: go-zookeeper's zk.Lock, Lock+Unlock cycles on one session.
//   - mutex: this module's mutex, Lock+Unlock cycles on one session.
//   - zk.Lock and mutex contended: -sessions goroutines, each with its own
//     session and handle on one path, cycling Lock+Unlock.
//   - mutex traced: the uncontended mutex with an OpenTelemetry SDK tracer
//     provider that samples nothing, and one that samples every span (to a
//     batching processor whose exporter discards them): the cost of tracing.
//   - semaphore(3): Acquire+Release of a 3-lease semaphore, on one session
//     and on -sessions sessions.
//   - rwlock 90% reads: -sessions sessions on one read/write lock, each
//     cycle a read with probability 0.9, else a write.
//
// For every scenario it reports the throughput (cycles per second), the
// 50th and 99th percentile latency of a whole cycle (uncontended) or of
// the Lock call (contended), the requests per cycle counted by the client
// and by the server, and the throughput ratios against their targets.
//
// A first, unmeasured round warms up the server. Then every round runs
// every scenario once, each after a short warm-up of its own. The
// uncontended scenarios take turns of -slice until each has been measured
// for -duration, so they are measured under the same conditions; the
// contended ones run one after the other, in an order that rotates from
// round to round. The figures reported are medians over the rounds, and
// each ratio is the median of its per-round ratios, so slow drift of a
// shared machine does not bias them.
//
// With -suite peers (what make bench-peers runs) it measures the floor,
// zk.Lock and the recipes next to Apache Curator's and kazoo's recipes,
// run by small programs of ours in peers/ as processes of their own
// against the same server: the mutex on one session and on -sessions, the
// 3-lease semaphore, the 90%-read read/write lock, the leader hand-off
// after a resign and after a client's close, and the lost-reply run
// (-lost-sessions sessions of -lost-cycles cycles each through a fault
// proxy that loses the reply to every -lost-every-th create), counting
// errors, overlapping holds and orphaned nodes. A run in which nothing
// completes for -stall is reported as deadlock/timeout, not waited for.
// -baseline REV adds this module at git revision REV as one more peer
// (peers/gopeer, built from a copy of REV under .cache/ against the same
// go-zookeeper as the runner): its mutex, semaphore and rwlock scenarios
// run in the groups of ours, with the ratios ours / baseline.
//
// With -suite scale (what make bench runs after the default suite) it
// measures how the locks scale. Per-entity locks: one session and -goroutines
// goroutines (1, 16, 128, 512), each cycling Lock+Unlock on a lock of its
// own, for the floor, zk.Lock, the mutex and Curator's InterProcessMutex
// (one CuratorFramework, a thread per lock); throughput, cycle latency,
// requests per cycle, and the ratios against the floor and zk.Lock. Queue
// drain, in a phase of its own after those: -waiters waiters (10, 100,
// 1000) queued on one lock over 4 sessions behind a holder, for the mutex,
// zk.Lock, Curator and kazoo; once all are queued, the memory per waiter
// (Go: HeapInuse and HeapAlloc after two GCs, HeapAlloc with the waiters'
// goroutine descriptors, StackInuse and the stack the blocked waiters use;
// Curator: the JVM's used heap), then the holder unlocks and the queue drains: hand-offs per
// second, and the latency of a hand-off from one holder's Unlock returning
// to the next one's Lock returning. -charts DIR writes SVG line charts of
// them.
//
// By default it starts its own ZooKeeper (Debian's, through scripts/zk.sh)
// on a free loopback port with forceSync on, and stops it at the end:
//
//	go run ./internal/bench
//	go run ./internal/bench -duration 5s -rounds 5 -json
//	go run ./internal/bench -zk 127.0.0.1:2181
//	go run ./internal/bench -suite peers -only mutex,curator-mutex,kazoo-mutex
//	go run ./internal/bench -suite peers -baseline HEAD~1 -only mutex,baseline-mutex
//	go run ./internal/bench -suite scale -charts docs/img
//	go run ./internal/bench -suite scale -goroutines 1,64 -waiters 100 -only entity-mutex,drain-mutex
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// config is what the command line sets.
type config struct {
	zkAddr         string        // existing server to use; "" starts one
	rtt            time.Duration // round-trip time added by a delay proxy in front of the server; 0: none
	fsync          bool          // forceSync of the server started here
	duration       time.Duration // measured time per scenario and round
	ops            int           // measured cycles per scenario and round; 0: use duration
	warmup         time.Duration // unmeasured cycling before each measurement
	slice          time.Duration // turn length of the interleaved uncontended scenarios
	rounds         int           // times every scenario runs
	sessions       int           // sessions of the contended scenarios
	sessionTimeout time.Duration // session timeout of every session
	suite          string        // set of scenarios: default or peers
	only           string        // comma-separated scenario ids to run; "" runs all
	peersDir       string        // directory of the peers' programs
	python         string        // Python 3 interpreter with kazoo
	baseline       string        // git revision of this module to run as a peer; "" runs none
	handoffs       int           // measured leader hand-offs per scenario and round
	lostSessions   int           // sessions of the lost-reply run
	lostCycles     int           // cycles per session of the lost-reply run
	lostEvery      int           // the lost-reply run loses the reply to every lostEvery-th create
	lostTimeout    time.Duration // time limit of one lost-reply run
	stall          time.Duration // no cycle completing for this long ends a run as stalled
	goroutines     []int         // scale suite: goroutines of the per-entity locks
	waiters        []int         // scale suite: waiters of the queue drains
	drainTimeout   time.Duration // scale suite: time limit of a drain's queuing, and of the drain
	peerWarmup     time.Duration // scale suite: unmeasured work of a peer's run before it measures
	charts         string        // scale suite: directory to write SVG charts into; "" writes none
	json           bool          // machine-readable output
	verbose        bool          // progress on stderr
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.zkAddr, "zk", "", "use the ZooKeeper server at `host:port` instead of starting one")
	fs.DurationVar(&cfg.rtt, "rtt", 0, "put every session behind a proxy that adds this round-trip time (half each way); 0: straight to the server")
	fs.BoolVar(&cfg.fsync, "fsync", true, "start the server with forceSync=yes (ignored with -zk)")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "measured time per scenario and round")
	fs.IntVar(&cfg.ops, "ops", 0, "measured cycles per scenario and round (all sessions together); overrides -duration when > 0")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured cycling before each measurement")
	fs.DurationVar(&cfg.slice, "slice", 100*time.Millisecond, "length of a turn of the uncontended scenarios, which take turns until each has run -duration")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds; every round runs every scenario once and medians are reported")
	fs.IntVar(&cfg.sessions, "sessions", 8, "sessions of the contended scenarios")
	fs.DurationVar(&cfg.sessionTimeout, "session-timeout", 10*time.Second, "session timeout of every session")
	fs.StringVar(&cfg.suite, "suite", "default", "set of scenarios: default, peers (Curator and kazoo next to ours) or scale (per-entity locks and queue drains; see docs/performance.md)")
	fs.StringVar(&cfg.only, "only", "", "comma-separated scenario ids of the suite to run ("+scenarioIDs()+"); default all")
	fs.StringVar(&cfg.peersDir, "peers-dir", defaultPeersDir(), "`directory` of the peers' benchmark programs (CuratorPeer.java, kazoo_peer.py)")
	fs.StringVar(&cfg.python, "python", defaultPython(), "Python 3 `interpreter` that can import kazoo")
	fs.StringVar(&cfg.baseline, "baseline", "", "peers suite: also run the mutex, semaphore and rwlock scenarios with this module at git `revision` (built from a copy under .cache/), in the same groups as ours")
	fs.IntVar(&cfg.handoffs, "handoffs", 20, "measured leader hand-offs per scenario and round")
	fs.IntVar(&cfg.lostSessions, "lost-sessions", 4, "sessions of the lost-reply run")
	fs.IntVar(&cfg.lostCycles, "lost-cycles", 50, "Lock+Unlock cycles per session of the lost-reply run")
	fs.IntVar(&cfg.lostEvery, "lost-every", 7, "the lost-reply run loses the reply to every `n`-th create")
	fs.DurationVar(&cfg.lostTimeout, "lost-timeout", 35*time.Second, "time limit of one lost-reply run; the cycles completed by then are reported")
	fs.DurationVar(&cfg.stall, "stall", 5*time.Second, "a run in which no cycle completes for this long ends as deadlock/timeout")
	cfg.goroutines, cfg.waiters = slices.Clone(defaultGoroutines), slices.Clone(defaultWaiters)
	fs.Var(sizesFlag{&cfg.goroutines}, "goroutines", "scale suite: comma-separated `numbers` of goroutines of the per-entity locks")
	fs.Var(sizesFlag{&cfg.waiters}, "waiters", "scale suite: comma-separated `numbers` of waiters of the queue drains")
	fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 60*time.Second, "scale suite: time limit of a queue drain's queuing, and of its drain")
	fs.DurationVar(&cfg.peerWarmup, "peer-warmup", 2*time.Second, "scale suite: unmeasured work of a peer's run before it measures (cycling; drains of 10 waiters), each run a new JVM that compiles Curator's code meanwhile")
	fs.StringVar(&cfg.charts, "charts", "", "scale suite: write SVG charts of the results into `dir`")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON instead of tables")
	fs.BoolVar(&cfg.verbose, "v", true, "print progress to stderr")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.suite == "peers" && !set["rounds"] {
		// Peers start processes and the lost-reply runs take seconds:
		// fewer rounds keep a full run under ten minutes.
		cfg.rounds = 3
	}
	if cfg.suite == "scale" {
		// Sixteen per-entity runs and twelve drains a round: these keep
		// the suite to about five minutes.
		if !set["rounds"] {
			cfg.rounds = 3
		}
		if !set["duration"] {
			cfg.duration = time.Second
		}
		if cfg.ops > 0 {
			return cfg, errors.New("-ops: the scale suite measures for -duration")
		}
	} else if cfg.charts != "" {
		return cfg, errors.New("-charts: only the scale suite draws charts")
	}
	if cfg.baseline != "" {
		if cfg.suite != "peers" {
			return cfg, errors.New("-baseline: only the peers suite runs a baseline")
		}
		if err := checkRev(cfg.baseline); err != nil {
			return cfg, err
		}
	}
	switch {
	case cfg.duration <= 0 && cfg.ops <= 0:
		return cfg, errors.New("-duration or -ops must be positive")
	case cfg.ops < 0:
		return cfg, errors.New("-ops must not be negative")
	case cfg.warmup < 0:
		return cfg, errors.New("-warmup must not be negative")
	case cfg.slice <= 0:
		return cfg, errors.New("-slice must be positive")
	case cfg.rounds < 1:
		return cfg, errors.New("-rounds must be at least 1")
	case cfg.sessions < 2:
		return cfg, errors.New("-sessions must be at least 2")
	case cfg.sessionTimeout <= 0:
		return cfg, errors.New("-session-timeout must be positive")
	case cfg.handoffs < 1:
		return cfg, errors.New("-handoffs must be at least 1")
	case cfg.lostSessions < 1 || cfg.lostCycles < 1:
		return cfg, errors.New("-lost-sessions and -lost-cycles must be at least 1")
	case cfg.lostEvery < 1:
		return cfg, errors.New("-lost-every must be at least 1")
	case cfg.lostTimeout <= 0 || cfg.stall <= 0:
		return cfg, errors.New("-lost-timeout and -stall must be positive")
	case cfg.drainTimeout <= 0:
		return cfg, errors.New("-drain-timeout must be positive")
	case cfg.peerWarmup < 0:
		return cfg, errors.New("-peer-warmup must not be negative")
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, os.Stdout)
	if ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run starts (or reaches) the server, runs every round and prints the
// report. Everything it starts is stopped before it returns.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	scenarios, err := selectScenarios(cfg.suite, cfg.only)
	if err != nil {
		return err
	}
	if scenarios, err = withBaseline(scenarios, cfg); err != nil {
		return err
	}
	peers, err := preparePeers(cfg, scenarios)
	if err != nil {
		return err
	}
	defer peers.close()
	progress := func(format string, args ...any) {
		if cfg.verbose {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}

	addr, fsync := cfg.zkAddr, "unknown (external server)"
	if addr == "" {
		progress("starting ZooKeeper (forceSync=%v)...", cfg.fsync)
		srv, err := zktest.NewServer(
			zktest.WithForceSync(cfg.fsync),
			// ZooKeeper's own default: the 1s of the test servers would
			// make the server reap the mutex's empty container directory
			// between cycles, which production servers rarely do.
			zktest.WithContainerCheckInterval(time.Minute),
		)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := srv.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		addr = srv.Addr()
		fsync = fmt.Sprint(cfg.fsync)
	}

	if cfg.rtt > 0 {
		progress("every session behind a delay proxy: %v round trip", cfg.rtt)
		dp, err := newDelayProxy(addr, cfg.rtt/2)
		if err != nil {
			return err
		}
		defer dp.close()
		addr = dp.addr()
	}
	e, err := newEnv(ctx, cfg, addr, peers)
	if err != nil {
		return err
	}
	defer e.close()
	base := "/zkrecipes-bench/" + randomID()
	if err := e.mkdirAll(base); err != nil {
		return err
	}
	defer e.removeAll(base)
	if cfg.suite == "scale" {
		return runScale(ctx, e, scenarios, base, fsync, out, progress)
	}

	var unc []scenario
	var groups [][]scenario // the others, by group, in their first scenario's order
	for _, s := range scenarios {
		if !s.contended && s.run == nil {
			unc = append(unc, s)
			continue
		}
		i := slices.IndexFunc(groups, func(g []scenario) bool { return g[0].group == s.group })
		if i < 0 {
			groups = append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], s)
	}
	// round runs every scenario once, those of a group in an order that
	// rotates with n, and passes each result to record.
	round := func(e *env, n int, label string, record func(scenario, result)) error {
		if len(unc) > 0 {
			progress("%s: uncontended scenarios, interleaved", label)
			res, err := e.uncontended(ctx, unc, base, label)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			for _, s := range unc {
				record(s, res[s.id])
			}
		}
		for _, con := range groups {
			for i := range con {
				s := con[(i+n)%len(con)]
				if s.run != nil && label == warmupLabel {
					continue
				}
				progress("%s: %s", label, s.title)
				p := fmt.Sprintf("%s/%s-%s", base, s.id, label)
				var res result
				var err error
				if s.run != nil {
					res, err = s.run(ctx, e, p)
				} else {
					res, err = e.contended(ctx, s, p)
				}
				if err != nil {
					return fmt.Errorf("%s, %s: %w", label, s.title, err)
				}
				record(s, res)
			}
		}
		return nil
	}

	// One short unmeasured round first, so that the server's JIT compiler
	// has done its work before round 1.
	warm := *e
	warm.cfg.ops, warm.cfg.duration = 0, max(cfg.warmup, 500*time.Millisecond)
	if err := round(&warm, 0, warmupLabel, func(scenario, result) {}); err != nil {
		return err
	}
	rep := newReport(cfg, addr, fsync, e.serverVersion(), scenarios)
	if peers != nil && peers.baseline != nil {
		rep.Baseline = &baselineInfo{Revision: cfg.baseline, Commit: peers.baseline.commit}
	}
	for n := range cfg.rounds {
		err := round(e, n, fmt.Sprintf("round%d", n+1), func(s scenario, res result) {
			rep.add(s.id, res)
			progress("  %-32s %s", s.title, res.brief())
		})
		if err != nil {
			return err
		}
	}
	rep.finish()
	if cfg.json {
		return rep.writeJSON(out)
	}
	return rep.writeText(out)
}

// warmupLabel names the unmeasured first round.
const warmupLabel = "warm-up"

// randomID returns 12 random hex digits.
func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
