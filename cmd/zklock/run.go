package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

const runHelp = `usage: zklock run [flags] PATH [--] CMD [ARG...]

Take the lock at PATH, run CMD, release the lock when CMD exits, and exit
with CMD's status. By default the lock is the mutex at PATH (the lock of
mutex.New in Go and of Curator's InterProcessMutex).

flags:
  -w, --timeout DURATION         give up waiting after DURATION (500ms, 30s,
                                 or a number of seconds; default: wait forever)
  -n, --nonblock                 do not wait: give up if the lock is held
  -E, --conflict-exit-code N     exit status when not acquired (default 1)
  -q, --quiet                    say nothing on stderr when not acquired
  -s, --shared                   take the read lock of the read/write lock
  -x, --exclusive                take the write lock of the read/write lock
  --leases N                     take one lease of the N-lease semaphore
  --kill-after DURATION          after a loss, SIGKILL CMD's process group
                                 this long after SIGTERM (default 10s)
  --zk HOST:PORT[,HOST:PORT...]  servers (default: $ZKLOCK_SERVERS,
                                 else 127.0.0.1:2181)
  --session-timeout DURATION     ZooKeeper session timeout (default 10s)
  --acl, --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name
                                 credentials' ACL and TLS: see "zklock --help"

CMD runs in its own process group with ZKLOCK_TOKEN (the fencing token),
ZKLOCK_PATH and ZKLOCK_NODE in its environment, and without ZKLOCK_AUTH.
SIGINT, SIGTERM and SIGHUP are forwarded to it; the lock is released when
it exits. If the lock is lost while CMD runs, CMD's process group gets
SIGTERM (then SIGKILL after --kill-after) and zklock exits with 75. If
zklock itself stops or hangs for a quarter of the session timeout, a
watchdog sends CMD's process group SIGTERM, then SIGKILL.
`

const electHelp = `usage: zklock elect [flags] PATH [--] CMD [ARG...]

Campaign for leadership at PATH; once leader, run CMD, resign when CMD
exits, and exit with CMD's status. The election is the one of leader.New
in Go and of Curator's LeaderLatch.

flags:
  --id ID                        this participant's id, shown by "zklock
                                 leader" (default: host name:pid)
  -w, --timeout DURATION         give up campaigning after DURATION
                                 (default: wait forever)
  -E, --conflict-exit-code N     exit status when not elected (default 1)
  -q, --quiet                    say nothing on stderr when not elected
  --kill-after DURATION          after a loss, SIGKILL CMD's process group
                                 this long after SIGTERM (default 10s)
  --zk HOST:PORT[,HOST:PORT...]  servers (default: $ZKLOCK_SERVERS,
                                 else 127.0.0.1:2181)
  --session-timeout DURATION     ZooKeeper session timeout (default 10s)
  --acl, --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name
                                 credentials' ACL and TLS: see "zklock --help"

CMD runs as for "zklock run": its own process group, ZKLOCK_TOKEN,
ZKLOCK_PATH and ZKLOCK_NODE, no ZKLOCK_AUTH, signals forwarded, a
watchdog; on loss of leadership SIGTERM, then SIGKILL, and exit status 75.
`

// defaultKillAfter is --kill-after's default.
const defaultKillAfter = 10 * time.Second

// releaseTimeout bounds the release of the lock after CMD exits.
const releaseTimeout = 10 * time.Second

// holdFlags are the flags run and elect share.
type holdFlags struct {
	timeout      time.Duration
	timeoutFlag  durationValue
	nonblock     bool
	conflictCode int
	quiet        bool
	killAfter    time.Duration
	killFlag     durationValue
}

func (h *holdFlags) register(cmd *command, withNonblock bool) {
	fs := cmd.fs
	h.timeoutFlag.d = &h.timeout
	fs.Var(&h.timeoutFlag, "w", "")
	fs.Var(&h.timeoutFlag, "timeout", "")
	if withNonblock {
		fs.BoolVar(&h.nonblock, "n", false, "")
		fs.BoolVar(&h.nonblock, "nonblock", false, "")
	}
	fs.IntVar(&h.conflictCode, "E", exitConflict, "")
	fs.IntVar(&h.conflictCode, "conflict-exit-code", exitConflict, "")
	fs.BoolVar(&h.quiet, "q", false, "")
	fs.BoolVar(&h.quiet, "quiet", false, "")
	h.killAfter = defaultKillAfter
	h.killFlag.d = &h.killAfter
	fs.Var(&h.killFlag, "kill-after", "")
}

func (h *holdFlags) check() error {
	switch {
	case h.timeoutFlag.set && h.timeout <= 0:
		return usageErr("--timeout %v: must be positive", h.timeout)
	case h.timeoutFlag.set && h.nonblock:
		return usageErr("--timeout and --nonblock exclude each other")
	case h.conflictCode < 0 || h.conflictCode > 255:
		return usageErr("--conflict-exit-code %d: must be 0 to 255", h.conflictCode)
	case h.killAfter < 0:
		return usageErr("--kill-after %v: must not be negative", h.killAfter)
	}
	return nil
}

// waitContext returns the context of the wait for the lock: bounded by
// --timeout and cancelled (with a signalError cause) by SIGINT, SIGTERM or
// SIGHUP.
// stop ends the signal watch and reports the signal that cancelled, if
// any; the signals that arrive later are left in sigs.
func (h *holdFlags) waitContext(sigs <-chan os.Signal) (ctx context.Context, stop func() os.Signal) {
	ctx, cancelTimer := context.Background(), context.CancelFunc(func() {})
	if h.timeoutFlag.set {
		ctx, cancelTimer = context.WithTimeout(ctx, h.timeout)
	}
	ctx, stopSignals := signalContext(ctx, sigs)
	return ctx, func() os.Signal {
		s := stopSignals()
		cancelTimer()
		return s
	}
}

// signalContext returns a context cancelled (with a cause naming it) by
// the first signal on sigs. stop ends the watch and reports the signal
// that cancelled, if any; the signals that arrive later are left in sigs.
func signalContext(parent context.Context, sigs <-chan os.Signal) (ctx context.Context, stop func() os.Signal) {
	ctx, cancel := context.WithCancelCause(parent)
	quit := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-sigs:
			cancel(fmt.Errorf("interrupted by %v", s))
			got <- s
		case <-quit:
			got <- nil
		}
	}()
	return ctx, func() os.Signal {
		close(quit)
		s := <-got
		cancel(nil)
		return s
	}
}

// runFlags are the flags of run.
type runFlags struct {
	holdFlags
	shared, exclusive bool
	leases            int
}

func newRunCommand() *command {
	cmd := newCommand("run", runHelp)
	var f runFlags
	f.register(cmd, true)
	cmd.fs.BoolVar(&f.shared, "s", false, "")
	cmd.fs.BoolVar(&f.shared, "shared", false, "")
	cmd.fs.BoolVar(&f.exclusive, "x", false, "")
	cmd.fs.BoolVar(&f.exclusive, "exclusive", false, "")
	cmd.fs.IntVar(&f.leases, "leases", 0, "")
	cmd.run = func(p *proc, args []string) error {
		leasesSet := isSet(cmd.fs, "leases")
		switch {
		case f.shared && f.exclusive:
			return usageErr("--shared and --exclusive exclude each other")
		case leasesSet && f.leases < 1:
			return usageErr("--leases %d: must be at least 1", f.leases)
		case leasesSet && (f.shared || f.exclusive):
			return usageErr("--leases excludes --shared and --exclusive")
		}
		if err := f.check(); err != nil {
			return err
		}
		path, argv, err := splitCmd(args)
		if err != nil {
			return err
		}
		cfg, err := cmd.conn.resolve(p.getenv)
		if err != nil {
			return err
		}
		take := func(ctx context.Context, c *recipe.Client) (recipe.Held, error) {
			return f.take(ctx, c, path)
		}
		return hold(p, cfg, &f.holdFlags, path, argv, take)
	}
	return cmd
}

// take acquires the kind of lock the flags ask for.
func (f *runFlags) take(ctx context.Context, c *recipe.Client, path string) (recipe.Held, error) {
	var a recipe.Acquirer
	switch {
	case f.leases > 0:
		s, err := semaphore.New(c, path, f.leases)
		if err != nil {
			return nil, err
		}
		a = s
	case f.shared, f.exclusive:
		rw, err := rwlock.New(c, path)
		if err != nil {
			return nil, err
		}
		a = rw.Writer()
		if f.shared {
			a = rw.Reader()
		}
	default:
		m, err := mutex.New(c, path)
		if err != nil {
			return nil, err
		}
		a = m
	}
	return a.Take(ctx, !f.nonblock)
}

func newElectCommand() *command {
	cmd := newCommand("elect", electHelp)
	var f holdFlags
	var id string
	f.register(cmd, false)
	cmd.fs.StringVar(&id, "id", "", "")
	cmd.run = func(p *proc, args []string) error {
		if err := f.check(); err != nil {
			return err
		}
		if isSet(cmd.fs, "id") && id == "" {
			return usageErr("--id must not be empty")
		}
		path, argv, err := splitCmd(args)
		if err != nil {
			return err
		}
		cfg, err := cmd.conn.resolve(p.getenv)
		if err != nil {
			return err
		}
		take := func(ctx context.Context, c *recipe.Client) (recipe.Held, error) {
			e, err := newElection(c, path, id)
			if err != nil {
				return nil, err
			}
			return e.Take(ctx, true)
		}
		return hold(p, cfg, &f, path, argv, take)
	}
	return cmd
}

// forwarded are the signals zklock passes on to CMD's process group, and
// that end a wait for the lock: SIGHUP among them, since an operator's
// closing SSH session sends it, and zklock must then release the lock
// rather than die with it held until its session expires.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// hold connects, takes what take takes, runs CMD under it and releases it.
func hold(p *proc, cfg connConfig, f *holdFlags, path string, argv []string,
	take func(context.Context, *recipe.Client) (recipe.Held, error)) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// A signal ends the connecting too: a server that never answers
	// must not hold zklock for the whole session timeout.
	connCtx, stopConn := signalContext(context.Background(), sigs)
	c, err := connect(connCtx, cfg)
	if sig := stopConn(); sig != nil {
		if c != nil {
			c.Close()
		}
		return &exitError{code: signalStatus(sig)}
	}
	if err != nil {
		return err
	}
	defer c.Close()

	ctx, stop := f.waitContext(sigs)
	h, err := take(ctx, c)
	sig := stop()
	if err != nil {
		if sig != nil {
			return &exitError{code: signalStatus(sig)}
		}
		return acquireError(err, path, f)
	}
	if sig != nil {
		releaseHeld(p, h, path)
		return &exitError{code: signalStatus(sig)}
	}
	status, lost := supervise(p, h, path, argv, sigs, f.killAfter, c.SessionTimeout())
	if lost {
		return &exitError{code: exitLost}
	}
	releaseHeld(p, h, path)
	return &exitError{code: status}
}

// releaseHeld releases h, bounded by releaseTimeout, and says on stderr
// when that failed (closing the client ends the session anyway).
func releaseHeld(p *proc, h recipe.Held, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		fmt.Fprintf(p.stderr, "zklock: releasing %s: %v\n", path, err)
	}
}

// acquireError turns a failed acquire or campaign into the exit status the
// manual promises. Not acquiring (held elsewhere, or the timeout passed)
// is said on stderr unless --quiet; every other failure is.
func acquireError(err error, path string, f *holdFlags) error {
	var msg string
	switch {
	case errors.Is(err, recipe.ErrMismatch):
		return failf(exitMismatch, "%s holds another kind of lock: %v", path, err)
	case errors.Is(err, recipe.ErrWouldBlock), errors.Is(err, mutex.ErrLocked),
		errors.Is(err, rwlock.ErrLocked), errors.Is(err, semaphore.ErrNoLease):
		msg = path + " is held elsewhere"
	case errors.Is(err, context.DeadlineExceeded):
		msg = path + ": not acquired before the timeout"
	default:
		return zkError(err)
	}
	if f.quiet {
		msg = ""
	}
	return &exitError{code: f.conflictCode, msg: msg}
}

// zkError turns any other error of the library into an exit status.
func zkError(err error) error {
	switch {
	case errors.Is(err, recipe.ErrInvalidPath), errors.Is(err, recipe.ErrInvalidArgument):
		return &exitError{code: exitUsage, msg: err.Error(), usage: true}
	case errors.Is(err, recipe.ErrPermission):
		return failf(exitPermission, "%v", err)
	}
	return failf(exitFailure, "%v", err)
}

// connect opens the session, giving up after the session timeout (or
// when parent ends); the error then says why each server could not be
// reached.
func connect(parent context.Context, cfg connConfig) (*recipe.Client, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.sessionTimeout)
	defer cancel()
	var dl dialLog
	opts := []recipe.Option{recipe.WithSessionTimeout(cfg.sessionTimeout), recipe.WithDialer(dl.dial)}
	opts = append(opts, cfg.securityOptions()...)
	c, err := recipe.Connect(ctx, cfg.servers, opts...)
	if parent.Err() != nil {
		if c != nil {
			c.Close()
		}
		return nil, parent.Err()
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			msg := fmt.Sprintf("cannot reach ZooKeeper at %s within %v", strings.Join(cfg.servers, ","), cfg.sessionTimeout)
			if why := dl.cause(cfg.servers); why != "" {
				msg += ": " + why
			}
			return nil, failf(exitFailure, "%s", msg)
		}
		return nil, zkError(err)
	}
	return c, nil
}

// securityOptions are the client's options of credentials, ACL and TLS:
// with credentials, and the ACL mode read or private, the nodes zklock
// creates are its user's, and the library's check of the lock directory's
// ACL runs (see recipe.WithACL); the mode open creates them open and skips
// the check.
func (cfg connConfig) securityOptions() []recipe.Option {
	var opts []recipe.Option
	if cfg.auth {
		opts = append(opts, recipe.WithDigestAuth(cfg.user, cfg.password))
	}
	switch cfg.acl {
	case aclRead:
		opts = append(opts, recipe.WithACL(slices.Concat(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead))...))
	case aclPrivate:
		opts = append(opts, recipe.WithACL(zk.AuthACL(zk.PermAll)...))
	default:
		opts = append(opts, recipe.WithAnyDirectoryACL())
	}
	if cfg.tls != nil {
		opts = append(opts, recipe.WithTLS(cfg.tls))
	}
	return opts
}

// dialLog dials the servers and remembers how the last dial of each one
// went, to tell why a connection could not be made.
type dialLog struct {
	mu   sync.Mutex
	last map[string]error // by address: the last dial's error, nil when it connected
}

func (d *dialLog) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, address, timeout)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = make(map[string]error)
	}
	d.last[address] = err
	return conn, err
}

// cause says why none of servers could be reached, by the last dial of
// each (in the order given); "" when none was dialled.
func (d *dialLog) cause(servers []string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var why []string
	for _, s := range servers {
		err, dialled := d.last[s]
		switch {
		case !dialled:
		case err != nil:
			why = append(why, err.Error())
		default:
			why = append(why, s+" accepted the connection but opened no session (not a ZooKeeper client port, or a server that does not serve: no quorum?)")
		}
	}
	return strings.Join(why, "; ")
}
