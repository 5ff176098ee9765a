package faults_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	pathpkg "path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var onewayRounds = flag.Int("faults.oneway", 3, "rounds per direction of TestOneWayPartition")

// knownOneWayFailures are the directions of TestOneWayPartition in which
// the engine is known to let another client be granted before the holder
// is told, with why. Such a round is reported, not failed.
var knownOneWayFailures = map[zktest.Direction]string{}

// TestOneWayPartition cuts one direction of a mutex holder's connection
// while the TCP connection stays up, with a second client waiting for the
// mutex. The holder's client has watches set on other nodes, which a third
// client changes every 100ms, so that notifications keep coming while
// client->server traffic is lost. The holder must be told (Done) before
// the waiter is granted.
//
// client->server: the server hears nothing (no request, no ping) and
// expires the session after the session timeout; the waiter is granted
// then. server->client: the server hears the client (pings, and the
// connect requests of its reconnects keep the session), the client hears
// nothing.
func TestOneWayPartition(t *testing.T) {
	const (
		session = 2 * time.Second
		watches = 40
	)
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, d := range []zktest.Direction{zktest.ClientToServer, zktest.ServerToClient} {
		t.Run(d.String(), func(t *testing.T) {
			known := knownOneWayFailures[d]
			bad := 0
			for round := 1; round <= *onewayRounds; round++ {
				r := oneWayRound(t, srv.Addr(), raw, d, session, watches)
				t.Logf("round %d: %s", round, r.summary)
				if r.grantedFirst {
					bad++
					if known == "" {
						t.Errorf("round %d: the waiter was granted before the holder was told: %s", round, r.summary)
					}
				}
			}
			switch {
			case known != "" && bad > 0:
				t.Logf("known engine defect, %d of %d rounds granted the waiter first: %s", bad, *onewayRounds, known)
			case known != "":
				t.Logf("listed in knownOneWayFailures (%s), yet the holder was told first in all %d rounds: if the engine was fixed, remove the entry",
					known, *onewayRounds)
			default:
				t.Logf("holder told first in %d of %d rounds", *onewayRounds-bad, *onewayRounds)
			}
		})
	}
}

type oneWayResult struct {
	grantedFirst bool
	summary      string
}

// oneWayRound runs one round of TestOneWayPartition.
func oneWayRound(t *testing.T, addr string, raw *zk.Conn, d zktest.Direction, session time.Duration, watches int) oneWayResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := zktest.UniquePath(t)
	side := path + "-watched"
	for _, dir := range []string{pathpkg.Dir(side), side} {
		if _, err := raw.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	defer func() {
		for i := range watches {
			_ = raw.Delete(fmt.Sprintf("%s/w%02d", side, i), -1)
		}
		_ = raw.Delete(side, -1)
	}()
	for i := range watches {
		if _, err := raw.Create(fmt.Sprintf("%s/w%02d", side, i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}

	p, err := zktest.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	hc, err := recipe.Connect(ctx, []string{p.Addr(), p.Addr()}, recipe.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	wc, err := recipe.Connect(ctx, []string{addr}, recipe.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	holder, err := mutex.New(hc, path)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := mutex.New(wc, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range watches {
		if _, _, _, err := hc.Conn().GetW(fmt.Sprintf("%s/w%02d", side, i)); err != nil {
			t.Fatal(err)
		}
	}
	granted := make(chan time.Time, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 4*session)
		defer wcancel()
		if err := waiter.Lock(wctx); err != nil {
			granted <- time.Time{}
			return
		}
		granted <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond) // the waiter queues

	start := time.Now()
	p.PartitionOneWay(d)
	// Notifications: one watched node changed every 100ms.
	stopNotes := make(chan struct{})
	notesDone := make(chan struct{})
	go func() {
		defer close(notesDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < watches; i++ {
			select {
			case <-stopNotes:
				return
			case <-tick.C:
			}
			_, _ = raw.Set(fmt.Sprintf("%s/w%02d", side, i), []byte("x"), -1)
		}
	}()
	var told, got time.Time
	select {
	case <-holder.Done():
		told = time.Now()
		got = <-granted
	case got = <-granted:
		select {
		case <-holder.Done():
			told = time.Now()
		case <-time.After(4 * session):
		}
	}
	close(stopNotes)
	<-notesDone
	p.Heal()
	if !got.IsZero() {
		_ = waiter.Unlock(ctx)
	}
	res := oneWayResult{grantedFirst: !got.IsZero() && (told.IsZero() || got.Before(told))}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return "+" + t.Sub(start).Round(time.Millisecond).String()
	}
	res.summary = fmt.Sprintf("holder told %s (%v), waiter granted %s", at(told), holder.Err(), at(got))
	return res
}
