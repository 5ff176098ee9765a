package migrate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// tenantProc is one process of a service that takes a lock per tenant, on
// go-zookeeper's zk.Lock (old) or on the mutex (new).
type tenantProc struct {
	stop   chan struct{}
	done   chan struct{}
	cycles atomic.Int64
}

// startTenantProc runs a process that locks the tenants' paths in turn,
// each for a few milliseconds, until stopped.
func startTenantProc(t *testing.T, im impl, addr string, paths []string, inside []locktest.Overlap, errs chan<- error) *tenantProc {
	p := &tenantProc{stop: make(chan struct{}), done: make(chan struct{})}
	locks := make([]contender, len(paths))
	for i, path := range paths {
		locks[i] = im.dial(t, addr, path)
	}
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				return
			default:
			}
			i := n % len(paths)
			if err := locks[i].lock(ctx); err != nil {
				errs <- fmt.Errorf("%s: lock %s: %w", im.name, paths[i], err)
				return
			}
			inside[i].Enter()
			time.Sleep(2 * time.Millisecond)
			inside[i].Exit()
			if err := locks[i].unlock(); err != nil {
				errs <- fmt.Errorf("%s: unlock %s: %w", im.name, paths[i], err)
				return
			}
			p.cycles.Add(1)
		}
	}()
	return p
}

func (p *tenantProc) end() { close(p.stop); <-p.done }

// A rolling deploy of a service's tenant locks: three processes on
// go-zookeeper's zk.Lock are replaced one at a time by three on the mutex,
// all locking the same tenant paths throughout. No tenant is ever held by
// two processes at once, and every process makes progress.
func TestTenantLocksRollingDeploy(t *testing.T) {
	srv := zktest.Shared(t)
	base := zktest.UniquePath(t)
	paths := []string{base + "/tenant-a", base + "/tenant-b", base + "/tenant-c"}
	inside := make([]locktest.Overlap, len(paths))
	errs := make(chan error, 16)
	old, cur := impls[0], impls[1]

	var procs []*tenantProc
	for range 3 {
		procs = append(procs, startTenantProc(t, old, srv.Addr(), paths, inside, errs))
	}
	var all []*tenantProc
	all = append(all, procs...)
	for i := range 3 {
		time.Sleep(700 * time.Millisecond)
		procs[i].end() // the old process stops; its replacement starts
		p := startTenantProc(t, cur, srv.Addr(), paths, inside, errs)
		procs[i] = p
		all = append(all, p)
	}
	time.Sleep(700 * time.Millisecond)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.end)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range inside {
		if v := inside[i].Violations(); v != 0 {
			t.Errorf("%s was held by two processes at once %d times", paths[i], v)
		}
	}
	for i, p := range all {
		if p.cycles.Load() == 0 {
			t.Errorf("process %d never held a tenant lock", i)
		}
	}
}
