package zktest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tests of this file show each fault between the members of an
// ensemble. Like faults_test.go they assert outcomes; the times they log
// depend on the machine.

// memberBound bounds the waits for an ensemble to notice a fault between
// its members (syncLimit is about 2 s, an election a few seconds).
const memberBound = 40 * time.Second

// waitFor polls cond until it holds or memberBound passes, and returns
// how long it took.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > memberBound {
			t.Fatalf("%s: not within %v", what, memberBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// serves reports whether member i serves requests (srvr reports a mode).
func serves(e *zktest.Ensemble, i int) bool {
	r, err := e.Servers[i].FourLetter("srvr")
	return err == nil && mode(r) != ""
}

func mode(srvr string) string {
	for _, line := range strings.Split(srvr, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

func others(n int, not ...int) []int {
	var out []int
	for i := 0; i < n; i++ {
		if !slices.Contains(not, i) {
			out = append(out, i)
		}
	}
	return out
}

// A leader cut off from both followers stops serving; the followers
// elect one of themselves; after Heal the old leader rejoins as a
// follower.
func TestEnsemblePartitionLeader(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	old, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Isolate(old); err != nil {
		t.Fatal(err)
	}
	if !e.Partitioned(old, (old+1)%3) || !e.Partitioned((old+1)%3, old) {
		t.Fatal("Partitioned does not report the isolation")
	}
	d := waitFor(t, "a new leader among the majority", func() bool {
		l, err := e.Leader()
		return err == nil && l != old
	})
	t.Logf("new leader after %v", d)
	waitFor(t, "the old leader stops serving", func() bool { return !serves(e, old) })
	if err := e.Heal(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.WaitQuorum(memberBound); err != nil {
		t.Fatal(err)
	}
	t.Logf("whole again %v after Heal", time.Since(start))
	if l, _ := e.Leader(); l == old {
		t.Fatalf("member %d leads again after the heal; want it a follower", old)
	}
}

// Messages from a follower to its leader are cut, those from the leader
// still arrive: the leader drops the follower, which stops serving, and
// the other two keep the quorum. Heal brings it back.
func TestEnsemblePartitionOneWay(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	l, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % 3
	if err := e.PartitionOneWay([]int{f}, []int{l}); err != nil {
		t.Fatal(err)
	}
	if !e.Partitioned(f, l) || e.Partitioned(l, f) {
		t.Fatal("Partitioned does not report a one-way cut")
	}
	d := waitFor(t, "the follower stops serving", func() bool { return !serves(e, f) })
	t.Logf("follower stopped serving after %v", d)
	if got, err := e.Leader(); err != nil || got != l {
		t.Fatalf("Leader() = %d, %v; want %d still leading", got, err, l)
	}
	if !serves(e, (l+2)%3) {
		t.Fatal("the other follower stopped serving")
	}
	if err := e.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitQuorum(memberBound); err != nil {
		t.Fatal(err)
	}
}

// A frozen leader is replaced; WaitQuorum leaves it out while it is
// frozen; thawed, it rejoins.
func TestEnsembleFreezeMember(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	l, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Freeze(l); err != nil {
		t.Fatal(err)
	}
	if !e.Servers[l].Frozen() {
		t.Fatal("Frozen() = false after Freeze")
	}
	start := time.Now()
	if err := e.WaitQuorum(memberBound); err != nil {
		t.Fatal(err)
	}
	nl, err := e.Leader()
	if err != nil || nl == l {
		t.Fatalf("Leader() = %d, %v with member %d frozen", nl, err, l)
	}
	t.Logf("new leader %d after %v", nl, time.Since(start))
	if err := e.Thaw(l); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the thawed member serves again", func() bool { return serves(e, l) })
	if err := e.WaitQuorum(memberBound); err != nil {
		t.Fatal(err)
	}
}

// The case the kit's member faults exist for: a follower is cut off from
// its leader, and a client that can reach only that follower holds a
// mutex. The holder must be told it lost the mutex before a client on the
// majority side holds it.
func TestEnsembleMinorityHolderToldFirst(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	l, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	f := (l + 1) % 3
	const session = 4 * time.Second
	minority := e.MemberClient(t, f, recipe.WithSessionTimeout(session))
	majority := e.MemberClient(t, l, recipe.WithSessionTimeout(session))
	lockPath := zktest.UniquePath(t)

	held := lockedMutex(t, minority, lockPath)
	waiter, err := mutex.New(majority, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.TryLock(testCtx(t, hangBound)); !errors.Is(err, mutex.ErrLocked) {
		t.Fatalf("TryLock on the majority side while held: %v, want ErrLocked", err)
	}
	granted := lockInBackground(t, waiter)

	start := time.Now()
	if err := e.Partition([]int{f}, others(3, f)); err != nil {
		t.Fatal(err)
	}
	lostAfter := waitLost(t, held, start)
	lostAt := start.Add(lostAfter)
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(hangBound):
		t.Fatalf("the majority client did not get the mutex within %v", hangBound)
	}
	if at.IsZero() {
		t.Fatal("the majority client's Lock failed")
	}
	t.Logf("minority holder told lost %v after the partition (%v); majority holds %v after it",
		lostAfter.Round(time.Millisecond), held.Err(), at.Sub(start).Round(time.Millisecond))
	if !at.After(lostAt) {
		t.Fatalf("the majority client held at %v, before the minority holder was told at %v", at.Sub(start), lostAfter)
	}
	if !errors.Is(held.Err(), recipe.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", held.Err())
	}
	if err := e.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := waiter.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Five members, a partition of two against three with the leader among
// the two: the three elect a leader, and clients of theirs write while
// the two serve nobody. After Heal all five serve.
func TestEnsembleFivePartition(t *testing.T) {
	e := zktest.StartEnsemble(t, 5)
	l, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	minority := []int{l, (l + 1) % 5}
	majority := others(5, minority...)
	if err := e.Partition(minority, majority); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, "a leader among the three", func() bool {
		nl, err := e.Leader()
		return err == nil && slices.Contains(majority, nl)
	})
	t.Logf("majority leader after %v", d)
	waitFor(t, "the two stop serving", func() bool { return !serves(e, minority[0]) && !serves(e, minority[1]) })
	c := e.MemberClient(t, majority[0])
	m := lockedMutex(t, c, zktest.UniquePath(t))
	if err := m.Unlock(testCtx(t, hangBound)); err != nil {
		t.Fatal(err)
	}
	if err := e.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitQuorum(memberBound); err != nil {
		t.Fatal(err)
	}
}

// A byte-level proxy forwards any protocol and black-holes each direction
// on its own, chunk by chunk, on a connection that stays open.
func TestByteProxyPartitionOneWay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvDone := make(chan struct{})
	go func() { // an echo server
		defer close(srvDone)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	p, err := zktest.NewByteProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	echo := func(msg string) (string, error) {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		b := make([]byte, len(msg))
		n, err := io.ReadFull(c, b)
		return string(b[:n]), err
	}
	if got, err := echo("ping"); err != nil || got != "ping" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	p.PartitionOneWay(zktest.ServerToClient)
	if got, err := echo("lost"); err == nil || got != "" {
		t.Fatalf("echo with server->client cut = %q, %v; want silence", got, err)
	}
	p.PartitionOneWay(zktest.BothWays)
	if got, err := echo("gone"); err == nil || got != "" {
		t.Fatalf("echo partitioned = %q, %v; want silence", got, err)
	}
	p.Heal() // closes the connection that lost bytes
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after Heal")
	}
	_ = c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	<-srvDone
}
