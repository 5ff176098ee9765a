package faults_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Clocks of the suspension tests (the loss timeout is the default, half
// the session timeout). The holder's client reads once right before the
// cut, so the silence starts with the cut: a short cut always suspends (the
// silence is at least the cut) and never reaches the session timeout (the
// silence ends with the reconnect, milliseconds after the heal).
const (
	suspendSession = 2 * time.Second
	shortCut       = suspendSession * 13 / 20 // 1.3s: loss timeout < cut < session timeout
	longCut        = suspendSession * 3 / 2
)

// largest is a random source that always draws its largest value, so the
// adapters take their exclusive form: the rwlock its write lock, the
// semaphore one lease per call.
type largest struct{}

func (largest) Uint64() uint64 { return math.MaxUint64 }

// TestSuspensionTolerated runs every recipe with a holder whose client
// tolerates suspensions (recipe.WithSuspensionTolerance) and a second
// client waiting for the same lock:
//
//   - a cut shorter than the session timeout keeps the hold: Suspended
//     closes during the cut, Resumed after it, Err stays nil, the node is
//     the same one, owned by the same session, and the waiter is granted
//     only after the holder releases;
//   - a cut longer than the session timeout loses it with
//     ErrSessionExpired, after Suspended closed, and the waiter is granted
//     after that.
//
// Both check the holds, as their holders acted on them (until Suspended
// closed, and again from Resumed), with the fault suite's safety check.
func TestSuspensionTolerated(t *testing.T) {
	if testing.Short() {
		t.Skip("real ZooKeeper tests skipped under -short")
	}
	for _, a := range faults.Recipes {
		t.Run(a.Name, func(t *testing.T) {
			t.Run("short_cut_kept", func(t *testing.T) { rideOut(t, a, shortCut, false) })
			t.Run("long_cut_lost", func(t *testing.T) { rideOut(t, a, longCut, true) })
		})
	}
}

func rideOut(t *testing.T, a *faults.Adapter, cut time.Duration, wantLost bool) {
	srv := zktest.Shared(t)
	proxy, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	holder := locktest.Client(t, []string{proxy.Addr(), proxy.Addr()}, recipe.WithSessionTimeout(suspendSession),
		recipe.WithSuspensionTolerance())
	waiter := locktest.Client(t, []string{srv.Addr()}, recipe.WithSessionTimeout(suspendSession))
	path := zktest.UniquePath(t)
	raw := zktest.Connect(t, srv.Addr())
	rng := rand.New(largest{})
	ctx := locktest.Ctx(t, 60*time.Second)

	// The holder takes every lease there is (one, but for the semaphore).
	acqA, err := a.New(holder, path)
	if err != nil {
		t.Fatal(err)
	}
	var parts []faults.Part
	var releases []func(context.Context) []error
	for range max(1, a.MaxLeases) {
		h, err := acqA(ctx, rng)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, h.Parts...)
		releases = append(releases, h.Release)
	}
	acquiredAt := time.Now()
	sid := holder.SessionID()

	type grant struct {
		h   *faults.Held
		at  time.Time
		err error
	}
	granted := make(chan grant, 1)
	acqB, err := a.New(waiter, path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		h, err := acqB(ctx, rng)
		granted <- grant{h, time.Now(), err}
	}()
	locktest.Eventually(t, 10*time.Second, "waiter queued", func() bool {
		return len(locktest.Children(t, raw, path)) == len(parts)+1
	})

	for _, p := range parts {
		if locktest.Closed(p.Suspended()) {
			t.Fatalf("%s suspended before any cut", p.Node)
		}
	}
	mode := faults.Exclusive
	if a.MaxLeases > 0 {
		mode = faults.Lease // the holder has them all: the waiter's would be one too many
	}
	var ivs []faults.Interval
	if _, _, err := holder.Conn().Get(path); err != nil {
		t.Fatal(err)
	}
	proxy.Partition()
	cutAt := time.Now()
	suspendedAt := make([]time.Time, len(parts))
	for i, p := range parts {
		select {
		case <-p.Suspended():
			suspendedAt[i] = time.Now()
		case <-p.Done:
			t.Fatalf("%s ended before it was suspended: %v", p.Node, p.Err())
		case <-time.After(suspendSession):
			t.Fatalf("%s not suspended within the session timeout of silence", p.Node)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("%s: Err while suspended = %v, want nil", p.Node, err)
		}
		ivs = append(ivs, faults.Interval{Worker: 0, Mode: mode, Start: acquiredAt, End: suspendedAt[i], Suspended: true, Token: p.Token, Node: p.Node})
		t.Logf("%s suspended after %v of the cut", p.Node, suspendedAt[i].Sub(cutAt).Round(time.Millisecond))
	}
	time.Sleep(time.Until(cutAt.Add(cut)))
	if !wantLost {
		select {
		case g := <-granted:
			t.Fatalf("waiter granted during a cut shorter than the session timeout (err %v)", g.err)
		default:
		}
	}
	proxy.Heal()

	var releasedAt time.Time
	if !wantLost {
		for i, p := range parts {
			select {
			case <-p.Resumed():
				ivs = append(ivs, faults.Interval{Worker: 0, Mode: mode, Start: time.Now(), Resumed: true, Token: p.Token, Node: p.Node})
			case <-p.Done:
				t.Fatalf("%s lost after a cut shorter than the session timeout: %v", p.Node, p.Err())
			case <-time.After(2 * suspendSession):
				t.Fatalf("%s not resumed within two session timeouts of the heal", p.Node)
			}
			t.Logf("%s resumed %v after the heal, %v after it was suspended", p.Node,
				time.Since(cutAt.Add(cut)).Round(time.Millisecond), time.Since(suspendedAt[i]).Round(time.Millisecond))
		}
		if got := holder.SessionID(); got != sid {
			t.Fatalf("session changed from 0x%x to 0x%x: the cut was meant to keep it", sid, got)
		}
		// A while later: still held, by the same node of the same session,
		// not suspended, and the waiter still waits.
		time.Sleep(suspendSession / 4)
		for _, p := range parts {
			if err := p.Err(); err != nil {
				t.Fatalf("%s: Err after the suspension = %v, want nil", p.Node, err)
			}
			if locktest.Closed(p.Suspended()) || !locktest.Closed(p.Resumed()) {
				t.Fatalf("%s still suspended after it resumed", p.Node)
			}
			_, st, err := raw.Get(path + "/" + p.Node)
			if err != nil || st.EphemeralOwner != sid || st.Czxid != p.Token {
				t.Fatalf("%s after the suspension: stat %+v, err %v; want owner 0x%x, czxid %#x", p.Node, st, err, sid, p.Token)
			}
		}
		select {
		case g := <-granted:
			t.Fatalf("waiter granted while the holder kept its hold (err %v)", g.err)
		default:
		}
		releasedAt = time.Now()
		for i := range ivs[len(parts):] {
			ivs[len(parts)+i].End = releasedAt
		}
		for _, rel := range releases {
			for _, err := range rel(ctx) {
				if err != nil {
					t.Fatalf("release after the suspension: %v", err)
				}
			}
		}
	} else {
		for i, p := range parts {
			select {
			case <-p.Done:
			case <-time.After(2 * suspendSession):
				t.Fatalf("%s not lost within two session timeouts of the heal", p.Node)
			}
			err := p.Err()
			if !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrSessionExpired) {
				t.Fatalf("%s: Err = %v, want ErrLost and ErrSessionExpired", p.Node, err)
			}
			if !locktest.Closed(p.Suspended()) {
				t.Fatalf("%s lost without being suspended first", p.Node)
			}
			t.Logf("%s suspended %v into the cut, then lost: %v", p.Node, suspendedAt[i].Sub(cutAt).Round(time.Millisecond), err)
		}
		for _, rel := range releases {
			for _, err := range rel(ctx) {
				if !errors.Is(err, recipe.ErrLost) {
					t.Fatalf("release of a lost hold = %v, want ErrLost", err)
				}
			}
		}
	}

	var g grant
	select {
	case g = <-granted:
	case <-time.After(4 * suspendSession):
		t.Fatal("waiter never granted")
	}
	if g.err != nil {
		t.Fatalf("waiter: %v", g.err)
	}
	if !wantLost && g.at.Before(releasedAt) {
		t.Fatalf("waiter granted at %v, before the holder released at %v", g.at, releasedAt)
	}
	if wantLost {
		t.Logf("waiter granted %v into the cut (the holder stopped at %v)", g.at.Sub(cutAt).Round(time.Millisecond),
			suspendedAt[0].Sub(cutAt).Round(time.Millisecond))
	}
	doneB := time.Now()
	for _, err := range g.h.Release(ctx) {
		if err != nil {
			t.Fatalf("waiter release: %v", err)
		}
	}
	for _, p := range g.h.Parts {
		ivs = append(ivs, faults.Interval{Worker: 1, Mode: mode, Start: g.at, End: doneB, Token: p.Token, Node: p.Node})
	}
	for _, v := range faults.CheckIntervals(ivs, a.MaxLeases) {
		t.Errorf("safety: %s", v)
	}
}
