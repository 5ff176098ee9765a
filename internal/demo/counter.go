//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
	"fmt"
	"os"
)

// Counter is a counter kept in a file ("counter=N token=0xT"). It stands
// for a storage service that honours fencing tokens: [Counter.Write]
// refuses a token lower than the last one written, that is, a write from
// an earlier lock holder. Its check and its write are one step for every
// process (see [UpdateFile]).
type Counter struct{ Path string }

// CounterState is the content of a [Counter] file.
type CounterState struct{ Value, Token int64 }

func (s CounterState) String() string {
	return fmt.Sprintf("counter=%d token=0x%x\n", s.Value, s.Token)
}

// FencedError is the error of a [Counter.Write] with a token lower than
// the file's.
type FencedError struct{ File CounterState }

func (e *FencedError) Error() string {
	return fmt.Sprintf("fenced: the file was written with token 0x%x", e.File.Token)
}

// Init sets the counter to zero, token zero.
func (c Counter) Init() error { return os.WriteFile(c.Path, []byte(CounterState{}.String()), 0o644) }

// Read returns the counter and the token it was last written with.
func (c Counter) Read() (CounterState, error) {
	b, err := ReadFile(c.Path)
	if err != nil {
		return CounterState{}, err
	}
	return c.parse(b)
}

func (c Counter) parse(b []byte) (CounterState, error) {
	var st CounterState
	if _, err := fmt.Sscanf(string(b), "counter=%d token=0x%x", &st.Value, &st.Token); err != nil {
		return CounterState{}, fmt.Errorf("%s: bad content %q: %w", c.Path, b, err)
	}
	return st, nil
}

// Write sets the counter to value with token, unless the file was last
// written with a greater token: then it fails with a [*FencedError] and
// leaves the file as it was. It returns the state it replaced (or found).
func (c Counter) Write(value, token int64) (prev CounterState, err error) {
	err = UpdateFile(c.Path, func(old []byte) ([]byte, error) {
		if prev, err = c.parse(old); err != nil {
			return nil, err
		}
		if prev.Token > token {
			return nil, &FencedError{File: prev}
		}
		return []byte(CounterState{value, token}.String()), nil
	})
	return prev, err
}

// ExitFenced is the exit status of a counter worker whose write the
// [Counter] refused.
const ExitFenced = 3

// CounterReport is what a worker of a [Counter] demo tells its parent
// when it ends.
type CounterReport struct {
	Waits  Waits // one per hold
	Writes int   // counter writes the file accepted
	Lost   int   // holds lost before their write or before their release
	Fenced bool  // a write was refused: a later holder had written
}

// Summarize prints the summary of a counter demo: the count, and a line per
// worker (from its [CounterReport] and exit status). It returns 0 if no
// update was lost: the count is what the workers wrote, every worker
// succeeded but the one stalled (0: none), which may have been fenced,
// and, unless one was fenced, the count is workers x increments.
func (c Counter) Summarize(workers []*Child, increments, stalled int) int {
	final, err := c.Read()
	if err != nil {
		fmt.Println("FAIL: cannot read the final counter:", err)
		return 1
	}
	expected := int64(len(workers) * increments)
	fmt.Printf("\nsummary\n  final count     %d  (last token 0x%x)\n", final.Value, final.Token)
	fmt.Printf("  expected count  %d  (%d workers x %d increments)\n", expected, len(workers), increments)
	ok, fenced, writes := true, false, int64(0)
	for _, w := range workers {
		var r CounterReport
		code := w.Wait()
		if !w.Report(&r) {
			fmt.Printf("  %s  no report (exit status %d)\n", w.Name(), code)
			ok = false
			continue
		}
		writes += int64(r.Writes)
		line := fmt.Sprintf("  %s  %3d acquisitions  %s", w.Name(), r.Waits.N, r.Waits)
		if r.Lost > 0 {
			line += fmt.Sprintf("  lost %d", r.Lost)
		}
		switch {
		case r.Fenced && code == ExitFenced:
			fenced, ok = true, ok && w.N == stalled
			line += fmt.Sprintf("  FENCED after %d writes: its stale write was refused", r.Writes)
		case code != 0:
			ok = false
			line += fmt.Sprintf("  FAILED (exit status %d)", code)
		}
		fmt.Println(line)
	}
	switch {
	case final.Value != writes:
		fmt.Printf("FAIL: the workers made %d writes but the counter is %d: updates were lost\n", writes, final.Value)
	case !ok:
		fmt.Println("FAIL: a worker failed (see above)")
	case fenced:
		fmt.Printf("ok: no update was lost; worker %d's write after its stall was refused by the fencing token, so the count is %d short\n",
			stalled, expected-final.Value)
		return 0
	case final.Value != expected:
		fmt.Printf("FAIL: the count is %d, expected %d\n", final.Value, expected)
	default:
		fmt.Println("ok: no update was lost")
		return 0
	}
	return 1
}
