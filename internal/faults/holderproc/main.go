// Command holderproc is one contender of the process fault tests
// (internal/faults, process_test.go): a process of its own that connects
// to ZooKeeper with a short session, acquires one recipe's lock and, while
// holding, writes to the test's fenced store (a [faults.TokenStore]) every
// few milliseconds under the hold's fencing token.
//
// Before each write it asks the hold whether it is still in force (Err,
// then Done) and stops at the first loss: it reports the loss, makes one
// deliberate write under its old token (which the store must refuse),
// releases and exits (with -again N, it takes the lock again and holds it
// as holder number N, until its standard input ends). It also stops,
// releasing, when its standard input ends, and, reporting it, when the
// store refuses a write (as a write in flight across a pause is). The test
// kills it (SIGKILL), pauses it (SIGSTOP, SIGCONT) or cuts it off (a proxy
// of the test's) while it holds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/recipe"
)

func main() { os.Exit(run()) }

type config struct {
	zk, path, recipe, store string
	id, again               int
	session, every, life    time.Duration
}

func run() int {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "", "ZooKeeper server host:port")
	flag.StringVar(&cfg.path, "path", "", "lock path")
	flag.StringVar(&cfg.recipe, "recipe", "mutex", "adapter name (internal/faults: mutex, rwlock-read, rwlock-write, semaphore-1, leader)")
	flag.StringVar(&cfg.store, "store", "", "unix socket of the fenced store")
	flag.IntVar(&cfg.id, "id", 0, "this holder's number")
	flag.DurationVar(&cfg.session, "session", 2*time.Second, "session timeout")
	flag.DurationVar(&cfg.every, "every", 5*time.Millisecond, "time between two writes")
	flag.DurationVar(&cfg.life, "life", 3*time.Minute, "bound on the whole run")
	flag.IntVar(&cfg.again, "again", -1, "after a loss, take the lock again and hold it as holder number N (-1: end)")
	flag.Parse()
	a := faults.Named(cfg.recipe)
	if a == nil || cfg.zk == "" || cfg.path == "" || cfg.store == "" {
		fmt.Fprintln(os.Stderr, "holderproc: need -zk, -path, -store and a known -recipe")
		return 2
	}
	st, err := faults.DialStore(cfg.store)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		return 1
	}
	defer st.Close()
	h := &holder{cfg: cfg, st: st}
	if err := h.run(a); err != nil {
		h.send(faults.StoreMsg{Kind: faults.MsgFailed, Err: err.Error()})
		fmt.Fprintf(os.Stderr, "holderproc %d: %v\n", cfg.id, err)
		return 1
	}
	return 0
}

type holder struct {
	cfg   config
	st    *faults.StoreClient
	tap   tap
	token int64
}

// send sends m, stamped with the holder's id and token, to the store.
func (h *holder) send(m faults.StoreMsg) (faults.StoreReply, error) {
	m.ID, m.PID = h.cfg.id, os.Getpid()
	if m.Token == 0 {
		m.Token = h.token
	}
	return h.st.Send(m)
}

func (h *holder) run(a *faults.Adapter) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.life)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	c, err := recipe.Connect(ctx, []string{h.cfg.zk}, recipe.WithSessionTimeout(h.cfg.session), recipe.WithDialer(h.tap.dial))
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := h.send(faults.StoreMsg{Kind: faults.MsgHello, Session: c.SessionID()}); err != nil {
		return err
	}
	acquire, err := a.New(c, h.cfg.path)
	if err != nil {
		return err
	}
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	go func() {
		select {
		case <-stop:
			acancel()
		case <-actx.Done():
		}
	}()
	for {
		lost, err := h.cycle(c, acquire, actx, stop)
		if err != nil || !lost || h.cfg.again < 0 {
			return err
		}
		// Take the lock again, as holder number again.
		h.cfg.id, h.cfg.again, h.token = h.cfg.again, -1, 0
	}
}

// cycle acquires, reports the grant, holds until stop or a loss (lost),
// and releases.
func (h *holder) cycle(c *recipe.Client, acquire faults.Acquirer, actx context.Context, stop <-chan struct{}) (lost bool, err error) {
	held, err := acquire(actx, rand.New(rand.NewPCG(uint64(h.cfg.id), 1)))
	if err != nil {
		select {
		case <-stop:
			return false, nil // told to go while waiting
		default:
			return false, fmt.Errorf("acquire: %w", err)
		}
	}
	p := held.Parts[0]
	h.token = p.Token
	nodes, _, err := c.Conn().Children(h.cfg.path)
	if err != nil {
		return false, fmt.Errorf("list after the grant: %w", err)
	}
	if _, err := h.send(faults.StoreMsg{Kind: faults.MsgGrant, Node: p.Node, Nodes: nodes, Wall: time.Now().UnixNano()}); err != nil {
		return false, err
	}
	lost, err = h.hold(p, faults.RegisterEntry(h.cfg.path, p.Token, held.Mode, p.Node), stop)
	rctx, rcancel := context.WithTimeout(context.Background(), h.cfg.session)
	defer rcancel()
	rerr := errors.Join(held.Release(rctx)...)
	if err != nil {
		return lost, err
	}
	if rerr == nil {
		_, err = h.send(faults.StoreMsg{Kind: faults.MsgReleased})
	}
	return lost, err
}

// hold writes every cfg.every while p is in force, until stop: to the
// fenced store under its token, and to the register in ZooKeeper with
// entry through Commit. At a loss it reports it and makes one probe
// write of each kind, and reports the hold lost.
func (h *holder) hold(p faults.Part, entry recipe.Op, stop <-chan struct{}) (lost bool, err error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-stop:
			return false, nil
		case <-t.C:
		}
		checked := time.Now().UnixNano()
		if lost := lossOf(p); lost != nil {
			at := time.Now().UnixNano()
			if _, err := h.send(faults.StoreMsg{Kind: faults.MsgLost, Wall: at, Err: lost.Error(), Reads: h.tap.last()}); err != nil {
				return true, err
			}
			h.commit(p, entry) // refused: the register's check finds it otherwise
			_, err := h.send(faults.StoreMsg{Kind: faults.MsgProbe, Seq: seq})
			return true, err
		}
		h.commit(p, entry)
		r, err := h.send(faults.StoreMsg{Kind: faults.MsgWrite, Seq: seq, Checked: checked, Wall: time.Now().UnixNano(), Reads: h.tap.last()})
		if err != nil {
			return false, err
		}
		if !r.OK {
			_, err := h.send(faults.StoreMsg{Kind: faults.MsgFenced, Seq: seq, Wall: time.Now().UnixNano(),
				Err: fmt.Sprintf("write %d under token %d refused (highest %d) while the hold was in force", seq, h.token, r.Highest)})
			return true, err
		}
		t.Reset(h.cfg.every)
	}
}

// commit makes one guarded write to the register. Whatever its outcome,
// the register's history tells whether it should have committed.
func (h *holder) commit(p faults.Part, entry recipe.Op) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.session)
	defer cancel()
	if _, err := p.Commit(ctx, entry); err != nil && !errors.Is(err, recipe.ErrLost) &&
		!errors.Is(err, recipe.ErrNotHeld) && !errors.Is(err, recipe.ErrCommitUnknown) {
		fmt.Fprintf(os.Stderr, "holderproc %d: guarded write: %v\n", h.cfg.id, err)
	}
}

// lossOf checks the hold as a careful writer does before each write:
// Err (exact at the moment of the call), then the Done channel.
func lossOf(p faults.Part) error {
	if err := p.Err(); err != nil {
		return err
	}
	select {
	case <-p.Done:
		return errors.New("done closed while Err was nil")
	default:
		return nil
	}
}
