package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The service suite: the full cycle of a service that keeps its state in
// ZooKeeper, next to go-zookeeper's zk.Lock doing the same. Ours: Lock,
// Client.Get of the state, Commit of the new state against the version
// read (a write that lands only while the lock is held), Unlock. zk.Lock's:
// Lock, Get, Set against the version read, Unlock. One session, and
// -sessions sessions on one lock; the uncontended pair takes turns in
// slices, the contended pair runs one after the other, in every round.
//
//	go run ./internal/bench -suite service -sessions 4

// Scenario ids of the service suite.
const (
	idServiceZkLock     = "service-zklock"
	idServiceMutex      = "service-mutex"
	idServiceZkLockCont = "service-zklock-contended"
	idServiceMutexCont  = "service-mutex-contended"
)

func serviceSuite() []scenario {
	return []scenario{
		{id: idServiceZkLock, title: "zk.Lock: lock, Get, Set, unlock", open: openServiceZkLock(false)},
		{id: idServiceMutex, title: "mutex: lock, Get, Commit, unlock", open: openServiceMutex(false)},
		{id: idServiceZkLockCont, title: "zk.Lock: lock, Get, Set, unlock", contended: true, open: openServiceZkLock(true)},
		{id: idServiceMutexCont, title: "mutex: lock, Get, Commit, unlock", contended: true, open: openServiceMutex(true)},
	}
}

// stateOf is the node that holds the state a service's lock at path
// protects: next to the lock's directory, not in it (zk.Lock takes every
// child of its directory for a lock node).
func stateOf(path string) string { return path + "-state" }

// serviceZk is one session's service cycle on zk.Lock.
type serviceZk struct {
	conn  *zk.Conn
	l     *zk.Lock
	state string
}

// Lock takes the lock, reads the state and writes it back against the
// version read; ctx is not used (zk.Lock takes none).
func (s serviceZk) Lock(context.Context) error {
	if err := s.l.Lock(); err != nil {
		return err
	}
	data, st, err := s.conn.Get(s.state)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if _, err := s.conn.Set(s.state, next(data), st.Version); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	return nil
}

// Unlock releases the lock.
func (s serviceZk) Unlock(context.Context) error { return s.l.Unlock() }

// serviceOurs is one session's service cycle on the mutex.
type serviceOurs struct {
	c     *recipe.Client
	m     *mutex.Mutex
	state string
}

// Lock takes the lock, reads the state with Client.Get and commits it
// against the version read.
func (s serviceOurs) Lock(ctx context.Context) error {
	if err := s.m.Lock(ctx); err != nil {
		return err
	}
	data, version, err := s.c.Get(ctx, s.state)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if _, err := s.m.Commit(ctx, recipe.SetDataVersion(s.state, next(data), version)); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Unlock releases the lock.
func (s serviceOurs) Unlock(ctx context.Context) error { return s.m.Unlock(ctx) }

// next is the state after data: a counter of 8 bytes at most.
func next(data []byte) []byte {
	var n uint64
	for _, b := range data[:min(len(data), 8)] {
		n = n<<8 | uint64(b)
	}
	n++
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		out[i] = byte(n)
		n >>= 8
	}
	return out
}

// makeState creates the state node of path with e's raw connection.
func makeState(ctx context.Context, e *env, path string) error {
	if err := e.mkdirAll(path); err != nil {
		return err
	}
	conn, err := e.rawConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Create(stateOf(path), next(nil), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("state node: %w", err)
	}
	return nil
}

func openServiceZkLock(contended bool) func(context.Context, *env, string) (*bench, error) {
	return func(ctx context.Context, e *env, path string) (*bench, error) {
		if err := makeState(ctx, e, path); err != nil {
			return nil, err
		}
		n := 1
		if contended {
			n = e.cfg.sessions
		}
		b, err := openZkLockersWith(ctx, e, path, n, func(conn *zk.Conn, l *zk.Lock) locker {
			return serviceZk{conn: conn, l: l, state: stateOf(path)}
		})
		if err != nil {
			return nil, err
		}
		if !contended {
			b.cycle = cycleOf(b.lockers[0])
		}
		return b, nil
	}
}

func openServiceMutex(contended bool) func(context.Context, *env, string) (*bench, error) {
	return func(ctx context.Context, e *env, path string) (*bench, error) {
		if err := makeState(ctx, e, path); err != nil {
			return nil, err
		}
		n := 1
		if contended {
			n = e.cfg.sessions
		}
		var clients []*recipe.Client
		b, err := openRecipeWith(ctx, e, path, n, nil, func(c *recipe.Client, _ int) (locker, error) {
			m, err := mutex.New(c, path)
			if err != nil {
				return nil, err
			}
			clients = append(clients, c)
			return serviceOurs{c: c, m: m, state: stateOf(path)}, nil
		})
		if err != nil {
			return nil, err
		}
		b.count = func() recipe.Stats { // every request, the reads and commits too
			var sum recipe.Stats
			for _, c := range clients {
				sum = addStats(sum, c.Stats())
			}
			return sum
		}
		if !contended {
			b.cycle = cycleOf(b.lockers[0])
		}
		return b, nil
	}
}
