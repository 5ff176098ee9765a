package multilock

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
)

// kind ranks a member among the members on one path: a set takes them in
// this order. The library's recipes are known by their type; any other
// [recipe.Acquirer] (a custom recipe's Lock or Handle) is a lock.
type kind uint8

const (
	kindMutex kind = iota + 1
	kindWrite
	kindRead
	kindLease
	kindLock
)

func (k kind) String() string {
	return [...]string{"?", "mutex", "write", "read", "lease", "lock"}[k]
}

// kindOf returns what a takes, and whether a is a nil handle.
func kindOf(a recipe.Acquirer) (k kind, isNil bool) {
	switch a := a.(type) {
	case nil:
		return kindLock, true
	case *mutex.Mutex:
		return kindMutex, a == nil
	case *semaphore.Semaphore:
		return kindLease, a == nil
	case *rwlock.Side:
		if a == nil {
			return kindRead, true
		}
		if a.Mode() == rwlock.Write {
			return kindWrite, false
		}
		return kindRead, false
	}
	return kindLock, false
}

// describe returns a member's kind and path, such as "write /locks/catalog".
func describe(a recipe.Acquirer) string {
	k, isNil := kindOf(a)
	if isNil {
		return k.String() + " (nil)"
	}
	return k.String() + " " + a.Path()
}

// compatible reports why a and b, members on one path in acquire order,
// cannot be held together. Only the write and the read side of one
// read/write lock handle can.
func compatible(a, b recipe.Acquirer) error {
	ka, _ := kindOf(a)
	kb, _ := kindOf(b)
	switch {
	case a == b || ka == kb:
		return errors.New("the same lock twice")
	case ka == kindWrite && kb == kindRead && a.(*rwlock.Side).RWLock() == b.(*rwlock.Side).RWLock():
		return nil
	case ka == kindWrite && kb == kindRead:
		return errors.New("a write and a read lock of different handles on one path would wait for each other")
	default:
		return fmt.Errorf("%w: a %s and a %s on one path", recipe.ErrMismatch, ka, kb)
	}
}

// held is one member while the set holds it. Done and token are those of
// the member's hold at the moment it was taken.
type held struct {
	recipe.Held
	done  <-chan struct{}
	token int64
}

// enterer is a member whose acquire can return a context carrying its
// hold (a mutex, a read/write lock's side, a reentrant.Handle).
type enterer interface {
	Enter(ctx context.Context, wait bool) (context.Context, error)
}

// take acquires the member a, waiting (wait) or looking once, and returns
// ctx carrying a's hold when a can say so, for the members taken after it
// (the read lock of a handle whose write lock the set took just before is
// its downgrade).
func take(ctx context.Context, a recipe.Acquirer, wait bool) (held, context.Context, error) {
	if e, ok := a.(enterer); ok {
		hctx, err := e.Enter(ctx, wait)
		if err != nil {
			return held{}, ctx, err
		}
		h := a.(recipe.Held)
		return held{h, h.Done(), h.Token()}, hctx, nil
	}
	h, err := a.Take(ctx, wait)
	if err != nil {
		return held{}, ctx, err
	}
	return held{h, h.Done(), h.Token()}, ctx, nil
}
