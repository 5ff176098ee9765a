//go:build unix

// Command leader shows a clustered service whose member processes elect a
// leader with zkrecipes' leader package.
//
// Without -member, the program starts -members copies of itself (-member N)
// and watches the election from outside (Observe), printing every change of
// leader. After -kill-after it kills the leader (SIGKILL): the next member
// leads once ZooKeeper expires the dead member's session, and the killed
// member is started again. After -resign-after it asks the leader to resign
// (SIGUSR1): the next member leads at once. After -duration it stops them.
// While a member leads, it prints a tick with its fencing token every -tick.
//
//	go run ./examples/leader -zk 127.0.0.1:21811
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	servers     = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path        = flag.String("path", "/examples/leader", "ZooKeeper path of the election")
	members     = flag.Int("members", 3, "member processes")
	session     = flag.Duration("session-timeout", 3*time.Second, "ZooKeeper session timeout of each member")
	tick        = flag.Duration("tick", 500*time.Millisecond, "period of the leader's work")
	killAfter   = flag.Duration("kill-after", 4*time.Second, "when to kill the leader with SIGKILL (0: never)")
	resignAfter = flag.Duration("resign-after", 10*time.Second, "when to ask the leader to resign (0: never)")
	duration    = flag.Duration("duration", 15*time.Second, "how long the example runs")
	member      = flag.Int("member", 0, "run as member `N` (the parent sets it)")
)

func say(who, format string, a ...any) {
	fmt.Printf("%s  %-8s  %s\n", time.Now().Format("15:04:05.000"), who, fmt.Sprintf(format, a...))
}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := recipe.Connect(ctx, strings.Split(*servers, ","), recipe.WithSessionTimeout(*session))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id := fmt.Sprintf("member-%d", *member)
	e, err := leader.New(c, *path, leader.WithData([]byte(id)))
	if err != nil {
		log.Fatal(err)
	}
	if *member == 0 {
		os.Exit(parent(ctx, e))
	}

	resign := make(chan os.Signal, 1) // SIGUSR1: end the current term, campaign again
	signal.Notify(resign, syscall.SIGUSR1)
	go func() {
		for range resign {
			if err := e.Resign(ctx); err != nil {
				say(id, "cannot resign: %v", err)
			}
		}
	}()
	err = e.Run(ctx, func(ctx context.Context) error { // ctx ends when the term does: resigned, lost, stopped
		token := e.Token()
		say(id, "LEADS  token=%#x", token)
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				say(id, "stops leading  token=%#x  (%v)", token, context.Cause(ctx))
				return nil
			case <-time.After(*tick): // the service's work: every write it makes carries the token
				say(id, "tick %-3d  token=%#x", n, token)
			}
		}
	})
	say(id, "leaves the election: %v", err)
}

// parent starts the members, observes the election, kills and resigns the
// leader, and stops the members at the end.
func parent(ctx context.Context, watcher *leader.Election) int {
	fmt.Printf("leader: %d member processes, election %s on %s, session timeout %v\n", *members, *path, *servers, *session)
	procs := map[string]*exec.Cmd{}
	launch := func(n int) {
		id, cmd := fmt.Sprintf("member-%d", n), exec.Command(os.Args[0], append(os.Args[1:], "-member", fmt.Sprint(n))...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		procs[id] = cmd
		say("parent", "starts %s (pid %d)", id, cmd.Process.Pid)
	}
	for n := 1; n <= *members; n++ {
		launch(n)
	}
	obs, err := watcher.Observer(ctx) // the leader now, then at every change
	if err != nil {
		log.Fatal(err)
	}
	leaders := obs.C
	kill, resign, end := time.After(*killAfter), time.After(*resignAfter), time.After(*duration)
	if *killAfter == 0 {
		kill = nil
	}
	if *resignAfter == 0 {
		resign = nil
	}
	var current leader.Participant
	var last int64
	ok := true
	for {
		select {
		case p, open := <-leaders:
			if !open { // ctx ended, or an error no retry can fix
				fmt.Println("observing the election ended:", obs.Err())
				return 1
			}
			current = p
			say("parent", "observes: the leader is %s, token=%#x", p.Data, p.Token)
			ok = ok && p.Token > last // a new term, a greater token
			last = p.Token
		case <-kill:
			var n int
			if _, err := fmt.Sscanf(string(current.Data), "member-%d", &n); err == nil {
				say("parent", "kills %s with SIGKILL: the next leads once its session expires", current.Data)
				_ = procs[string(current.Data)].Process.Kill()
				_ = procs[string(current.Data)].Wait()
				launch(n) // it joins at the back of the line
			}
		case <-resign:
			if cmd := procs[string(current.Data)]; cmd != nil {
				say("parent", "asks %s to resign (SIGUSR1)", current.Data)
				_ = cmd.Process.Signal(syscall.SIGUSR1)
			}
		case <-end:
			say("parent", "stops every member (SIGTERM)")
			for _, cmd := range procs {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				ok = cmd.Wait() == nil && ok
			}
			if !ok {
				fmt.Println("FAIL: a term had no greater token, or a member failed")
				return 1
			}
			fmt.Println("ok: one leader at a time, tokens increasing from term to term")
			return 0
		case <-ctx.Done():
			return 1
		}
	}
}
