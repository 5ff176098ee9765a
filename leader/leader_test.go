package leader_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { locktest.Main(m) }

func newElection(t testing.TB, c *recipe.Client, path string, opts ...leader.Option) *leader.Election {
	t.Helper()
	e, err := leader.New(c, path, opts...)
	if err != nil {
		t.Fatalf("leader.New(%q): %v", path, err)
	}
	return e
}

func TestCampaignResign(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	c1 := locktest.Client(t, []string{srv.Addr()})
	c2 := locktest.Client(t, []string{srv.Addr()})
	co := locktest.Client(t, []string{srv.Addr()})
	alpha := newElection(t, c1, path, leader.WithData([]byte("alpha")))
	beta := newElection(t, c2, path, leader.WithData([]byte("beta")))
	watcher := newElection(t, co, path) // never campaigns

	if _, err := watcher.Leader(ctx); !errors.Is(err, leader.ErrNoLeader) {
		t.Fatalf("Leader on an empty election = %v, want ErrNoLeader", err)
	}
	if err := alpha.Err(); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("Err before Campaign = %v, want ErrNotLeader", err)
	}
	if !locktest.Closed(alpha.Done()) || alpha.IsLeader() || alpha.Token() != 0 || alpha.Node() != "" {
		t.Fatal("a handle without a term should have a closed Done, no leadership, no token and no node")
	}

	if err := alpha.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if !alpha.IsLeader() || alpha.Err() != nil || alpha.Token() <= 0 || locktest.Closed(alpha.Done()) {
		t.Fatalf("after Campaign: IsLeader=%v Err=%v Token=%d", alpha.IsLeader(), alpha.Err(), alpha.Token())
	}
	locktest.Settle(t, c1)
	before := c1.Stats()
	if err := alpha.Campaign(ctx); err != nil {
		t.Fatalf("Campaign while leading = %v, want nil", err)
	}
	if n := c1.Stats().Sub(before).RoundTrips(); n != 0 {
		t.Fatalf("Campaign while leading made %d round trips, want 0", n)
	}
	got, err := watcher.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != "alpha" || got.Node != alpha.Node() || got.Token != alpha.Token() || got.Session != c1.SessionID() {
		t.Fatalf("Leader = %+v, want alpha's node %s token %d session 0x%x", got, alpha.Node(), alpha.Token(), c1.SessionID())
	}

	elected := make(chan error, 1)
	go func() { elected <- beta.Campaign(ctx) }()
	locktest.Eventually(t, 10*time.Second, "beta in line", func() bool {
		p, err := watcher.Participants(ctx)
		return err == nil && len(p) == 2
	})
	p, err := watcher.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(p[0].Data) != "alpha" || string(p[1].Data) != "beta" {
		t.Fatalf("Participants = %+v, want alpha then beta", p)
	}
	locktest.Settle(t, c2)
	before = c2.Stats()
	if err := beta.Resign(ctx); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("Resign while campaigning = %v, want ErrNotLeader", err)
	}
	if n := c2.Stats().Sub(before).RoundTrips(); n != 0 {
		t.Fatalf("Resign without a term made %d round trips, want 0", n)
	}
	if beta.IsLeader() {
		t.Fatal("beta leads while alpha does")
	}

	first := alpha.Token()
	done := alpha.Done()
	if err := alpha.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !locktest.Closed(done) || alpha.IsLeader() || !errors.Is(alpha.Err(), leader.ErrNotLeader) {
		t.Fatal("after Resign the term should be over")
	}
	if err := <-elected; err != nil {
		t.Fatalf("beta's Campaign: %v", err)
	}
	if !beta.IsLeader() || beta.Token() <= first {
		t.Fatalf("beta: IsLeader=%v token %d, want leading with a token above %d", beta.IsLeader(), beta.Token(), first)
	}
	if err := alpha.Resign(ctx); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("second Resign = %v, want ErrNotLeader", err)
	}
	if got, err := watcher.Leader(ctx); err != nil || string(got.Data) != "beta" {
		t.Fatalf("Leader = %+v, %v, want beta", got, err)
	}
	if err := beta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, leader.ErrNoLeader) {
		t.Fatalf("Leader after everyone resigned = %v, want ErrNoLeader", err)
	}
}

func TestCampaignTimeoutAndCancelCleanUp(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	for _, mode := range []string{"deadline", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			path := zktest.UniquePath(t)
			holder := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
			if err := holder.Campaign(locktest.Ctx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			waiter := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
			var ctx context.Context
			var want error
			if mode == "deadline" {
				ctx, want = locktest.Ctx(t, 200*time.Millisecond), context.DeadlineExceeded
			} else {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
				want = context.Canceled
			}
			err := waiter.Campaign(ctx)
			if !errors.Is(err, want) || !errors.Is(err, leader.ErrNotElected) {
				t.Fatalf("Campaign behind a leader = %v, want %v and ErrNotElected", err, want)
			}
			if left := locktest.Children(t, raw, path); len(left) != 1 || left[0] != holder.Node() {
				t.Fatalf("after the failed Campaign the directory holds %v, want only the leader's %s", left, holder.Node())
			}
			if waiter.IsLeader() || !errors.Is(waiter.Err(), leader.ErrNotLeader) {
				t.Fatal("the waiter should not lead")
			}
			if err := holder.Resign(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A leader whose node is deleted by someone else is told; Campaign after
// the loss starts a new term with a greater token.
func TestLossAndCampaignAgain(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	e := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	ctx := locktest.Ctx(t, 20*time.Second)
	if err := e.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	first := e.Token()
	raw := zktest.Connect(t, srv.Addr())
	if err := raw.Delete(path+"/"+e.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the node was deleted")
	}
	if err := e.Err(); !errors.Is(err, leader.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Err = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if e.IsLeader() || e.Token() != first {
		t.Fatalf("after the loss: IsLeader=%v Token=%d, want false and the lost term's %d", e.IsLeader(), e.Token(), first)
	}
	if err := e.Campaign(ctx); err != nil {
		t.Fatalf("Campaign after a loss: %v", err)
	}
	if !e.IsLeader() || e.Token() <= first {
		t.Fatalf("new term: IsLeader=%v token %d, want leading with a token above %d", e.IsLeader(), e.Token(), first)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use, for a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Run: an error from fn is logged and not fatal, a nil return ends the term
// and Run campaigns again, Resign cancels the term's context with
// ErrResigned, and the end of ctx makes Run resign and return ctx's error.
func TestRunTerms(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c := locktest.Client(t, []string{srv.Addr()})
	e := newElection(t, c, path, leader.WithData([]byte("runner")), leader.WithLogger(logger))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type call struct {
		token int64
		cause error
	}
	calls := make(chan call, 10)
	n := 0
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(ctx, func(tctx context.Context) error {
			n++
			token := e.Token()
			switch n {
			case 1:
				calls <- call{token: token}
				return errors.New("boom")
			case 2:
				calls <- call{token: token}
				return nil
			default:
				<-tctx.Done()
				calls <- call{token: token, cause: context.Cause(tctx)}
				return nil
			}
		})
	}()
	var tokens []int64
	for range 2 {
		select {
		case cl := <-calls:
			tokens = append(tokens, cl.token)
		case <-ctx.Done():
			t.Fatal("Run did not call fn again")
		}
	}
	locktest.Eventually(t, 10*time.Second, "the third term", func() bool { return e.IsLeader() && e.Token() > tokens[1] })
	third := e.Token()
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	cl := <-calls
	if cl.token != third || !errors.Is(cl.cause, leader.ErrResigned) {
		t.Fatalf("term after Resign: %+v, want token %d and cause ErrResigned", cl, third)
	}
	tokens = append(tokens, third)
	locktest.Eventually(t, 10*time.Second, "a term after the resignation", func() bool { return e.IsLeader() && e.Token() > third })
	fourth := e.Token()
	cancel()
	select {
	case err := <-runErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	cl = <-calls
	if cl.token != fourth || !errors.Is(cl.cause, context.Canceled) {
		t.Fatalf("last term: %+v, want token %d ended by context.Canceled", cl, fourth)
	}
	tokens = append(tokens, fourth)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term tokens %v do not strictly increase", tokens)
		}
	}
	if e.IsLeader() || e.Token() != 0 {
		t.Fatal("after Run returned the handle should have no term")
	}
	if left := locktest.Children(t, zktest.Connect(t, srv.Addr()), path); len(left) != 0 {
		t.Fatalf("nodes left after Run returned: %v", left)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Fatalf("fn's error was not logged:\n%s", logs.String())
	}
}

// A participant that is never elected never runs fn; Run returns ctx's
// error and leaves no node.
func TestRunNeverElected(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	holder := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	if err := holder.Campaign(locktest.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	other := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	err := other.Run(locktest.Ctx(t, 500*time.Millisecond), func(context.Context) error {
		t.Error("fn called for a participant that was never elected")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	if left := locktest.Children(t, zktest.Connect(t, srv.Addr()), path); len(left) != 1 || left[0] != holder.Node() {
		t.Fatalf("directory holds %v, want only the leader's %s", left, holder.Node())
	}
	if err := holder.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Closing the client ends the term (its context is cancelled with
// ErrLost and recipe.ErrClosed) and Run returns an error wrapping
// recipe.ErrClosed.
func TestRunClientClosed(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	e := newElection(t, c, zktest.UniquePath(t))
	causes := make(chan error, 1)
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil
		})
	}()
	locktest.Eventually(t, 10*time.Second, "leading", e.IsLeader)
	c.Close()
	select {
	case cause := <-causes:
		if !errors.Is(cause, leader.ErrLost) || !errors.Is(cause, recipe.ErrClosed) {
			t.Fatalf("cause = %v, want ErrLost and recipe.ErrClosed", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("term context not cancelled after Close")
	}
	select {
	case err := <-runErr:
		if !errors.Is(err, recipe.ErrClosed) {
			t.Fatalf("Run = %v, want recipe.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}

// Observe delivers the current leader and each new one, never twice,
// follows the directory through being reaped and created again, and ends
// when its context ends or the client closes.
func TestObserve(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	wc := locktest.Client(t, []string{srv.Addr()})
	watcher := newElection(t, wc, path)
	alpha := newElection(t, locktest.Client(t, []string{srv.Addr()}), path, leader.WithData([]byte("alpha")))
	beta := newElection(t, locktest.Client(t, []string{srv.Addr()}), path, leader.WithData([]byte("beta")))

	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := watcher.Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) leader.Participant {
		t.Helper()
		select {
		case info, ok := <-ch:
			if !ok {
				t.Fatalf("observer closed while waiting for %s", what)
			}
			return info
		case <-time.After(10 * time.Second):
			t.Fatalf("observer did not deliver %s", what)
		}
		return leader.Participant{}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case info := <-ch:
			t.Fatalf("observer delivered %+v %s", info, what)
		case <-time.After(300 * time.Millisecond):
		}
	}

	quiet("while nobody campaigns")
	if err := alpha.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next("alpha"); string(got.Data) != "alpha" || got.Token != alpha.Token() || got.Node != alpha.Node() {
		t.Fatalf("delivered %+v, want alpha with token %d", got, alpha.Token())
	}
	elected := make(chan error, 1)
	go func() { elected <- beta.Campaign(ctx) }()
	locktest.Eventually(t, 10*time.Second, "beta in line", func() bool {
		p, err := watcher.Participants(ctx)
		return err == nil && len(p) == 2
	})
	quiet("when a participant joined behind the leader")
	if err := alpha.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-elected; err != nil {
		t.Fatal(err)
	}
	if got := next("beta"); string(got.Data) != "beta" || got.Token != beta.Token() {
		t.Fatalf("delivered %+v, want beta with token %d", got, beta.Token())
	}
	betaToken := beta.Token()
	if err := beta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// The empty container directory is reaped by the server (every second
	// in tests); the observer then waits for it to be created again.
	raw := zktest.Connect(t, srv.Addr())
	locktest.Eventually(t, 10*time.Second, "the directory reaped", func() bool {
		ok, _, err := raw.Exists(path)
		return err == nil && !ok
	})
	quiet("after everyone resigned")
	if err := alpha.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next("alpha's second term"); string(got.Data) != "alpha" || got.Token != alpha.Token() || got.Token <= betaToken {
		t.Fatalf("delivered %+v, want alpha with token %d (above %d)", got, alpha.Token(), betaToken)
	}
	if err := alpha.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	stop()
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
		case <-time.After(5 * time.Second):
			t.Fatal("observer not closed after its context ended")
		}
		break
	}

	// Closing the client ends an observation too.
	ch2, err := watcher.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wc.Close()
	select {
	case _, ok := <-ch2:
		if ok {
			t.Fatal("observer delivered a leader while nobody campaigns")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("observer not closed after the client closed")
	}
}

func TestBadInput(t *testing.T) {
	srv := zktest.Shared(t)
	c := locktest.Client(t, []string{srv.Addr()})
	locktest.Settle(t, c)
	before := c.Stats()
	for _, p := range []string{"", "services/a", "/services/a/", "/services//a", "/services/./a", "/services/../a", "/", "/zookeeper/x", "/a\x00b"} {
		if _, err := leader.New(c, p); !errors.Is(err, recipe.ErrInvalidPath) {
			t.Errorf("New(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	for name, opts := range map[string][]leader.Option{
		"nil option":  {nil},
		"empty id":    {leader.WithData([]byte(""))},
		"nil logger":  {leader.WithLogger(nil)},
		"later empty": {leader.WithData([]byte("a")), leader.WithData([]byte(""))},
	} {
		if _, err := leader.New(c, "/services/a", opts...); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("New with %s = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := leader.New(nil, "/services/a"); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("New(nil client) = %v, want ErrInvalidArgument", err)
	}
	e := newElection(t, c, zktest.UniquePath(t))
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := e.Campaign(nil); !errors.Is(err, recipe.ErrInvalidArgument) || !errors.Is(err, leader.ErrNotElected) { //nolint:staticcheck
		t.Errorf("Campaign(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := e.Resign(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Resign(nil) = %v", err)
	}
	if err := e.Resign(context.Background()); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("Resign without a term = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := e.Run(nil, func(context.Context) error { return nil }); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Run(nil, fn) = %v", err)
	}
	if err := e.Run(context.Background(), nil); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("Run(ctx, nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := e.Leader(nil); !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Leader(nil) = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if ch, err := e.Observe(nil); ch != nil || !errors.Is(err, recipe.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Observe(nil) = %v, %v", ch, err)
	}
	if got := c.Stats().Sub(before).RoundTrips(); got != 0 {
		t.Fatalf("bad input caused %d round trips, want 0", got)
	}
}

// A second Run on a handle while one is in progress is refused.
func TestRunTwice(t *testing.T) {
	srv := zktest.Shared(t)
	e := newElection(t, locktest.Client(t, []string{srv.Addr()}), zktest.UniquePath(t))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(ctx, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		})
	}()
	<-started
	if err := e.Run(ctx, func(context.Context) error { return nil }); !errors.Is(err, recipe.ErrInvalidArgument) {
		t.Errorf("second Run = %v, want ErrInvalidArgument", err)
	}
	cancel()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

// Take campaigns and returns the term; the term's Release resigns that
// term and no later one.
func TestTakeTerm(t *testing.T) {
	srv := zktest.Shared(t)
	path := zktest.UniquePath(t)
	ctx := locktest.Ctx(t, 30*time.Second)
	e := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
	other := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)

	first, err := e.Take(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if first.Err() != nil || first.Token() != e.Token() || first.Node() != e.Node() || locktest.Closed(first.Done()) {
		t.Fatalf("term: Err %v, token %d node %s; handle: token %d node %s", first.Err(), first.Token(), first.Node(), e.Token(), e.Node())
	}
	if again, err := e.Take(ctx, false); err != nil || again.Node() != first.Node() {
		t.Fatalf("Take while leading = %v, %v; want the same term", again, err)
	}
	if _, err := other.Take(ctx, false); !errors.Is(err, leader.ErrLeaderElsewhere) || !errors.Is(err, recipe.ErrWouldBlock) {
		t.Fatalf("Take(wait=false) elsewhere = %v, want ErrLeaderElsewhere", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e.IsLeader() || !locktest.Closed(first.Done()) || !errors.Is(first.Err(), leader.ErrNotLeader) {
		t.Fatalf("after the term's Release: IsLeader %v, term Err %v", e.IsLeader(), first.Err())
	}
	second, err := e.Take(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("second Release of the first term = %v, want ErrNotLeader", err)
	}
	if !e.IsLeader() || second.Err() != nil {
		t.Fatal("releasing an old term resigned the next one")
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second.Err(), leader.ErrNotLeader) {
		t.Fatalf("term Err after Resign = %v, want ErrNotLeader", second.Err())
	}
}
