package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// cycles runs n lock cycles on a mutex at path, contended by the handles
// of workers goroutines, and returns the first error.
func cycles(ctx context.Context, c *recipe.Client, path string, workers, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		m, err := mutex.New(c, path)
		if err != nil {
			return err
		}
		wg.Go(func() {
			for range n {
				if err := m.Lock(ctx); err != nil {
					errs <- fmt.Errorf("lock: %w", err)
					return
				}
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// When go-zookeeper starts writing its frames in two writes, while
// goroutines take and release a lock through direct requests, the client
// turns direct requests off at the first such write, and no call fails:
// no direct frame goes between the two halves (which would garble the
// stream and cost the connection), no session or hold is lost, and every
// request from then on goes through go-zookeeper.
func TestGuardSwitchesLiveClient(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()}, recipe.WithDirectRequests(true))
	path := zktest.UniquePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cycles(ctx, c, path, 4, 20); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if before.Direct == 0 || before.DirectDisabled != 0 {
		t.Fatalf("before: %d direct requests, disabled %d; want some, 0", before.Direct, before.DirectDisabled)
	}

	done := make(chan error, 1)
	go func() { done <- cycles(ctx, c, path, 4, 60) }()
	time.Sleep(100 * time.Millisecond) // mid-run
	recipe.SplitWrites(c)
	if err := <-done; err != nil {
		t.Fatalf("a call failed across the switch: %v", err)
	}
	switched := c.Stats()
	if switched.DirectDisabled != 1 {
		t.Fatalf("DirectDisabled %d after go-zookeeper split a frame, want 1", switched.DirectDisabled)
	}
	if err := cycles(ctx, c, path, 4, 20); err != nil {
		t.Fatal(err)
	}
	after := c.Stats().Sub(switched)
	if after.Direct != 0 || after.Acquired != 80 {
		t.Fatalf("after the switch: %d direct requests in %d acquires, want 0 in 80", after.Direct, after.Acquired)
	}
	all := c.Stats().Sub(before)
	if all.EpochsEnded != 0 || all.Lost != 0 {
		t.Fatalf("across the switch: %d epochs ended, %d holds lost; want none", all.EpochsEnded, all.Lost)
	}
	t.Logf("direct requests before the switch: %d; across it: %d; after: 0 in %d acquires",
		before.Direct, switched.Direct-before.Direct, after.Acquired)
}

// Whether a client makes direct requests: the option, then the
// environment, then the go-zookeeper version the build names.
func TestDirectRequestsSwitch(t *testing.T) {
	srv := zktest.Shared(t)
	zkDep := func(version, replace string) *debug.BuildInfo {
		d := &debug.Module{Path: "github.com/go-zookeeper/zk", Version: version}
		if replace != "" {
			d.Replace = &debug.Module{Path: replace, Version: ""}
			if replace != "../zk" {
				d.Replace.Version = "v1.0.4"
			}
		}
		return &debug.BuildInfo{Deps: []*debug.Module{d}}
	}
	for _, tc := range []struct {
		name     string
		env      string
		opts     []recipe.Option
		info     *debug.BuildInfo
		direct   bool
		disabled int64
	}{
		{"default", "", nil, nil, true, 0},
		{"option off", "", []recipe.Option{recipe.WithDirectRequests(false)}, nil, false, 0},
		{"environment off", "off", nil, nil, false, 0},
		{"option over environment", "off", []recipe.Option{recipe.WithDirectRequests(true)}, nil, true, 0},
		{"tested version", "", nil, zkDep("v1.0.4", ""), true, 0},
		{"untested version", "", nil, zkDep("v1.0.5", ""), false, 1},
		{"untested even with the option", "", []recipe.Option{recipe.WithDirectRequests(true)}, zkDep("v1.1.0", ""), false, 1},
		{"directory replace", "", nil, zkDep("v1.0.4", "../zk"), true, 0},
		{"module replace by a tested version", "", nil, zkDep("v1.0.3", "example.com/fork/zk"), true, 0},
		{"no go-zookeeper named", "", nil, &debug.BuildInfo{}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ZKRECIPES_DIRECT_REQUESTS", tc.env)
			recipe.SetBuildInfo(t, tc.info)
			c := locktest.Client(t, []string{srv.Addr()}, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cycles(ctx, c, zktest.UniquePath(t), 1, 3); err != nil {
				t.Fatal(err)
			}
			s := c.Stats()
			if (s.Direct > 0) != tc.direct || s.DirectDisabled != tc.disabled {
				t.Fatalf("%d direct requests, DirectDisabled %d; want direct %v, %d", s.Direct, s.DirectDisabled, tc.direct, tc.disabled)
			}
		})
	}
	t.Run("bad environment", func(t *testing.T) {
		t.Setenv("ZKRECIPES_DIRECT_REQUESTS", "sometimes")
		// No server at this address: the error comes before any I/O.
		_, err := recipe.Connect(context.Background(), []string{"127.0.0.1:1"})
		if !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Fatalf("Connect: %v, want ErrInvalidArgument", err)
		}
	})
}
