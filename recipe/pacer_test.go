package recipe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/retry"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// countingPolicy retries for ever every 10ms and counts the waits asked of
// its schedules.
type countingPolicy struct{ waits atomic.Int64 }

func (p *countingPolicy) NewBackOff() backoff.BackOff { return countingBackOff{p} }

type countingBackOff struct{ p *countingPolicy }

func (b countingBackOff) NextBackOff() time.Duration { b.p.waits.Add(1); return 10 * time.Millisecond }
func (b countingBackOff) Reset()                     {}

// An invalid retry policy (or option) is refused by Connect, before any I/O.
func TestConnectRefusesInvalidPolicy(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]recipe.Option{
		"Exponential(0, 3)":    recipe.WithRetryPolicy(retry.Exponential(0, 3)),
		"NTimes(-1, 0)":        recipe.WithRetryPolicy(retry.NTimes(-1, 0)),
		"nil dialer":           recipe.WithDialer(nil),
		"nil tracer provider":  recipe.WithTracerProvider(nil),
		"negative grace":       recipe.WithCleanupGrace(-time.Second),
		"loss above session":   recipe.WithLossTimeout(time.Hour),
		"Persistent(None, -1)": recipe.WithRetryPolicy(retry.Persistent(retry.None(), -1)),
	} {
		// Nothing listens on port 1: a dial would fail differently.
		c, err := recipe.Connect(ctx, []string{"127.0.0.1:1"}, opt)
		if c != nil || !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s: Connect = %v, %v; want an error wrapping ErrInvalidArgument", name, c, err)
		}
	}
}

// The background loops take their schedule from the client's policy:
// cleanup of an abandoned node while the connection is cut, and Run's
// campaigns after its function failed.
func TestBackgroundLoopsUseThePolicy(t *testing.T) {
	srv := zktest.Shared(t)
	t.Run("cleanup", func(t *testing.T) {
		proxy, err := zktest.NewProxy(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		path := zktest.UniquePath(t)
		holder, err := mutex.New(locktest.Client(t, []string{srv.Addr()}), path)
		must(t, err)
		ctx := locktest.Ctx(t, 30*time.Second)
		must(t, holder.Lock(ctx))

		p := &countingPolicy{}
		waiter, err := mutex.New(locktest.Client(t, []string{proxy.Addr()},
			recipe.WithSessionTimeout(6*time.Second), recipe.WithRetryPolicy(p)), path)
		must(t, err)
		wctx, cancel := context.WithCancel(ctx)
		failed := make(chan error, 1)
		go func() { failed <- waiter.Lock(wctx) }()
		locktest.Queued(t, 2, holder.Participants)
		proxy.Partition()
		cancel()
		if err := <-failed; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v", err)
		}
		before := p.waits.Load()
		// The waiter's delete cannot get through: cleanup retries it, on
		// the policy's schedule, until the connection is back.
		time.Sleep(3 * time.Second)
		proxy.Heal()
		raw := zktest.Connect(t, srv.Addr())
		locktest.Eventually(t, 15*time.Second, "the waiter's node deleted", func() bool {
			return len(locktest.Children(t, raw, path)) == 1
		})
		if got := p.waits.Load() - before; got == 0 {
			t.Fatal("cleanup retried without asking the client's retry policy")
		} else {
			t.Logf("cleanup asked the policy for %d waits", got)
		}
	})
	t.Run("re-campaign", func(t *testing.T) {
		p := &countingPolicy{}
		c := locktest.Client(t, []string{srv.Addr()}, recipe.WithRetryPolicy(p))
		e, err := leader.New(c, zktest.UniquePath(t))
		must(t, err)
		ctx, cancel := context.WithCancel(locktest.Ctx(t, 30*time.Second))
		var terms atomic.Int64
		err = e.Run(ctx, func(context.Context) error {
			if terms.Add(1) == 4 {
				cancel()
				return nil
			}
			return errors.New("failing term")
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		if got := p.waits.Load(); got < 3 {
			t.Fatalf("3 failed terms asked the policy for %d waits, want at least 3", got)
		}
	})
}
