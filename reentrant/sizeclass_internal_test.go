package reentrant

import (
	"errors"
	"testing"
	"unsafe"
)

// A queued waiter keeps its handle: pinned to the size class it takes
// today, so that a field that pushes it into the next class is a
// deliberate choice (see docs/performance.md).
func TestHandleSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(Handle{}); size > 64 {
		t.Errorf("Handle is %d B, past its size class of 64 B", size)
	}
}

// The handles of one kind share their sentinels; sentinels that do not
// compare are kept apart, not shared and not a panic.
func TestSentinelsShared(t *testing.T) {
	errA := errors.New("a")
	s := sentinels{Recipe: "x", NotAcquired: errA, WouldBlock: errA, NotHeld: errA}
	first, second := sentinelsOf(s), sentinelsOf(s)
	if first != second {
		t.Error("equal sentinels kept twice, want them shared")
	}
	odd := sentinels{Recipe: "x", NotAcquired: oddErr{[]int{1}}, WouldBlock: errA, NotHeld: errA}
	p, q := sentinelsOf(odd), sentinelsOf(odd)
	if p == q || p.Recipe != "x" {
		t.Error("sentinels that do not compare were shared")
	}
}

type oddErr struct{ v []int }

func (oddErr) Error() string { return "odd" }
