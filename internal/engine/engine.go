// Package engine is the private half of package recipe: what the recipes of
// this module, their tests and the internal tools need from a client beyond
// the public plug-in surface (raw reads with contexts, counters, the
// client's logger, tracer and retry schedule). Package recipe fills it in
// when it is initialised; nothing outside this module can import it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/trace"
)

// Client is the private view of a *recipe.Client. Reads return ctx's error
// as soon as ctx ends and are counted in Stats; they are not retried.
type Client interface {
	Children(ctx context.Context, path string) ([]string, error)
	ChildrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error)
	Get(ctx context.Context, path string) ([]byte, *zk.Stat, error)
	GetW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error)
	ExistsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error)
	// Conn is the go-zookeeper connection, for tests that act as another
	// party on the same session.
	Conn() *zk.Conn
	Logger() *slog.Logger
	Tracer() trace.Tracer
	Stats() Stats
	// Subscribe delivers every connection and session state change, in
	// order, never blocking the client; cancel stops it.
	Subscribe() (events <-chan Event, cancel func())
	// Done is closed when the client is closed.
	Done() <-chan struct{}
	// Backoff returns a fresh schedule, under the client's retry policy,
	// for a background loop that must go on until something outside it
	// stops it (see retry.Persistent and [MinBackgroundWait]).
	Backoff() Pacer
}

// Pacer spaces the tries of a background loop.
type Pacer interface {
	// Pause sleeps until the next try is due; it reports false, at once,
	// when ctx ends first.
	Pause(ctx context.Context) bool
	// Reset starts the schedule afresh, after the loop made progress.
	Reset()
}

// MinBackgroundWait is the shortest pause between two tries of a
// background loop (cleanup, re-arming a watch, re-campaigning, observing)
// once the client's retry policy has no more retries to give, or when it
// allows none: such loops keep the policy's last pace, at least this.
const MinBackgroundWait = 100 * time.Millisecond

// Event is a change of a client's connection or session state.
type Event struct {
	// State is go-zookeeper's state: zk.StateHasSession when (re)connected
	// with a session, zk.StateDisconnected, zk.StateExpired, ...
	State zk.State
	// Session is the session id at the time of the event (0 if none).
	Session int64
	// Time is when the client saw the event.
	Time time.Time
}

// Stats counts what a client has done since it connected: ZooKeeper
// requests by kind, wake-ups of waiters, retries and losses. Tests and
// benchmarks use it to check round trips and herd behaviour.
type Stats struct {
	// Creates, Deletes, Lists and Reads count requests sent by the recipes
	// (create, delete, getChildren, getData/exists).
	Creates, Deletes, Lists, Reads int64
	// Wakeups counts watch events that woke a waiting acquire.
	Wakeups int64
	// Retries counts operations retried after a connection-loss error.
	Retries int64
	// Recovered counts creates whose reply was lost and whose node was
	// found again by its UUID instead of being created twice.
	Recovered int64
	// Acquired counts successful acquires (reentrant ones excluded).
	Acquired int64
	// Lost counts holds that lost ownership.
	Lost int64
	// EpochsEnded counts the times the session stopped being trusted
	// (expiry, suspension, close).
	EpochsEnded int64
	// Suspensions counts the suspensions of a client that tolerates them
	// (recipe.WithSuspensionTolerance): silences past the loss timeout
	// that did not end the epoch.
	Suspensions int64
	// Writes counts setData requests (revocation).
	Writes int64
}

// RoundTrips returns the number of requests counted in s.
func (s Stats) RoundTrips() int64 { return s.Creates + s.Deletes + s.Lists + s.Reads + s.Writes }

// Sub returns s minus o, field by field: the activity between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Creates: s.Creates - o.Creates, Deletes: s.Deletes - o.Deletes,
		Lists: s.Lists - o.Lists, Reads: s.Reads - o.Reads,
		Wakeups: s.Wakeups - o.Wakeups, Retries: s.Retries - o.Retries,
		Recovered: s.Recovered - o.Recovered, Acquired: s.Acquired - o.Acquired, Lost: s.Lost - o.Lost,
		EpochsEnded: s.EpochsEnded - o.EpochsEnded, Suspensions: s.Suspensions - o.Suspensions,
		Writes: s.Writes - o.Writes,
	}
}

// Hooks are filled in by package recipe when it is initialised.
var of func(any) Client

// Register is called once, by package recipe.
func Register(clientOf func(any) Client, relabelFn func(err, label error) error) {
	of, relabel = clientOf, relabelFn
}

// Of returns the private view of c, which must be a *recipe.Client.
func Of(c any) Client { return of(c) }

// DefaultNodeData is the data stored in lock nodes unless a recipe is given
// some: "<host name>:<pid>", so an operator listing a lock's queue can see
// which process holds or waits.
func DefaultNodeData() []byte {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Appendf(nil, "%s:%d", host, os.Getpid())
}

// Sentinel returns a sentinel error of a recipe package with message msg
// that also matches the engine's sentinel base with errors.Is.
func Sentinel(msg string, base error) error { return &sentinel{msg, base} }

type sentinel struct {
	msg  string
	base error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.base }

// relabel is filled in by package recipe.
var relabel func(err, label error) error

// Relabel returns a failed acquire's error with label, a recipe's sentinel
// matching recipe.ErrNotAcquired, in place of the engine's, so the message
// names the recipe once; other errors are wrapped with label.
func Relabel(err, label error) error { return relabel(err, label) }

// ErrOtherKind is wrapped, with recipe.ErrMismatch, by the error of an
// acquire that found another kind of lock queued in its directory, so that a
// recipe can tell it from a mismatch of its own parameters.
var ErrOtherKind = errors.New("another kind of lock")

// Enter takes the one-slot semaphore sem that serialises the calls on a
// recipe handle, waiting until ctx ends. A free slot is taken even when ctx
// has ended: an Unlock with an expired ctx must still release (its
// deletion then goes on in the background), not fail at random.
func Enter(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
