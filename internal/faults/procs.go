//go:build unix

package faults

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
)

// ProcSession is the session timeout of every holder process.
const ProcSession = 2 * time.Second

// ProcVariants are the recipes the process scenarios run: holder i of a
// variant takes Recipes[i%2], so in rwlock-read-write a reader is killed
// or paused with a writer queued behind it, and the other way round.
var ProcVariants = []struct {
	Name    string
	Recipes [2]string
}{
	{"mutex", [2]string{"mutex", "mutex"}},
	{"rwlock-write", [2]string{"rwlock-write", "rwlock-write"}},
	{"rwlock-read-write", [2]string{"rwlock-read", "rwlock-write"}},
	{"semaphore-1", [2]string{"semaphore-1", "semaphore-1"}},
	{"leader", [2]string{"leader", "leader"}},
}

// TB is what a [ProcRig] reports to: a *testing.T, or a stand-in with the
// same rules. Fatalf must not return (testing.T's ends the goroutine with
// runtime.Goexit; a stand-in must do the same).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// BuildHolder builds internal/faults/holderproc (without the race
// detector) into dir and returns the program's path.
func BuildHolder(dir string) (string, error) {
	out := filepath.Join(dir, "holderproc")
	cmd := exec.Command("go", "build", "-o", out, "github.com/zkrecipes/zkrecipes/internal/faults/holderproc")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build holderproc: %v\n%s", err, b)
	}
	return out, nil
}

// StopPath is the lock path of run number run of [ProcRig.StopRuns] under
// base.
func StopPath(base string, run int) string { return fmt.Sprintf("%s/%02d", base, run) }

// ProcRow is one line of the results table: what one scenario did to one
// variant.
type ProcRow struct {
	Scenario, Variant string
	Runs              int
	Grants            int
	Overlaps          int // holds that overlapped as the store saw them, or grants while an older node was still there
	Interleaved       int // writes of an older holder after a newer one's
	Refused           int // writes and probes the store refused
	Probes            int // deliberate writes under a lost token (all must be refused)
	AfterResume       int // writes that reached the store after SIGCONT
	CheckedAfter      int // of those, writes whose loss check began after SIGCONT
	InFlight          int // of those, writes whose loss check began before SIGCONT
	Reasons           map[string]int
	Guarded           int             // writes the register in ZooKeeper received through Commit
	GuardViolations   int             // of those, writes its history shows were made after their hold ended
	ToGrant           []time.Duration // kill: SIGKILL to the next grant
	ToSignal          []time.Duration // stop: SIGCONT to the holder seeing the loss
	Stopped           []time.Duration // stop: how long the holder was stopped
	ToRetake          []time.Duration // retake: resume (or heal) to the holder's next grant
}

// ProcTable renders the rows.
func ProcTable(rows []ProcRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\trecipe\truns\tgrants\toverlap\tinterleaved\trefused (probes)\twrites after resume (checked before / after resume)\tloss seen as\tkill->grant min/p50/max\tresume->signal min/p50/max\tstopped min/max\tresume->re-take min/p50/max\tguarded (viol)\t")
	for _, r := range rows {
		var reasons []string
		for k, n := range r.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(reasons)
		stopped := "-"
		if len(r.Stopped) > 0 {
			stopped = fmt.Sprintf("%v/%v", slices.Min(r.Stopped).Round(time.Millisecond), slices.Max(r.Stopped).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d (%d)\t%d (%d/%d)\t%s\t%s\t%s\t%s\t%s\t%d (%d)\t\n",
			r.Scenario, r.Variant, r.Runs, r.Grants, r.Overlaps, r.Interleaved, r.Refused, r.Probes,
			r.AfterResume, r.InFlight, r.CheckedAfter, strings.Join(reasons, ", "), spread(r.ToGrant, time.Millisecond),
			spread(r.ToSignal, 10*time.Microsecond), stopped, spread(r.ToRetake, time.Millisecond), r.Guarded, r.GuardViolations)
	}
	w.Flush()
	return b.String()
}

// spread renders min/p50/max of ds, rounded to unit.
func spread(ds []time.Duration, unit time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%v/%v/%v", s[0].Round(unit), s[len(s)/2].Round(unit), s[len(s)-1].Round(unit))
}

// ProcRig runs holder processes against one ZooKeeper server, each
// writing to the rig's fenced store, and checks what the store saw. Close
// ends every process it started (by pid) and frees the rest.
type ProcRig struct {
	t     TB
	bin   string
	addr  string
	dir   string
	store *TokenStore
	raw   *zk.Conn
	procs []*holderProc
}

// holderProc is one holder process.
type holderProc struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer // read only after exited is closed
	exited chan struct{}
	err    error
}

// NewProcRig starts a store in a new temporary directory and connects to
// the server at addr for the checks; bin is the holder program
// ([BuildHolder]). Failures go to t.
func NewProcRig(t TB, bin, addr string) (*ProcRig, error) {
	// A short directory: a unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "zkprocs")
	if err != nil {
		return nil, err
	}
	st, err := ListenStore(filepath.Join(dir, "store"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	raw, err := Raw([]string{addr})
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &ProcRig{t: t, bin: bin, addr: addr, dir: dir, store: st, raw: raw}, nil
}

// Close ends the processes still running (stopAll), then closes the
// check connection and the store and removes the directory.
func (r *ProcRig) Close() {
	r.stopAll()
	r.raw.Close()
	r.store.Close()
	os.RemoveAll(r.dir)
}

// Raw is the rig's plain connection for checks.
func (r *ProcRig) Raw() *zk.Conn { return r.raw }

// spawn starts a holder of recipe on path.
func (r *ProcRig) spawn(recipe, path string) *holderProc {
	r.t.Helper()
	return r.spawnAt(recipe, path, r.addr)
}

// stopAll ends every holder still running: continued if stopped, told to
// release (its standard input closed), killed by pid if it has not ended
// 5s later.
func (r *ProcRig) stopAll() {
	for _, p := range r.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.stdin.Close()
	}
	for _, p := range r.procs {
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// signal sends sig to p, by its pid.
func (r *ProcRig) signal(p *holderProc, sig syscall.Signal) {
	r.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("holder %d (pid %d): %v: %v", p.id, p.cmd.Process.Pid, sig, err)
	}
}

// exit waits (up to 10s) for p to end.
func (r *ProcRig) exit(p *holderProc) {
	r.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		r.t.Fatalf("holder %d (pid %d) still running 10s after it was told to end", p.id, p.cmd.Process.Pid)
	}
}

// release tells p to release and end, and waits for it.
func (r *ProcRig) release(p *holderProc) {
	r.t.Helper()
	p.stdin.Close()
	r.exit(p)
	if p.err != nil {
		r.t.Errorf("holder %d: %v\n%s", p.id, p.err, p.stderr.String())
	}
}

// until waits for cond, failing at once if one of the must-run processes
// ended.
func (r *ProcRig) until(timeout time.Duration, what string, cond func() bool, running ...*holderProc) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, p := range running {
			select {
			case <-p.exited:
				r.t.Fatalf("holder %d ended while waiting for %s: %v\n%s", p.id, what, p.err, p.stderr.String())
			default:
			}
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// granted waits until p is granted and has made n accepted writes.
func (r *ProcRig) granted(p *holderProc, n int, timeout time.Duration) *StoreEvent {
	r.t.Helper()
	r.until(timeout, fmt.Sprintf("holder %d granted, %d writes", p.id, n), func() bool {
		return r.store.Holder(p.id).Accepted >= n
	}, p)
	return r.store.Holder(p.id).Last[MsgGrant]
}

// queued waits until path has n children.
func (r *ProcRig) queued(path string, n int, running ...*holderProc) {
	r.t.Helper()
	r.until(10*time.Second, fmt.Sprintf("%d nodes in %s", n, path), func() bool {
		nodes, err := ListNodes(r.raw, path)
		return err == nil && len(nodes) == n
	}, running...)
}

// expiryBound bounds the wait for a grant that needs a session to expire.
const expiryBound = 4*ProcSession + 10*time.Second

// KillLoop kills the holder kills times, with two more processes queued
// each time, and checks the grants and writes the store saw.
func (r *ProcRig) KillLoop(recipes [2]string, path string, kills int) ProcRow {
	t := r.t
	row := ProcRow{Scenario: "kill", Runs: kills, Reasons: map[string]int{}}
	var live []*holderProc
	killedAt := map[int]time.Time{}
	var cur *holderProc
	for k := range kills {
		for len(live) < 3 {
			live = append(live, r.spawn(recipes[len(r.procs)%2], path))
			r.queued(path, len(live), live...)
		}
		if cur == nil {
			cur = live[0]
			r.granted(cur, 5, 10*time.Second)
		}
		tk := time.Now()
		r.signal(cur, syscall.SIGKILL)
		r.exit(cur)
		killed := cur
		killedAt[killed.id] = tk
		live = live[1:]
		cur = live[0]
		g := r.granted(cur, 5, expiryBound)
		row.ToGrant = append(row.ToGrant, g.At.Sub(tk))
		t.Logf("kill %d: holder %d killed, holder %d granted %v later (token %d)", k+1, killed.id, cur.id, g.At.Sub(tk).Round(time.Millisecond), g.Token)
	}
	for _, p := range live[1:] {
		r.release(p)
	}
	r.release(cur)
	r.checkRegister(&row, path, recipes)
	r.checkLog(&row, killedAt, nil)
	return row
}

// StopRuns pauses a holder past its session timeout runs times, each on a
// lock of its own under base, with a second process waiting behind it.
func (r *ProcRig) StopRuns(recipes [2]string, base string, runs int) ProcRow {
	t := r.t
	row := ProcRow{Scenario: "stop", Runs: runs, Reasons: map[string]int{}}
	excused := map[[2]int]bool{} // {holder, write}: writes in flight across a pause
	for run := range runs {
		path := StopPath(base, run)
		a := r.spawn(recipes[0], path)
		r.granted(a, 5, 10*time.Second)
		b := r.spawn(recipes[1], path)
		r.queued(path, 2, a, b)

		tsWall := time.Now().UnixNano()
		ts := time.Now()
		r.signal(a, syscall.SIGSTOP)
		r.granted(b, 3, expiryBound)
		if d := time.Since(ts); d < ProcSession {
			time.Sleep(ProcSession - d)
		}
		tcWall := time.Now().UnixNano()
		tc := time.Now()
		r.signal(a, syscall.SIGCONT)
		row.Stopped = append(row.Stopped, tc.Sub(ts))
		r.exit(a)
		r.release(b)
		r.checkRegister(&row, path, recipes)

		after := 0
		for _, ev := range r.store.Events() {
			if ev.ID != a.id || ev.Kind != MsgWrite || !ev.At.After(tc) {
				continue
			}
			after++
			what := fmt.Sprintf("run %d: holder %d (%s) wrote after the resume: write %d, token %d, accepted %v, reached the store %v after SIGCONT; its loss check began %v and passed %v after SIGSTOP (stopped %v)",
				run, a.id, recipes[0], ev.Seq, ev.Token, ev.Accepted, ev.At.Sub(tc),
				time.Duration(ev.Checked-tsWall), time.Duration(ev.Wall-tsWall), tc.Sub(ts).Round(time.Millisecond))
			what += "; reads from ZooKeeper since SIGSTOP, after SIGCONT: " + readsSince(ev.Reads, tsWall, tcWall)
			switch {
			case ev.Checked > tcWall:
				// Err and Done said "held" after the resume: the library's fault.
				row.CheckedAfter++
				t.Errorf("%s: checked after the resume", what)
			case ev.Wall < tcWall:
				// Its check passed before the stop took effect (a signal
				// takes effect a little after it is sent), its write went
				// out after the resume: no library can close that gap; the
				// store's fencing must (and did, unless reported above).
				row.InFlight++
				excused[[2]int{a.id, ev.Seq}] = true
				t.Logf("%s: checked before the stop took effect, written after the resume", what)
			default:
				// Stopped inside its check: whether Err read the clock
				// before the stop or after the resume cannot be told from
				// here; the reads listed show whether anything could have
				// reset the silence.
				row.InFlight++
				excused[[2]int{a.id, ev.Seq}] = true
				t.Logf("%s: stopped during its check", what)
			}
		}
		row.AfterResume += after
		hs := r.store.Holder(a.id)
		lost := hs.Last[MsgLost]
		if lost == nil {
			if hs.Last[MsgFenced] != nil {
				row.Reasons["fenced"]++
			}
			if after == 0 {
				t.Errorf("run %d: holder %d (%s) did not see its loss after the resume: %v\n%s", run, a.id, recipes[0], a.err, a.stderr.String())
			}
			continue
		}
		row.ToSignal = append(row.ToSignal, time.Duration(lost.Wall-tcWall))
		row.Reasons[lossKind(lost.Err)]++
		t.Logf("run %d: holder %d stopped %v; resumed, it saw the loss %v later (%s); %d writes after the resume; reads from ZooKeeper since SIGSTOP, after SIGCONT: %s",
			run, a.id, tc.Sub(ts).Round(time.Millisecond), time.Duration(lost.Wall-tcWall), lost.Err, after, readsSince(lost.Reads, tsWall, tcWall))
	}
	r.checkLog(&row, nil, excused)
	return row
}

// readsSince lists the reads that returned after from, each with its time
// after at.
func readsSince(reads []WireRead, from, at int64) string {
	var out []string
	for _, r := range reads {
		if r.Wall > from {
			out = append(out, fmt.Sprintf("%v %s", time.Duration(r.Wall-at), r))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// lossKind names the reason of a loss error.
func lossKind(msg string) string {
	for _, k := range []string{"connection suspended", "session expired", "node deleted", "closed"} {
		if strings.Contains(msg, k) {
			return strings.Fields(k)[0]
		}
	}
	return msg
}

// checkLog checks the store's log: grants in token order, each granted
// only after the holders before it had gone (their nodes absent from the
// listing right after the grant, and, for killed holders, the kill before
// the grant), writes of one holder at a time in grant order, every probe
// refused but the excused ones (probes made before any later holder was
// granted) and no other write refused but the excused ones (writes in
// flight across a pause), keyed by holder and write number.
// checkRegister checks the history of the register of the lock on path,
// written by the holders through Commit, and empties it.
func (r *ProcRig) checkRegister(row *ProcRow, path string, recipes [2]string) {
	hist, err := ReadRegister(r.raw, path, true)
	if err != nil {
		r.t.Errorf("%v", err)
	}
	row.Guarded += len(hist)
	leases := 0
	if strings.HasPrefix(recipes[0], "semaphore") {
		leases = 1
	}
	for _, v := range CheckHistory(hist, leases) {
		row.GuardViolations++
		r.t.Errorf("register of %s: %s", path, v)
	}
}

func (r *ProcRig) checkLog(row *ProcRow, killedAt map[int]time.Time, excused map[[2]int]bool) {
	t := r.t
	evs := r.store.Events()
	var grants []StoreEvent
	for _, ev := range evs {
		switch ev.Kind {
		case MsgGrant:
			grants = append(grants, ev)
		case MsgFailed:
			t.Errorf("holder %d failed: %s", ev.ID, ev.Err)
		}
	}
	row.Grants = len(grants)
	order := map[int]int{} // holder id -> rank of its grant
	for i, g := range grants {
		order[g.ID] = i
		if i == 0 {
			continue
		}
		prev := grants[i-1]
		if g.Token <= prev.Token {
			t.Errorf("holder %d granted with token %d after holder %d with token %d", g.ID, g.Token, prev.ID, prev.Token)
		}
		if killedAt != nil && !killedAt[prev.ID].Before(g.At) {
			row.Overlaps++
			t.Errorf("holder %d granted before holder %d was killed", g.ID, prev.ID)
		}
		for _, old := range grants[:i] {
			if slices.Contains(g.Nodes, old.Node) {
				row.Overlaps++
				t.Errorf("holder %d granted while node %s of holder %d was still there: %v", g.ID, old.Node, old.ID, g.Nodes)
			}
		}
	}
	last := -1 // grant rank of the newest writer so far
	var lastToken int64
	for _, ev := range evs {
		if ev.Kind != MsgWrite && ev.Kind != MsgProbe {
			continue
		}
		if !ev.Accepted {
			row.Refused++
		}
		if ev.Kind == MsgProbe {
			row.Probes++
			if ev.Accepted && !excused[[2]int{ev.ID, ev.Seq}] {
				t.Errorf("the store accepted holder %d's write under its lost token %d", ev.ID, ev.Token)
			}
			continue
		}
		if excused[[2]int{ev.ID, ev.Seq}] {
			continue
		}
		if !ev.Accepted {
			t.Errorf("the store refused holder %d's write %d under token %d", ev.ID, ev.Seq, ev.Token)
		}
		rank, ok := order[ev.ID]
		switch {
		case !ok:
			t.Errorf("holder %d wrote without a grant", ev.ID)
		case rank < last:
			row.Interleaved++
			t.Errorf("holder %d wrote (write %d) after a later holder had written", ev.ID, ev.Seq)
		default:
			last = rank
		}
		if ev.Accepted {
			if ev.Token < lastToken {
				t.Errorf("accepted tokens went down: %d after %d", ev.Token, lastToken)
			}
			lastToken = ev.Token
		}
	}
}
