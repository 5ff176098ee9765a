package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// The guarded register. While a worker holds, each part of its hold
// appends to a register in ZooKeeper through Commit (a sequential child,
// created in one transaction with the check of the part's node) every
// guardEvery, and once more after its Done closed (a probe, which must
// be refused). Each entry's name carries the writer's token, mode and
// node; the sequence numbers the server gives them are the order in
// which the writes committed. CheckHistory then finds, from that order
// alone, any write that committed when its hold had ended.

// guardEvery is the time between two guarded writes of one part.
const guardEvery = 15 * time.Millisecond

// Write is one entry of a register's history.
type Write struct {
	Token int64
	Mode  Mode
	Node  string
	Seq   int64 // commit order
}

// RegisterPath is the register of the cell on path.
func RegisterPath(path string) string { return path + "-register" }

// modeChars are the modes as a register entry's name spells them.
var modeChars = map[Mode]string{Exclusive: "x", Shared: "s", Lease: "l"}

// entryPrefix is the name of p's entries, before the sequence number.
func entryPrefix(token int64, mode Mode, node string) string {
	return fmt.Sprintf("%d~%s~%s~", token, modeChars[mode], node)
}

// parseEntry reads a register entry's name.
func parseEntry(name string) (Write, bool) {
	f := strings.Split(name, "~")
	if len(f) != 4 {
		return Write{}, false
	}
	token, err1 := strconv.ParseInt(f[0], 10, 64)
	seq, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		return Write{}, false
	}
	for m, s := range modeChars {
		if s == f[1] {
			return Write{Token: token, Mode: m, Node: f[2], Seq: seq}, true
		}
	}
	return Write{}, false
}

// guardLog counts a cell's guarded writes in one episode.
type guardLog struct {
	mu        sync.Mutex
	committed int // Commit returned nil
	refused   int // refused before or by the server: not held, lost, suspended
	unknown   int // ErrCommitUnknown: connection lost, or the hold ended meanwhile
	probes    int // probes after a loss, all refused (one that is not is a problem)
}

func (g *guardLog) count(f func(g *guardLog)) {
	g.mu.Lock()
	f(g)
	g.mu.Unlock()
}

// guard writes to the cell's register under part p of a hold of mode
// until stop closes or p's Done does; after a loss it makes one probe.
// An in-flight write is abandoned when stop closes.
func (w *Worker) guard(p Part, mode Mode, stop <-chan struct{}, ep *episodeLog) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	entry := RegisterEntry(w.cell.Path, p.Token, mode, p.Node)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-p.Done:
			w.probe(ctx, p, entry, ep)
			return
		case <-t.C:
		}
		cctx, ccancel := context.WithTimeout(ctx, w.cell.Config.ReleaseTimeout)
		_, err := p.Commit(cctx, entry)
		ccancel()
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return // stopped before the write was sent
		case err == nil:
			ep.guard.count(func(g *guardLog) { g.committed++ })
		case errors.Is(err, recipe.ErrCommitUnknown):
			ep.guard.count(func(g *guardLog) { g.unknown++ })
		case errors.Is(err, recipe.ErrLost), errors.Is(err, recipe.ErrNotHeld):
			ep.guard.count(func(g *guardLog) { g.refused++ })
		default:
			ep.problem("worker %d: guarded write under %s returned an undocumented error: %v", w.ID, p.Node, err)
		}
		t.Reset(guardEvery)
	}
}

// probe writes once under a part whose Done has closed: it must be
// refused.
func (w *Worker) probe(ctx context.Context, p Part, entry recipe.Op, ep *episodeLog) {
	cctx, cancel := context.WithTimeout(ctx, w.cell.Config.ReleaseTimeout)
	defer cancel()
	_, err := p.Commit(cctx, entry)
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// stopped before the probe was sent
	case err == nil:
		ep.problem("worker %d: a write under %s committed after its Done closed (%v)", w.ID, p.Node, p.Err())
	case errors.Is(err, recipe.ErrLost), errors.Is(err, recipe.ErrNotHeld), errors.Is(err, recipe.ErrCommitUnknown):
		ep.guard.count(func(g *guardLog) { g.probes++ })
	default:
		ep.problem("worker %d: probe under %s returned an undocumented error: %v", w.ID, p.Node, err)
	}
}

// ensureRegister creates the cell's register.
func (c *Cell) ensureRegister() error { return EnsureRegister(c.Target.Raw, c.Path) }

// EnsureRegister creates the register of the lock on path, and its
// parents, if they are missing.
func EnsureRegister(conn *zk.Conn, path string) error {
	reg := RegisterPath(path)
	for i := 1; i <= len(reg); i++ {
		if i < len(reg) && reg[i] != '/' {
			continue
		}
		_, err := conn.Create(reg[:i], nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("register of %s: %w", path, err)
		}
	}
	return nil
}

// RegisterEntry is the guarded write of a hold (token, mode, node) to the
// register of the lock on path.
func RegisterEntry(path string, token int64, mode Mode, node string) recipe.Op {
	return recipe.CreateSequential(RegisterPath(path)+"/"+entryPrefix(token, mode, node), nil)
}

// checkRegister reads the cell's register, checks its history against
// the recipe's rule, empties it, and adds the counts to r.
func (c *Cell) checkRegister(ep *episodeLog, r *Result) {
	hist, err := ReadRegister(c.Target.Raw, c.Path, true)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	for _, v := range CheckHistory(hist, c.Adapter.MaxLeases) {
		r.Violations = append(r.Violations, "register: "+v)
	}
	ep.guard.count(func(g *guardLog) {
		r.Guarded = GuardCounts{Writes: len(hist), Committed: g.committed, Refused: g.refused, Unknown: g.unknown, Probes: g.probes}
	})
}

// ReadRegister returns the history of the register of the lock on path,
// in commit order, and with empty set deletes the entries it read.
func ReadRegister(conn *zk.Conn, path string, empty bool) ([]Write, error) {
	reg := RegisterPath(path)
	names, _, err := conn.Children(reg)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", reg, err)
	}
	var errs []error
	hist := make([]Write, 0, len(names))
	for _, n := range names {
		wr, ok := parseEntry(n)
		if !ok {
			errs = append(errs, fmt.Errorf("register %s: entry %q", reg, n))
			continue
		}
		hist = append(hist, wr)
	}
	slices.SortFunc(hist, func(a, b Write) int { return int(a.Seq - b.Seq) })
	for empty && len(names) > 0 {
		n := min(len(names), 200)
		ops := make([]any, n)
		for i, name := range names[:n] {
			ops[i] = &zk.DeleteRequest{Path: reg + "/" + name, Version: -1}
		}
		if _, err := conn.Multi(ops...); err != nil {
			errs = append(errs, fmt.Errorf("emptying register %s: %w", reg, err))
			break
		}
		names = names[n:]
	}
	return hist, errors.Join(errs...)
}

// GuardCounts are a cell's guarded writes over its episodes.
type GuardCounts struct {
	// Writes is the number of entries the register received, Committed
	// the Commits that returned nil; Unknown those whose outcome was
	// unknown (connection lost, or abandoned at the hold's end): Writes
	// lies between Committed and Committed+Unknown.
	Writes, Committed, Unknown int
	// Refused counts Commits refused because the hold was lost, suspended
	// or gone; Probes the writes after a loss, every one refused.
	Refused, Probes int
}

func (g *GuardCounts) add(o GuardCounts) {
	g.Writes += o.Writes
	g.Committed += o.Committed
	g.Unknown += o.Unknown
	g.Refused += o.Refused
	g.Probes += o.Probes
}

// CheckHistory checks a register's history (in commit order) against the
// recipe's rule. A write proves that its hold had been granted and that
// its node existed when the write committed; a node once gone never comes
// back, so a hold was in force from before its first write to after its
// last. It follows that:
//
//   - an Exclusive hold's writes are not interleaved with any other hold's
//     (both would have held at the same time);
//   - after an Exclusive hold's first write, no write of a lower token
//     follows (that node was created before the Exclusive one, so it had
//     to be gone before the Exclusive one was granted);
//   - at no point are more than maxLeases Lease holds between their first
//     and last writes.
func CheckHistory(hist []Write, maxLeases int) []string {
	type span struct {
		first, last int
		w           Write
	}
	spans := map[int64]*span{}
	var order []*span
	for i, w := range hist {
		s := spans[w.Token]
		if s == nil {
			s = &span{first: i, last: i, w: w}
			spans[w.Token] = s
			order = append(order, s)
		}
		s.last = i
	}
	var out []string
	for _, s := range order {
		if s.w.Mode != Exclusive {
			continue
		}
		for j := s.first + 1; j < len(hist); j++ {
			w := hist[j]
			switch {
			case w.Token < s.w.Token:
				out = append(out, fmt.Sprintf("write %d by token %d (%s) after the first write of exclusive token %d (%s)",
					w.Seq, w.Token, w.Node, s.w.Token, s.w.Node))
			case j < s.last && w.Token != s.w.Token:
				out = append(out, fmt.Sprintf("write %d by token %d (%s) between writes of exclusive token %d (%s)",
					w.Seq, w.Token, w.Node, s.w.Token, s.w.Node))
			}
		}
	}
	if maxLeases > 0 {
		open := 0
		for i, w := range hist {
			s := spans[w.Token]
			if s.w.Mode != Lease {
				continue
			}
			if s.first == i {
				open++
				if open > maxLeases {
					out = append(out, fmt.Sprintf("write %d by token %d (%s): %d leases in force, more than %d",
						w.Seq, w.Token, w.Node, open, maxLeases))
				}
			}
			if s.last == i {
				open--
			}
		}
	}
	return out
}
