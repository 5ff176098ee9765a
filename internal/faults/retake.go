//go:build unix

package faults

import (
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// spawnAt starts a holder of recipe on path that connects to addr (a
// proxy of the test's, say) with the extra flags args.
func (r *ProcRig) spawnAt(recipe, path, addr string, args ...string) *holderProc {
	r.t.Helper()
	if err := EnsureRegister(r.raw, path); err != nil {
		r.t.Fatalf("%v", err)
	}
	p := &holderProc{id: len(r.procs), exited: make(chan struct{})}
	p.cmd = exec.Command(r.bin, append([]string{"-zk", addr, "-path", path, "-recipe", recipe, "-store", r.store.Addr(),
		"-id", strconv.Itoa(p.id), "-session", ProcSession.String()}, args...)...)
	p.cmd.SysProcAttr = holderProcAttr()
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		r.t.Fatalf("%v", err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		r.t.Fatalf("%v", err)
	}
	r.procs = append(r.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

// RetakeRuns checks that a holder process takes the lock again once its
// fault is over, runs times, each on a lock of its own under base: in
// even runs the holder is paused (SIGSTOP) past its session timeout, in
// odd runs cut off (its proxy black-holes it) for 1.5 session timeouts;
// meanwhile a second process is granted. Then the holder is resumed (or
// its proxy healed) and the second process releases at once: the
// holder, told of its loss, must take the lock again (as holder number
// 1000+run, holderproc's -again) within B (Bound) of the lock being free
// again, and the fault over. ToRetake has the times from the resume (or
// heal) to the second grant.
func (r *ProcRig) RetakeRuns(recipes [2]string, base string, runs int) ProcRow {
	t := r.t
	row := ProcRow{Scenario: "retake", Runs: runs, Reasons: map[string]int{}}
	bound := Bound(ProcSession, DefaultMaxSleep)
	excused := map[[2]int]bool{}
	for run := range runs {
		path := StopPath(base, run)
		cut := run%2 == 1
		addr := r.addr
		var proxy *zktest.Proxy
		if cut {
			p, err := zktest.NewProxy(r.addr)
			if err != nil {
				t.Fatalf("%v", err)
			}
			defer p.Close()
			proxy, addr = p, p.Addr()
		}
		again := 1000 + run
		a := r.spawnAt(recipes[0], path, addr, "-again", strconv.Itoa(again))
		r.granted(a, 5, 10*time.Second)
		b := r.spawn(recipes[1], path)
		r.queued(path, 2, a, b)

		ts := time.Now()
		hold := ProcSession
		if cut {
			hold = ProcSession * 3 / 2
			proxy.Partition()
		} else {
			r.signal(a, syscall.SIGSTOP)
		}
		r.granted(b, 3, expiryBound)
		if d := time.Since(ts); d < hold {
			time.Sleep(hold - d)
		}
		if cut {
			proxy.Heal()
		} else {
			r.signal(a, syscall.SIGCONT)
		}
		over := time.Now()
		r.release(b)
		free := time.Now()
		r.until(bound+10*time.Second, fmt.Sprintf("holder %d granted again as %d", a.id, again), func() bool {
			return r.store.Holder(again).Accepted >= 3
		}, a)
		g := r.store.Holder(again).Last[MsgGrant]
		switch hs := r.store.Holder(a.id); {
		case hs.Last[MsgLost] != nil:
			row.Reasons[lossKind(hs.Last[MsgLost].Err)]++
		case hs.Last[MsgFenced] != nil:
			row.Reasons["fenced"]++
		}
		row.ToRetake = append(row.ToRetake, g.At.Sub(over))
		how := "resumed"
		if cut {
			how = "healed"
		}
		t.Logf("retake run %d: holder %d (%s) %s after %v; granted again %v after that, %v after the lock was free (B %v)",
			run, a.id, recipes[0], how, over.Sub(ts).Round(time.Millisecond), g.At.Sub(over).Round(time.Millisecond),
			g.At.Sub(free).Round(time.Millisecond), bound)
		if late := g.At.Sub(free); late > bound+SchedulingAllowance {
			t.Errorf("retake run %d: holder %d granted again %v after the lock was free, past B %v + %v",
				run, a.id, late.Round(time.Millisecond), bound, SchedulingAllowance)
		}
		bGrant := r.store.Holder(b.id).Last[MsgGrant]
		for _, ev := range r.store.Events() {
			// Cut off, the holder learns of its loss at the loss
			// timeout, before its session expires and the next is
			// granted: its probe then rightly passes the fence.
			if ev.ID == a.id && ev.Kind == MsgProbe && bGrant != nil && ev.At.Before(bGrant.At) {
				excused[[2]int{a.id, ev.Seq}] = true
			}
			// A write of the first hold that reached the store after the
			// fault began was in flight across it: the store's fence is
			// what refuses it (the stop scenario checks the timing).
			if ev.ID == a.id && ev.Kind == MsgWrite && ev.At.After(ts) {
				excused[[2]int{a.id, ev.Seq}] = true
			}
		}
		r.release(a)
		r.checkRegister(&row, path, recipes)
	}
	r.checkLog(&row, nil, excused)
	return row
}
