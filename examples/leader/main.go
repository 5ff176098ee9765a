//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

// Command leader shows a clustered service whose members elect a leader
// with zkrecipes' leader package.
//
// The parent process starts -members copies of itself. Each member opens
// its own ZooKeeper session and takes part in the election with
// leader.Election.Run; while it leads it does the service's periodic work,
// here printing a tick with its fencing token every -tick. The parent
// watches the election from outside (leader.Election.Observe) and prints
// every change of leader. After -kill-after it kills the leader with
// SIGKILL, so the next member leads only once ZooKeeper expires the dead
// member's session, and starts that member again; after -resign-after it
// asks the leader to resign (SIGUSR1), and the next member leads at once.
// After -duration it stops every member and prints the terms it saw.
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
	"os/signal"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/demo"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	cfg         = demo.Flags("election", "/zkrecipes-demo/leader")
	members     = flag.Int("members", 3, "number of member processes")
	tick        = flag.Duration("tick", 500*time.Millisecond, "period of the leader's work")
	killAfter   = flag.Duration("kill-after", 4*time.Second, "when to kill the leader process with SIGKILL (0: never)")
	resignAfter = flag.Duration("resign-after", 10*time.Second, "when to ask the leader to resign (0: never)")
	duration    = flag.Duration("duration", 15*time.Second, "how long the demo runs")
)

func main() {
	demo.Main(cfg, func() error {
		if *members < 1 || *tick <= 0 || *killAfter < 0 || *resignAfter < 0 || *duration <= 0 {
			return errors.New("need -members >= 1, -tick, -duration > 0, -kill-after, -resign-after >= 0")
		}
		return nil
	}, member, parent)
}

// member takes part in the election until SIGTERM or SIGINT, does the
// leader's work while it leads, and resigns on SIGUSR1.
func member(ctx context.Context, _ string, n int, log *slog.Logger) int {
	id := demo.MemberID(n)
	c, err := demo.Connect(ctx, cfg, recipe.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot connect", err)
	}
	defer c.Close()
	e, err := leader.New(c, cfg.Path, leader.WithData([]byte(id)), leader.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot join the election", err)
	}
	demo.Say(id, "joins the election (pid %d, session 0x%x)", os.Getpid(), c.SessionID())

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
				if err := e.Resign(rctx); err != nil {
					demo.Say(id, "cannot resign: %v", err)
				} else {
					demo.Say(id, "resigned; back in line")
				}
				cancel()
			case <-ctx.Done():
				return
			}
		}
	}()

	err = e.Run(ctx, func(ctx context.Context) error {
		token := e.Token()
		demo.Say(id, "LEADS     token=%#x", token)
		t := time.NewTicker(*tick)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				demo.Say(id, "stops leading  token=%#x  (%v)", token, context.Cause(ctx))
				return nil
			case <-t.C:
				// The service's periodic work. Every write it makes to
				// another system carries the token, so that a deposed
				// leader's late writes can be refused there.
				demo.Say(id, "tick %-3d  token=%#x", n, token)
			}
		}
	})
	if ctx.Err() == nil {
		return demo.Fail(ctx, log, "left the election", err)
	}
	demo.Say(id, "leaves the election")
	return 0
}

// parent watches the election from outside while demo.Cluster starts the
// members, kills the leader and later asks the next one to resign.
func parent(ctx context.Context, log *slog.Logger) int {
	fmt.Printf("leader demo: %d member processes, election %s on %s, session timeout %v\n",
		*members, cfg.Path, cfg.ZK, cfg.SessionTimeout)
	c, err := demo.Connect(ctx, cfg, recipe.WithLogger(log))
	if err != nil {
		return demo.Fail(ctx, log, "cannot connect", err)
	}
	defer c.Close()
	watcher, err := leader.New(c, cfg.Path)
	if err != nil {
		return demo.Fail(ctx, log, "cannot watch the election", err)
	}
	ctx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	cluster := demo.Cluster{Members: *members, KillAfter: *killAfter, ResignAfter: *resignAfter, Duration: *duration,
		Session: cfg.SessionTimeout, Log: log}
	return cluster.Run(ctx, observe(ctx, watcher))
}

// observe reports every change of leader, as seen from outside the
// election, until ctx ends.
func observe(ctx context.Context, e *leader.Election) <-chan demo.Term {
	terms := make(chan demo.Term)
	leaders, err := e.Observe(ctx) // fails only for a nil ctx
	if err != nil {
		panic(err)
	}
	go func() {
		defer close(terms)
		for p := range leaders {
			select {
			case terms <- demo.Term{ID: string(p.Data), Token: p.Token, At: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return terms
}
