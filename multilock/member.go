package multilock

import (
	"context"
	"fmt"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// Kind is what a [Member] takes: a mutex, the write or the read lock of a
// read/write lock, or one lease of a semaphore. Kinds are ordered as
// declared; the order breaks ties between members on one path.
type Kind uint8

// The kinds of member, in the order a [Set] takes them on one path.
const (
	KindMutex Kind = iota + 1
	KindWrite
	KindRead
	KindLease
)

// String returns "mutex", "write", "read" or "lease".
func (k Kind) String() string {
	switch k {
	case KindMutex:
		return "mutex"
	case KindWrite:
		return "write"
	case KindRead:
		return "read"
	case KindLease:
		return "lease"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Member is one lock of a [Set]: a handle and what to take from it. Make
// one with [Mutex], [Write], [Read] or [Lease]; the zero Member is refused
// by [New].
type Member struct {
	kind Kind
	m    *mutex.Mutex
	rw   *rwlock.RWLock
	s    *semaphore.Semaphore
}

// Mutex is the member that locks m.
func Mutex(m *mutex.Mutex) Member { return Member{kind: KindMutex, m: m} }

// Write is the member that takes the write lock of rw.
func Write(rw *rwlock.RWLock) Member { return Member{kind: KindWrite, rw: rw} }

// Read is the member that takes the read lock of rw.
func Read(rw *rwlock.RWLock) Member { return Member{kind: KindRead, rw: rw} }

// Lease is the member that takes one lease of s.
func Lease(s *semaphore.Semaphore) Member { return Member{kind: KindLease, s: s} }

// Kind returns what the member takes.
func (mb Member) Kind() Kind { return mb.kind }

// Path returns the path of the member's lock, "" for a member made from a
// nil handle.
func (mb Member) Path() string {
	switch {
	case mb.m != nil:
		return mb.m.Path()
	case mb.rw != nil:
		return mb.rw.Path()
	case mb.s != nil:
		return mb.s.Path()
	}
	return ""
}

// String returns the member's kind and path, such as "write /locks/catalog".
func (mb Member) String() string { return mb.kind.String() + " " + mb.Path() }

// handle returns the member's handle, nil if it has none.
func (mb Member) handle() any {
	switch {
	case mb.m != nil:
		return mb.m
	case mb.rw != nil:
		return mb.rw
	case mb.s != nil:
		return mb.s
	}
	return nil
}

// check reports what is wrong with the member itself.
func (mb Member) check() error {
	if mb.kind < KindMutex || mb.kind > KindLease {
		return fmt.Errorf("the zero Member (make members with Mutex, Write, Read or Lease)")
	}
	if mb.handle() == nil {
		return fmt.Errorf("%s member with a nil handle", mb.kind)
	}
	return nil
}

// held is one member while the set holds it. Done, err and token are
// those of the member's hold at the moment it was taken.
type held struct {
	done    <-chan struct{}
	err     func() error
	token   int64
	release func(ctx context.Context) error
}

// take acquires the member, waiting (wait) or looking once.
func (mb Member) take(ctx context.Context, wait bool) (held, error) {
	switch mb.kind {
	case KindMutex:
		m := mb.m
		if err := pick(wait, m.Lock, m.TryLock)(ctx); err != nil {
			return held{}, err
		}
		return held{m.Done(), m.Err, m.Token(), m.Unlock}, nil
	case KindWrite:
		rw := mb.rw
		if err := pick(wait, rw.Lock, rw.TryLock)(ctx); err != nil {
			return held{}, err
		}
		return held{rw.Done(), rw.Err, rw.Token(), rw.Unlock}, nil
	case KindRead:
		rw := mb.rw
		if err := pick(wait, rw.RLock, rw.TryRLock)(ctx); err != nil {
			return held{}, err
		}
		return held{rw.RDone(), rw.RErr, rw.RToken(), rw.RUnlock}, nil
	default: // KindLease; New admits no other
		l, err := pick(wait, mb.s.Acquire, mb.s.TryAcquire)(ctx)
		if err != nil {
			return held{}, err
		}
		return held{l.Done(), l.Err, l.Token(), l.Release}, nil
	}
}

// pick returns wait's form when waiting, try's otherwise.
func pick[F any](wait bool, waitForm, tryForm F) F {
	if wait {
		return waitForm
	}
	return tryForm
}
