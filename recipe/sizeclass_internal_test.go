package recipe

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/zkrecipes/zkrecipes/driver"
)

// The structs that every hold and every queued waiter keeps, pinned to the
// size class their allocation takes today: a field that pushes one into
// the next class costs every hold (or waiter) the difference, and must be
// a deliberate choice. See docs/performance.md.
func TestStructSizeClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  uintptr
		class uintptr // the allocator's size class it must stay in
	}{
		{"Hold", unsafe.Sizeof(Hold{}), 224},
		{"holdContext", unsafe.Sizeof(holdContext{}), 16},
		{"attempt", unsafe.Sizeof(attempt{}), 208},
		{"Lock", unsafe.Sizeof(Lock{}), 64},
	} {
		if tc.size > tc.class {
			t.Errorf("%s is %d B, past its size class of %d B", tc.name, tc.size, tc.class)
		}
	}
}

// Locks of one LockSpec share its kind; a spec that cannot be a map key
// gets a kind of its own; and nothing the caller changes after NewLock
// reaches a Lock.
func TestLockKinds(t *testing.T) {
	c := fakeClient(t, newFakeZK())
	spec := func() LockSpec {
		return LockSpec{Recipe: "kindtest", LockName: "k-", Queue: []string{"k-", "j-"}, Driver: driver.Mutex(),
			DirData: []byte("dir"), NotHeld: errKindTest}
	}
	data := []byte("host:1")
	a, err := NewLock(c, "/k/a", spec(), data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLock(c, "/k/b", spec(), []byte("host:1"))
	if err != nil {
		t.Fatal(err)
	}
	if a.lockKind != b.lockKind {
		t.Error("two Locks of one LockSpec have a kind each, want one shared")
	}
	if &a.data[0] != &b.data[0] {
		t.Error("equal node data copied twice, want it shared")
	}
	data[0] = 'X' // the caller's slice
	if string(a.data) != "host:1" || string(b.data) != "host:1" {
		t.Errorf("node data %q and %q after the caller changed its slice, want host:1", a.data, b.data)
	}
	other, err := NewLock(c, "/k/c", spec(), []byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	if other.lockKind != a.lockKind || string(other.data) != "other" {
		t.Errorf("other node data: kind shared %v, data %q; want shared, other", other.lockKind == a.lockKind, other.data)
	}

	s := spec()
	s.MaxHold = 1
	if l, err := NewLock(c, "/k/d", s, nil); err != nil || l.lockKind == a.lockKind {
		t.Errorf("another MaxHold: shares the kind %v (err %v), want a kind of its own", err == nil, err)
	}

	s = spec()
	s.DirData = []byte{} // set, and empty: not the kind of a spec without DirData
	e1, err1 := NewLock(c, "/k/h", s, nil)
	s.DirData = nil
	e2, err2 := NewLock(c, "/k/i", s, nil)
	if err1 != nil || err2 != nil || e1.lockKind == e2.lockKind || e1.spec.DirData == nil || e2.spec.DirData != nil {
		t.Errorf("empty and nil DirData: one kind %v (errors %v, %v), want a kind each, keeping which is nil",
			err1 == nil && err2 == nil && e1.lockKind == e2.lockKind, err1, err2)
	}
	s = spec()
	s.Queue = []string{"k-", "j-/x"}
	q1, err1 := NewLock(c, "/k/j", s, nil)
	s.Queue = []string{"k-", "j-", "x"}
	q2, err2 := NewLock(c, "/k/k", s, nil)
	if err1 != nil || err2 != nil || q1.lockKind == q2.lockKind {
		t.Errorf("two queues whose names run together: one kind (errors %v, %v), want a kind each", err1, err2)
	}

	s = spec()
	s.Driver = driver.DriverFunc(func(sorted []string, self string) (driver.Decision, error) {
		return driver.Mutex().Decide(sorted, self)
	})
	f1, err1 := NewLock(c, "/k/e", s, nil)
	f2, err2 := NewLock(c, "/k/f", s, nil)
	if err1 != nil || err2 != nil || f1.lockKind == f2.lockKind {
		t.Errorf("a driver that does not compare: kinds shared %v (errors %v, %v), want one each", err1 == nil && err2 == nil && f1.lockKind == f2.lockKind, err1, err2)
	}

	s = spec()
	l, err := NewLock(c, "/k/g", s, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Queue[0], s.DirData[0] = "z-", 'Z' // the caller's slices
	if got := l.Spec(); got.Queue[0] != "k-" || string(got.DirData) != "dir" {
		t.Errorf("after the caller changed its LockSpec: queue %q, dir data %q; want k-, dir", got.Queue, got.DirData)
	}
	if !errors.Is(l.Spec().NotHeld, errKindTest) || l.Spec().WouldBlock != ErrWouldBlock {
		t.Errorf("sentinels %v, %v: want the spec's and the default", l.Spec().NotHeld, l.Spec().WouldBlock)
	}
}

var errKindTest = errors.New("kindtest: not held")
