//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command leader shows a clustered service whose members elect a leader
// with zkrecipes' leader package.
//
// The parent process starts -members copies of itself. Each member opens
// its own ZooKeeper session and takes part in the election with
// leader.Election.Run; while it leads it does the service's periodic work,
// here printing a tick with its id and fencing token every -tick. The
// parent watches the election from outside (leader.Election.Observe) and
// prints every change of leader. After -kill-after it kills the leader
// process with SIGKILL, so it dies without resigning and the next member
// leads once ZooKeeper expires the dead member's session; it then starts
// that member again. After -resign-after it asks the leader to resign
// (SIGUSR1), and the next member leads at once. After -duration it stops
// every member (SIGTERM) and prints the terms it saw.
//
//	go run ./examples/leader -zk 127.0.0.1:21811
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

type config struct {
	zk             string
	path           string
	members        int
	tick           time.Duration
	sessionTimeout time.Duration
	killAfter      time.Duration
	resignAfter    time.Duration
	duration       time.Duration
	member         int   // > 0 in a member process
	t0             int64 // the parent's start, unix nanoseconds, for the timeline
}

func main() {
	var cfg config
	flag.StringVar(&cfg.zk, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&cfg.path, "path", "/zkrecipes-demo/leader", "ZooKeeper path of the election")
	flag.IntVar(&cfg.members, "members", 3, "number of member processes")
	flag.DurationVar(&cfg.tick, "tick", 500*time.Millisecond, "period of the leader's work")
	flag.DurationVar(&cfg.sessionTimeout, "session-timeout", 3*time.Second, "ZooKeeper session timeout of each member")
	flag.DurationVar(&cfg.killAfter, "kill-after", 4*time.Second, "when to kill the leader process with SIGKILL (0: never)")
	flag.DurationVar(&cfg.resignAfter, "resign-after", 10*time.Second, "when to ask the leader to resign (0: never)")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "how long the demo runs")
	flag.IntVar(&cfg.member, "member", 0, "run as member `N` (used by the parent process)")
	flag.Int64Var(&cfg.t0, "t0", 0, "start of the timeline in unix nanoseconds (used by the parent process)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: leader [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		flag.Usage()
		os.Exit(2)
	}
	if cfg.t0 == 0 {
		cfg.t0 = time.Now().UnixNano()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	if cfg.member > 0 {
		os.Exit(runMember(cfg, logger.With("member", cfg.member)))
	}
	os.Exit(runParent(cfg, logger))
}

func (c *config) validate() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	case c.servers() == nil:
		return errors.New("-zk: no servers")
	case c.members < 1:
		return fmt.Errorf("-members %d: need at least one", c.members)
	case c.tick <= 0:
		return fmt.Errorf("-tick %v: must be positive", c.tick)
	case c.sessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: must be positive", c.sessionTimeout)
	case c.killAfter < 0 || c.resignAfter < 0:
		return errors.New("-kill-after and -resign-after must not be negative")
	case c.duration <= 0:
		return fmt.Errorf("-duration %v: must be positive", c.duration)
	case c.member < 0:
		return fmt.Errorf("-member %d: must be positive", c.member)
	}
	return recipe.ValidatePath(c.path)
}

func (c *config) servers() []string {
	var out []string
	for s := range strings.SplitSeq(c.zk, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// stamp returns the time since the start of the demo, for the timeline.
func (c *config) stamp() string {
	return fmt.Sprintf("%6.2fs", time.Since(time.Unix(0, c.t0)).Seconds())
}

func memberID(n int) string { return "member-" + strconv.Itoa(n) }

// runMember is one member of the service: it takes part in the election
// until SIGTERM or SIGINT, does the leader's work while it leads, and
// resigns on SIGUSR1.
func runMember(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	id := memberID(cfg.member)
	say := func(format string, args ...any) {
		fmt.Printf("%s  %-9s %s\n", cfg.stamp(), id, fmt.Sprintf(format, args...))
	}

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := recipe.Connect(cctx, cfg.servers(),
		recipe.WithSessionTimeout(cfg.sessionTimeout),
		recipe.WithLogger(log))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 130
		}
		log.Error("cannot connect", "zk", cfg.zk, "err", err)
		return 1
	}
	defer c.Close()
	e, err := leader.New(c, cfg.path, leader.WithData([]byte(id)), leader.WithLogger(log))
	if err != nil {
		log.Error("cannot join the election", "err", err)
		return 1
	}
	say("joins the election (pid %d, session 0x%x)", os.Getpid(), c.SessionID())

	// SIGUSR1: give up the current term; Run campaigns again at the back
	// of the line.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-usr1:
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := e.Resign(rctx)
				cancel()
				if err != nil {
					say("cannot resign: %v", err)
				} else {
					say("resigned; back in line")
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	err = e.Run(ctx, func(ctx context.Context) error {
		token := e.Token()
		say("LEADS     token=%#x", token)
		t := time.NewTicker(cfg.tick)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				say("stops leading  token=%#x  (%v)", token, context.Cause(ctx))
				return nil
			case <-t.C:
				// The service's periodic work. Every write it makes to
				// another system carries the token, so that a deposed
				// leader's late writes can be refused there.
				say("tick %-3d  token=%#x", n, token)
			}
		}
	})
	if ctx.Err() == nil {
		log.Error("left the election", "err", err)
		return 1
	}
	say("leaves the election")
	return 0
}

// member is the parent's view of one member process.
type member struct {
	n    int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// runParent starts the members, watches the election, kills and later
// resigns the leader, and stops everything after -duration.
func runParent(cfg config, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		log.Error("cannot find this program's executable", "err", err)
		return 1
	}
	say := func(format string, args ...any) {
		fmt.Printf("%s  %-9s %s\n", cfg.stamp(), "parent", fmt.Sprintf(format, args...))
	}
	fmt.Printf("leader demo: %d member processes, election %s on %s, session timeout %v\n",
		cfg.members, cfg.path, cfg.zk, cfg.sessionTimeout)

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := recipe.Connect(cctx, cfg.servers(), recipe.WithLogger(log))
	cancel()
	if err != nil {
		log.Error("cannot connect", "zk", cfg.zk, "err", err)
		return 1
	}
	defer c.Close()
	watcher, err := leader.New(c, cfg.path)
	if err != nil {
		log.Error("cannot watch the election", "err", err)
		return 1
	}

	var mu sync.Mutex
	members := map[int]*member{}
	start := func(n int) {
		cmd := exec.Command(exe,
			"-member", strconv.Itoa(n),
			"-zk", cfg.zk,
			"-path", cfg.path,
			"-tick", cfg.tick.String(),
			"-session-timeout", cfg.sessionTimeout.String(),
			"-t0", strconv.FormatInt(cfg.t0, 10))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Error("cannot start member", "member", n, "err", err)
			return
		}
		m := &member{n: n, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(m.done) }()
		mu.Lock()
		members[n] = m
		mu.Unlock()
		say("starts %s (pid %d)", memberID(n), cmd.Process.Pid)
	}
	signalMember := func(id string, sig syscall.Signal) *member {
		n, err := strconv.Atoi(strings.TrimPrefix(id, "member-"))
		mu.Lock()
		m := members[n]
		mu.Unlock()
		if err != nil || m == nil {
			log.Error("the leader is not one of ours", "id", id)
			return nil
		}
		if err := m.cmd.Process.Signal(sig); err != nil {
			log.Error("cannot signal member", "member", n, "signal", sig, "err", err)
		}
		return m
	}

	// The observer: every change of leader, as seen from outside.
	type change struct {
		info leader.Participant
		at   time.Time
	}
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	changes, err := watcher.Observe(octx)
	if err != nil {
		panic(err)
	}
	var history []change
	var current leader.Participant

	for n := 1; n <= cfg.members; n++ {
		start(n)
	}

	var killAt, resignAt <-chan time.Time
	if cfg.killAfter > 0 {
		killAt = time.After(cfg.killAfter)
	}
	if cfg.resignAfter > 0 {
		resignAt = time.After(cfg.resignAfter)
	}
	end := time.After(cfg.duration)
	var killed *member
	var killedAt, resignedAt time.Time
	ok := true
loop:
	for {
		select {
		case info, open := <-changes:
			if !open {
				break loop
			}
			now := time.Now()
			note := ""
			switch {
			case !killedAt.IsZero():
				note = fmt.Sprintf("  (%v after the kill)", now.Sub(killedAt).Round(time.Millisecond))
				killedAt = time.Time{}
				// Bring the killed member back: it joins at the back.
				start(killed.n)
			case !resignedAt.IsZero():
				note = fmt.Sprintf("  (%v after the resignation)", now.Sub(resignedAt).Round(time.Millisecond))
				resignedAt = time.Time{}
			}
			say("observes: the leader is %s, token=%#x%s", string(info.Data), info.Token, note)
			history = append(history, change{info, now})
			current = info
		case <-killAt:
			if string(current.Data) == "" {
				say("no leader to kill")
				continue
			}
			if killed = signalMember(string(current.Data), syscall.SIGKILL); killed != nil {
				killedAt = time.Now()
				say("kills %s (pid %d) with SIGKILL: it cannot resign; ZooKeeper expires its session within %v",
					string(current.Data), killed.cmd.Process.Pid, cfg.sessionTimeout)
			}
		case <-resignAt:
			if string(current.Data) == "" {
				say("no leader to ask to resign")
				continue
			}
			if signalMember(string(current.Data), syscall.SIGUSR1) != nil {
				resignedAt = time.Now()
				say("asks %s to resign (SIGUSR1)", string(current.Data))
			}
		case <-end:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	stopObserving()

	say("stops every member (SIGTERM)")
	mu.Lock()
	all := make([]*member, 0, len(members))
	for _, m := range members {
		all = append(all, m)
	}
	mu.Unlock()
	for _, m := range all {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range all {
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			log.Error("member did not stop; killing it", "member", m.n)
			m.cmd.Process.Kill()
			<-m.done
		}
		if code := m.cmd.ProcessState.ExitCode(); code != 0 && m != killed {
			log.Error("member failed", "member", m.n, "status", code)
			ok = false
		}
	}

	fmt.Println()
	fmt.Println("terms seen by the observer")
	for i, ch := range history {
		until := "end of the demo"
		if i+1 < len(history) {
			until = fmt.Sprintf("%6.2fs", history[i+1].at.Sub(time.Unix(0, cfg.t0)).Seconds())
		}
		fmt.Printf("  %-9s token=%#x  from %6.2fs  until %s\n", string(ch.info.Data), ch.info.Token,
			ch.at.Sub(time.Unix(0, cfg.t0)).Seconds(), until)
	}
	for i := 1; i < len(history); i++ {
		if history[i].info.Token <= history[i-1].info.Token {
			fmt.Println("FAIL: tokens did not increase from term to term")
			ok = false
		}
	}
	if ctx.Err() != nil {
		fmt.Println("interrupted")
		return 130
	}
	if !ok {
		return 1
	}
	fmt.Println("ok: one leader at a time, tokens increasing from term to term")
	return 0
}
