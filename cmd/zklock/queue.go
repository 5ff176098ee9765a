package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/driver"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

const leaderHelp = `usage: zklock leader [flags] PATH

Print the id of the current leader of the election at PATH (exit status 3
when nobody leads).

flags:
  --watch                        print the id of every new leader, one per
                                 line, until interrupted
  --zk HOST:PORT[,HOST:PORT...]  servers (default: $ZKLOCK_SERVERS,
                                 else 127.0.0.1:2181)
  --session-timeout DURATION     ZooKeeper session timeout (default 10s)
  --acl, --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name
                                 credentials' ACL and TLS: see "zklock --help"
`

const lsHelp = `usage: zklock ls [flags] PATH

List the queue of the lock directory PATH in order, whatever wrote it
(zklock, the Go packages, Curator, kazoo's Lock): position, state
(holds, waits, or ? when unknown), kind (mutex, read, write, lease,
latch), age, session ("persistent" for a node no session owns: not a
holder, and nothing will delete it), token (the node's czxid), node name
and data (the holder's identity).

flags:
  --json                         print JSON instead of a table
  --leases N                     the number of leases of a semaphore at PATH,
                                 to tell its holders from its waiters
                                 (default: the number the semaphore records
                                 at PATH)
  --zk HOST:PORT[,HOST:PORT...]  servers (default: $ZKLOCK_SERVERS,
                                 else 127.0.0.1:2181)
  --session-timeout DURATION     ZooKeeper session timeout (default 10s)
  --acl, --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name
                                 credentials' ACL and TLS: see "zklock --help"
`

const rmHelp = `usage: zklock rm [flags] PATH NODE

Delete NODE (a name "zklock ls PATH" shows) from the queue of PATH, to
clear a holder whose process is gone but whose session lingers. Without
--force, only show what would be deleted. A holder that is still alive is
told through its loss signal (a zklock running CMD stops it and exits 75).

flags:
  --force                        delete the node
  --zk HOST:PORT[,HOST:PORT...]  servers (default: $ZKLOCK_SERVERS,
                                 else 127.0.0.1:2181)
  --session-timeout DURATION     ZooKeeper session timeout (default 10s)
  --acl, --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name
                                 credentials' ACL and TLS: see "zklock --help"
`

// queueTimeout bounds the requests of leader, ls and rm, once connected: a
// queue too long to read within it (or a server too slow) ends the command
// with an error that says so (see pastLimit).
const queueTimeout = 30 * time.Second

func newLeaderCommand() *command {
	cmd := newCommand("leader", leaderHelp)
	var watch bool
	cmd.fs.BoolVar(&watch, "watch", false, "")
	cmd.run = func(p *proc, args []string) error {
		if err := exactArgs(args, "PATH"); err != nil {
			return err
		}
		path := args[0]
		if err := checkPath(path); err != nil {
			return err
		}
		cfg, err := cmd.conn.resolve(p.getenv)
		if err != nil {
			return err
		}
		c, err := connect(context.Background(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		e, err := newElection(c, path, "")
		if err != nil {
			return zkError(err)
		}
		if watch {
			return watchLeaders(p, e)
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.limit())
		defer cancel()
		id, err := currentLeader(ctx, e)
		if errors.Is(err, leader.ErrNoLeader) {
			return failf(exitNoLeader, "nobody leads at %s", path)
		}
		if err != nil {
			return pastLimit(ctx, cmd.name, path, p.limit(), err)
		}
		fmt.Fprintln(p.stdout, recipe.Quote(id))
		return nil
	}
	return cmd
}

// watchLeaders prints every new leader's id until SIGINT, SIGTERM or SIGHUP.
func watchLeaders(p *proc, e *leader.Election) error {
	ctx, stop := signal.NotifyContext(context.Background(), forwarded...)
	defer stop()
	ids, stopped, err := observeLeaders(ctx, e)
	if err != nil {
		return zkError(err)
	}
	for id := range ids {
		fmt.Fprintln(p.stdout, recipe.Quote(id))
	}
	if err := stopped(); err != nil {
		return zkError(err)
	}
	return nil
}

// queueNames are the lock names of every recipe, ours and Curator's.
var queueNames = driver.LockNames()

// kindOf names the kind of a node (mutex, read, write, lease, latch) from
// its name, "?" when it is of no known kind or its sequence number does
// not parse (_c_x-lock--1, or one beyond int64).
func kindOf(node string) string {
	ln, kind, ok := driver.KindOf(node)
	if !ok {
		return "?"
	}
	if _, ok := driver.Sequence(node, ln); !ok {
		return "?"
	}
	return kind
}

// familyOf groups kinds that queue together: the read and write nodes of
// a read/write lock form one queue.
func familyOf(kind string) string {
	if kind == "read" {
		return "write"
	}
	return kind
}

// errUnknown is the decision of queueDriver on a lease node when the
// number of leases is not known.
var errUnknown = errors.New("zklock: number of leases unknown")

// queueDriver decides whether a node of any kind holds, among the nodes
// of its own family in the sorted queue, with the driver of its recipe.
// leases is the number of leases of a semaphore, 0 when unknown.
//
// It is a [driver.Positioner]: the engine judges every node of a listing
// at its index, and the families of a listing are sorted out once, on its
// first node, so that judging a queue of n nodes takes time linear in n.
func queueDriver(leases int) driver.Driver {
	return &queueDecider{leases: leases}
}

// queueDecider is queueDriver's driver. It keeps the families of the last
// listing it was asked about.
type queueDecider struct {
	leases int

	mu     sync.Mutex
	sorted []string   // the listing below is of (the caller's slice)
	own    [][]string // by index in sorted: the nodes of its family, in order
	at     []int      // by index in sorted: its index in own[i]
}

func (q *queueDecider) Decide(sorted []string, self string) (driver.Decision, error) {
	i := slices.Index(sorted, self)
	if i < 0 {
		return driver.Decision{}, fmt.Errorf("%w: %q", driver.ErrNotInQueue, self)
	}
	return q.DecideAt(sorted, i)
}

func (q *queueDecider) DecideAt(sorted []string, i int) (driver.Decision, error) {
	if i < 0 || i >= len(sorted) {
		return driver.Decision{}, fmt.Errorf("%w: index %d of %d", driver.ErrNotInQueue, i, len(sorted))
	}
	own, at := q.family(sorted, i)
	self := sorted[i]
	kind := kindOf(self)
	if kind == "lease" && q.leases < 1 {
		return driver.Decision{}, errUnknown
	}
	d := driver.Mutex() // for a node of no known kind
	if ln, _, ok := driver.KindOf(self); ok {
		k, _ := driver.KindNamed(ln)
		var err error
		if d, err = k.Driver(q.leases); err != nil {
			return driver.Decision{}, err
		}
	}
	return driver.DecideAt(d, own, at)
}

// family returns the nodes of sorted[i]'s family, in order, and its index
// among them, sorting sorted out into families unless it was the listing
// of the last call.
func (q *queueDecider) family(sorted []string, i int) ([]string, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sorted) != len(sorted) || &q.sorted[0] != &sorted[0] || q.sorted[i] != sorted[i] {
		q.index(sorted)
	}
	return q.own[i], q.at[i]
}

// index sorts sorted out into families. q.mu is held.
func (q *queueDecider) index(sorted []string) {
	families := map[string][]string{}
	fam := make([]string, len(sorted))
	q.at = make([]int, len(sorted))
	for i, n := range sorted {
		fam[i] = familyOf(kindOf(n))
		q.at[i] = len(families[fam[i]])
		families[fam[i]] = append(families[fam[i]], n)
	}
	q.own = make([][]string, len(sorted))
	for i := range sorted {
		q.own[i] = families[fam[i]]
	}
	q.sorted = sorted
}

// entry is one line of ls.
type entry struct {
	Position   int       `json:"position"`
	Holder     *bool     `json:"holder"`
	Kind       string    `json:"kind"`
	Node       string    `json:"node"`
	Sequence   int64     `json:"sequence"`
	Session    string    `json:"session"`
	Persistent bool      `json:"persistent,omitempty"` // no session owns the node
	Token      int64     `json:"token"`
	Created    time.Time `json:"created"`
	AgeSeconds *float64  `json:"age_seconds"`
	Data       string    `json:"data"`
}

// listing is the JSON document of ls.
type listing struct {
	Path         string  `json:"path"`
	Leases       int     `json:"leases,omitempty"` // of a semaphore, when known
	Participants []entry `json:"participants"`
}

// queue reads the queue of lk (see queueLock); leases, when known, lets
// lease holders be marked.
func queue(ctx context.Context, lk *recipe.Lock, leases int) ([]entry, error) {
	ps, err := lk.Participants(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]entry, len(ps))
	for i, p := range ps {
		e := entry{
			Position:   i,
			Kind:       kindOf(p.Node),
			Node:       p.Node,
			Sequence:   p.Sequence,
			Session:    "0x" + strconv.FormatInt(p.Session, 16),
			Persistent: p.Persistent,
			Token:      p.Token,
			Data:       printable(p.Data),
		}
		if e.Kind != "?" && (e.Kind != "lease" || leases > 0) {
			held := p.Holder // decided by queueDriver
			e.Holder = &held
		}
		if !p.Created.IsZero() {
			e.Created = p.Created
			age := float64(now.Sub(p.Created).Milliseconds()) / 1000 // to the millisecond: 1.52, not 1.5196311150000001
			e.AgeSeconds = &age
		}
		out[i] = e
	}
	return out, nil
}

// printable returns node data as recipe.Quote prints it.
func printable(data []byte) string { return recipe.Quote(data) }

func newLsCommand() *command {
	cmd := newCommand("ls", lsHelp)
	var asJSON bool
	var leases int
	cmd.fs.BoolVar(&asJSON, "json", false, "")
	cmd.fs.IntVar(&leases, "leases", 0, "")
	cmd.run = func(p *proc, args []string) error {
		if err := exactArgs(args, "PATH"); err != nil {
			return err
		}
		path := args[0]
		if err := checkPath(path); err != nil {
			return err
		}
		if isSet(cmd.fs, "leases") && leases < 1 {
			return usageErr("--leases %d: must be at least 1", leases)
		}
		return onQueue(cmd, p, path, leases, func(_ context.Context, _ *recipe.Lock, es []entry, leases int) error {
			if !asJSON {
				printTable(p, es)
				return nil
			}
			enc := json.NewEncoder(jsonEscaper{p.stdout})
			enc.SetIndent("", "  ")
			if es == nil {
				es = []entry{}
			}
			return enc.Encode(listing{Path: path, Leases: leases, Participants: es})
		})
	}
	return cmd
}

// printTable prints entries as ls's table.
func printTable(p *proc, es []entry) {
	tw := tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tSTATE\tKIND\tAGE\tSESSION\tTOKEN\tNODE\tDATA")
	for _, e := range es {
		session := e.Session
		if e.Persistent {
			session = "persistent"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
			e.Position, state(e.Holder), e.Kind, age(e.AgeSeconds), session, e.Token, recipe.Quote(e.Node), e.Data)
	}
	_ = tw.Flush()
}

func state(holder *bool) string {
	switch {
	case holder == nil:
		return "?"
	case *holder:
		return "holds"
	}
	return "waits"
}

func age(seconds *float64) string {
	if seconds == nil {
		return "?"
	}
	d := time.Duration(*seconds * float64(time.Second))
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func newRmCommand() *command {
	cmd := newCommand("rm", rmHelp)
	var force bool
	cmd.fs.BoolVar(&force, "force", false, "")
	cmd.run = func(p *proc, args []string) error {
		if err := exactArgs(args, "PATH", "NODE"); err != nil {
			return err
		}
		path, node := args[0], args[1]
		if err := checkPath(path); err != nil {
			return err
		}
		if node == "" || strings.ContainsRune(node, '/') {
			return usageErr("NODE %q: want a node name as \"zklock ls\" shows it", node)
		}
		return onQueue(cmd, p, path, 0, func(ctx context.Context, lk *recipe.Lock, es []entry, _ int) error {
			var found []entry
			for _, e := range es {
				if e.Node == node {
					found = append(found, e)
				}
			}
			if len(found) == 0 {
				return failf(exitConflict, "no node %s in the queue of %s", recipe.Quote(node), path)
			}
			if !force {
				fmt.Fprintln(p.stdout, "would delete (run again with --force to delete):")
				printTable(p, found)
				return nil
			}
			if err := lk.Evict(ctx, node); err != nil {
				return zkError(fmt.Errorf("delete %s/%s: %w", path, node, err))
			}
			fmt.Fprintf(p.stdout, "deleted %s/%s\n", path, recipe.Quote(node))
			return nil
		})
	}
	return cmd
}

// onQueue connects, reads the queue of path and calls fn with it, the lock
// that read it and the number of leases it used, within queueTimeout.
// leases is the number of leases of a semaphore at path that --leases
// gave, 0 when it was not given: then the number the semaphore recorded in
// the directory (see recordedLeases) is used, if any.
func onQueue(cmd *command, p *proc, path string, leases int, fn func(context.Context, *recipe.Lock, []entry, int) error) error {
	cfg, err := cmd.conn.resolve(p.getenv)
	if err != nil {
		return err
	}
	c, err := connect(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), p.limit())
	defer cancel()
	recorded, missing := recordedLeases(ctx, c, path)
	if missing && cmd.name == "ls" {
		// rm finds no node in it, and says so (1).
		return failf(exitNoInput, "no lock directory %s", path)
	}
	switch {
	case leases == 0:
		leases = recorded
	case recorded > 0 && recorded != leases:
		fmt.Fprintf(p.stderr, "zklock %s: warning: %s records %d leases; using --leases %d\n", cmd.name, path, recorded, leases)
	}
	lk, err := queueLock(c, path, leases)
	if err != nil {
		return zkError(err)
	}
	es, err := queue(ctx, lk, leases)
	if err != nil {
		return pastLimit(ctx, cmd.name, path, p.limit(), err)
	}
	return fn(ctx, lk, es, leases)
}

// pastLimit is the error of command name on path: when the command's
// limit ended it (ctx, of that limit, has ended), an error that says so,
// what the limit was, and why a queue can take that long; zkError's
// otherwise.
func pastLimit(ctx context.Context, name, path string, limit time.Duration, err error) error {
	if ctx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
		return zkError(err)
	}
	return failf(exitFailure, "%s %s: not done within %v, the limit of %s: the queue is too long to read "+
		"in that time (a request per node), or the server too slow", name, path, limit, name)
}

// queueLock is the engine's view of every node of any kind in the lock
// directory at path, for listing and evicting.
func queueLock(c *recipe.Client, path string, leases int) (*recipe.Lock, error) {
	return recipe.NewLock(c, path, recipe.LockSpec{
		Recipe:   "zklock",
		LockName: mutex.LockName,
		Queue:    queueNames,
		Driver:   queueDriver(leases),
	}, nil)
}

// leasesRecord is how the semaphore package records its number of leases
// in the data of its directory: "maxLeases=N".
const leasesRecord = "maxLeases="

// recordedLeases returns the number of leases a semaphore at path recorded
// in the directory's data, or 0 when there is no such record (no
// semaphore ever used path) or it cannot be read; missing is true when
// the server says the directory does not exist.
// Nothing depends on the number but the states ls shows, which stay "?"
// without it.
func recordedLeases(ctx context.Context, c *recipe.Client, path string) (leases int, missing bool) {
	type reply struct {
		data []byte
		err  error
	}
	got := make(chan reply, 1)
	go func() {
		// A request of the wire client waits through a reconnect; the
		// client's Close, deferred by the caller, ends it.
		data, _, err := c.Conn().Get(path)
		got <- reply{data, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			return 0, errors.Is(r.err, zk.ErrNoNode)
		}
		return parseLeases(r.data), false
	case <-ctx.Done():
		return 0, false
	}
}

// jsonEscaper writes JSON with every character that is not printable
// (strconv.IsPrint: C1 controls, U+202E and the other format characters,
// line separators) escaped as \uXXXX. The encoder writes such characters
// only inside strings, where the escape means the same character: the
// document is the same, and a terminal showing it acts on none of them.
type jsonEscaper struct{ w io.Writer }

func (j jsonEscaper) Write(b []byte) (int, error) {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r < utf8.RuneSelf || strconv.IsPrint(r) && r != utf8.RuneError:
			out = append(out, b[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// parseLeases reads a semaphore's record of its number of leases, 0 when
// data is not one.
func parseLeases(data []byte) int {
	v, ok := strings.CutPrefix(string(data), leasesRecord)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return 0
	}
	return n
}
