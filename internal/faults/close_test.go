package faults_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/faults"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCloseDuringPartition closes, for every recipe, a client cut off
// from the server for 1.2s (its proxy black-holes it: past the loss
// timeout, within the session) that holds one lock and waits
// for another (held by a second client): Close must return within
// faults.CloseBound (go-zookeeper waits up to 1s for the server to confirm
// the end of the session), the waiting call must return within the same
// bound of Close with an error wrapping recipe.ErrClosed, the hold's Done
// must be closed, and no goroutine started since the client connected may
// be left once it and the other client are closed.
func TestCloseDuringPartition(t *testing.T) {
	srv := zktest.Shared(t)
	var took []time.Duration
	for _, a := range faults.LivenessRecipes {
		t.Run(a.Name, func(t *testing.T) {
			took = append(took, closeCutOff(t, srv, a))
		})
	}
	slices.Sort(took)
	if len(took) > 0 {
		t.Logf("Close during a partition, %d clients: min %v, p50 %v, max %v (bound %v)", len(took),
			took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), faults.CloseBound)
	}
}

// closeCutOff runs the test for one recipe and returns how long Close took.
func closeCutOff(t *testing.T, srv *zktest.Server, a *faults.Adapter) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 1))
	base := zktest.UniquePath(t)
	before := goleak.IgnoreCurrent()

	other, err := recipe.Connect(ctx, []string{srv.Addr()}, recipe.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	oacq, err := a.New(other, base+"/busy")
	if err != nil {
		t.Fatal(err)
	}
	oh, err := oacq(ctx, rng)
	if err != nil {
		t.Fatal(err)
	}

	p, err := zktest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := recipe.Connect(ctx, []string{p.Addr()}, recipe.WithSessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hacq, err := a.New(c, base+"/held")
	if err != nil {
		t.Fatal(err)
	}
	h, err := hacq(ctx, rng)
	if err != nil {
		t.Fatal(err)
	}
	wacq, err := a.New(c, base+"/busy")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		wh, err := wacq(context.Background(), rng)
		if err == nil {
			wh.Release(context.Background())
			err = errors.New("granted while the lock was held elsewhere")
		}
		waited <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is queued
	p.Partition()
	time.Sleep(1200 * time.Millisecond) // past the loss timeout, within the session

	start := time.Now()
	c.Close()
	closeTook := time.Since(start)
	if closeTook > faults.CloseBound {
		t.Errorf("Close took %v during a partition, bound %v", closeTook, faults.CloseBound)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, recipe.ErrClosed) && !errors.Is(err, a.NotAcquired) {
			t.Errorf("the waiting call returned %v, want an error wrapping recipe.ErrClosed", err)
		} else if !errors.Is(err, recipe.ErrClosed) {
			t.Errorf("the waiting call returned %v, which does not wrap recipe.ErrClosed", err)
		}
		if d := time.Since(start); d > faults.CloseBound {
			t.Errorf("the waiting call returned %v after Close, bound %v", d, faults.CloseBound)
		}
	case <-time.After(faults.CloseBound + time.Second):
		t.Fatalf("the waiting call had not returned %v after Close", time.Since(start).Round(time.Millisecond))
	}
	select {
	case <-h.Parts[0].Done:
	default:
		t.Errorf("the hold's Done is open after Close")
	}
	h.Release(context.Background())
	p.Close()
	oh.Release(ctx)
	other.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
	t.Logf("%s: Close took %v during a partition", a.Name, closeTook.Round(time.Millisecond))
	return closeTook
}
