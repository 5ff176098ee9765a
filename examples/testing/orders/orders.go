// Package orders is the service under test in this example: a Worker that
// writes orders to a Store for as long as it holds a ZooKeeper mutex, and
// stops the moment the mutex is lost.
package orders

import (
	"context"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/mutex"
)

// An Order is one write to the Store.
type Order struct {
	Worker string // who wrote it
	Token  int64  // the writer's fencing token (mutex.Token) at the time
	Seq    int    // 1, 2, ... per run of a worker
}

// Store stands in for a database: an append-only list of orders.
type Store struct {
	mu     sync.Mutex
	orders []Order
}

// Append adds o if check, called under the store's lock, returns nil.
// Checking the lock there, as late as possible, means no order is
// written once the lock is known to be lost.
func (s *Store) Append(o Order, check func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := check(); err != nil {
		return err
	}
	s.orders = append(s.orders, o)
	return nil
}

// Orders returns a copy of the orders written so far, oldest first.
func (s *Store) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Order(nil), s.orders...)
}

// A Worker writes an order every Every while it holds Lock.
type Worker struct {
	Name  string
	Lock  *mutex.Mutex
	Store *Store
	Every time.Duration
}

// Run takes the lock, then writes orders until ctx ends or the lock is
// lost. It returns ctx's error, or the lock's (wrapping mutex.ErrLost)
// when the lock was lost. The lock is released on return.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Lock.Lock(ctx); err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Lock.Unlock(ctx) // after a loss there is nothing to delete
	}()
	token := w.Lock.Token()
	tick := time.NewTicker(w.Every)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-w.Lock.Done():
			return w.Lock.Err()
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		o := Order{Worker: w.Name, Token: token, Seq: seq}
		if err := w.Store.Append(o, w.Lock.Err); err != nil {
			return err
		}
	}
}
