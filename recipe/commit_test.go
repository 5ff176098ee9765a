package recipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// commitSetup holds a lock on a fresh path and gives a raw connection and
// a parent node for the transactions' writes.
func commitSetup(t *testing.T, c *recipe.Client) (ctx context.Context, h *recipe.Hold, raw *zk.Conn, base string) {
	t.Helper()
	srv := zktest.Shared(t)
	ctx = locktest.Ctx(t, 30*time.Second)
	path := zktest.UniquePath(t)
	h, err := newLock(t, c, path+"/lock").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw = zktest.Connect(t, srv.Addr())
	base = path + "/state"
	if _, err := raw.Create(base, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return ctx, h, raw, base
}

func TestCommitAppliesWhileHeld(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr())
	ctx, h, raw, base := commitSetup(t, c)
	before := c.Stats()
	res, err := h.Commit(ctx,
		recipe.Create(base+"/a", []byte("1")),
		recipe.SetData(base, []byte("x")),
		recipe.SetDataVersion(base, []byte("y"), 1),
		recipe.CreateSequential(base+"/log-", []byte("e")),
		recipe.Check(base+"/a", 0),
		recipe.Delete(base+"/a"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Stats().Sub(before); d.Commits != 1 || d.RoundTrips() != 1 {
		t.Errorf("one Commit sent %+v, want exactly one transaction", d)
	}
	want := []recipe.Result{
		{Path: base + "/a", Version: -1}, {Path: base, Version: 1}, {Path: base, Version: 2},
		{Path: base + "/log-0000000001", Version: -1}, {Path: base + "/a", Version: -1}, {Path: base + "/a", Version: -1},
	}
	if len(res) != len(want) {
		t.Fatalf("results %+v, want %+v", res, want)
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, res[i], want[i])
		}
	}
	data, st, err := raw.Get(base)
	if err != nil || string(data) != "y" || st.Version != 2 {
		t.Errorf("state node: %q version %v, %v; want \"y\" at version 2", data, st, err)
	}
	// No ops: the server confirms the hold, nothing is written.
	if res, err := h.Commit(ctx); err != nil || len(res) != 0 {
		t.Errorf("empty Commit = %v, %v; want no results and no error", res, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before = c.Stats()
	if _, err := h.Commit(ctx, recipe.SetData(base, []byte("late"))); !errors.Is(err, recipe.ErrNotHeld) {
		t.Errorf("Commit after Release = %v, want ErrNotHeld", err)
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Errorf("Commit after Release sent %d requests, want none", d.RoundTrips())
	}
}

// Each op the server refuses is named, matches our sentinel, and nothing
// of the transaction is applied.
func TestCommitRefusedOp(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr())
	ctx, h, raw, base := commitSetup(t, c)
	if _, err := raw.Create(base+"/full", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(base+"/full/child", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bad  recipe.Op
		want error
	}{
		{recipe.Create(base+"/full", nil), recipe.ErrNodeExists},
		{recipe.SetData(base+"/missing", nil), recipe.ErrNoNode},
		{recipe.Create(base+"/missing/x", nil), recipe.ErrNoNode},
		{recipe.SetDataVersion(base, []byte("v"), 7), recipe.ErrVersionMismatch},
		{recipe.Check(base, 3), recipe.ErrVersionMismatch},
		{recipe.Delete(base + "/full"), recipe.ErrNotEmpty},
	} {
		t.Run(tc.bad.String(), func(t *testing.T) {
			_, err := h.Commit(ctx, recipe.SetData(base, []byte("first")), tc.bad, recipe.Create(base+"/after", nil))
			var oe *recipe.OpError
			if !errors.As(err, &oe) || oe.Index != 1 || oe.Op.String() != tc.bad.String() || !errors.Is(err, tc.want) {
				t.Fatalf("Commit = %v; want an OpError for op 1 (%v) wrapping %v", err, tc.bad, tc.want)
			}
			if !strings.Contains(err.Error(), tc.bad.String()) {
				t.Errorf("error %q does not name the op", err)
			}
			if data, _, _ := raw.Get(base); len(data) != 0 {
				t.Errorf("op 0 was applied: state %q", data)
			}
			if ok, _, _ := raw.Exists(base + "/after"); ok {
				t.Error("op 2 was applied")
			}
		})
	}
	if err := h.Err(); err != nil {
		t.Errorf("refused ops ended the hold: %v", err)
	}
}

// A hold whose node another client deleted commits nothing: the server
// refuses the transaction, and the hold learns of its loss.
func TestCommitNodeGone(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr())
	ctx, h, raw, base := commitSetup(t, c)
	if err := raw.Delete(strings.TrimSuffix(base, "/state")+"/lock/"+h.Node(), -1); err != nil {
		t.Fatal(err)
	}
	_, err := h.Commit(ctx, recipe.SetData(base, []byte("stale")))
	if !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrNodeDeleted) {
		t.Fatalf("Commit = %v, want ErrLost and ErrNodeDeleted", err)
	}
	if data, _, _ := raw.Get(base); len(data) != 0 {
		t.Errorf("a write of a lost hold landed: %q", data)
	}
	if !locktest.Closed(h.Done()) {
		t.Error("the hold does not know it was lost")
	}
}

// After the session expired, nothing commits. Once the client has been
// told, Commit refuses before sending anything. Sent before the client
// heard, the transaction meets a connection the server has closed (its
// outcome is then unknown to the client, which is told so) or is refused
// by the server: either way it does not land, and the hold learns of its
// loss.
func TestCommitSessionExpired(t *testing.T) {
	t.Run("told", func(t *testing.T) {
		p := zktest.Shared(t).Proxy(t)
		c := p.Client(t, recipe.WithSessionTimeout(10*time.Second))
		ctx, h, raw, base := commitSetup(t, c)
		if _, err := p.ExpireSessions(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the hold was not told of the expiry within 10s")
		}
		before := c.Stats().RoundTrips()
		_, err := h.Commit(ctx, recipe.SetData(base, []byte("stale")))
		if !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrSessionExpired) {
			t.Fatalf("Commit = %v, want ErrLost and ErrSessionExpired", err)
		}
		if n := c.Stats().RoundTrips() - before; n != 0 {
			t.Errorf("Commit sent %d requests after the client knew", n)
		}
		if data, _, _ := raw.Get(base); len(data) != 0 {
			t.Errorf("a write of an expired session landed: %q", data)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		p := zktest.Shared(t).Proxy(t)
		c := p.Client(t, recipe.WithSessionTimeout(10*time.Second))
		ctx, h, raw, base := commitSetup(t, c)
		if _, err := p.ExpireSessions(); err != nil {
			t.Fatal(err)
		}
		_, err := h.Commit(ctx, recipe.SetData(base, []byte("stale")))
		if !errors.Is(err, recipe.ErrLost) && !errors.Is(err, recipe.ErrCommitUnknown) {
			t.Fatalf("Commit = %v, want ErrLost or ErrCommitUnknown", err)
		}
		if data, _, _ := raw.Get(base); len(data) != 0 {
			t.Errorf("a write of an expired session landed: %q", data)
		}
		select {
		case <-h.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the hold was not told of the expiry within 10s")
		}
		if err := h.Err(); !errors.Is(err, recipe.ErrLost) {
			t.Errorf("Err = %v after the expiry, want ErrLost", err)
		}
	})
}

// A transaction whose reply is lost is not sent again: the caller learns
// that the outcome is unknown, and the server applied it once.
func TestCommitReplyLost(t *testing.T) {
	p := zktest.Shared(t).Proxy(t)
	c := p.Client(t, recipe.WithSessionTimeout(10*time.Second))
	ctx, h, raw, base := commitSetup(t, c)
	p.LoseNextReply(zktest.OpMulti)
	before := c.Stats()
	_, err := h.Commit(ctx, recipe.CreateSequential(base+"/log-", nil))
	if !errors.Is(err, recipe.ErrCommitUnknown) {
		t.Fatalf("Commit = %v, want ErrCommitUnknown", err)
	}
	if d := c.Stats().Sub(before); d.Commits != 1 {
		t.Errorf("%d transactions sent, want 1 (no retry)", d.Commits)
	}
	names, _, err := raw.Children(base)
	if err != nil || len(names) != 1 {
		t.Errorf("log %v, %v: want the one entry the server applied", names, err)
	}
	// The hold survives a lost reply: the session is the same.
	if _, err := h.Commit(ctx, recipe.SetData(base, []byte("again"))); err != nil {
		t.Errorf("Commit after the reconnect = %v", err)
	}
}

// While the session is suspended the hold commits nothing, and says so
// without sending; once resumed it commits again.
func TestCommitSuspended(t *testing.T) {
	p := zktest.Shared(t).Proxy(t)
	c := p.Client(t, recipe.WithSessionTimeout(8*time.Second), recipe.WithLossTimeout(time.Second), recipe.WithSuspensionTolerance())
	ctx, h, _, base := commitSetup(t, c)
	p.Partition()
	select {
	case <-h.Suspended():
	case <-ctx.Done():
		t.Fatal("no suspension")
	}
	before := c.Stats()
	_, err := h.Commit(ctx, recipe.SetData(base, []byte("blind")))
	if !errors.Is(err, recipe.ErrLost) || !errors.Is(err, recipe.ErrConnectionSuspended) {
		t.Errorf("Commit while suspended = %v, want ErrLost and ErrConnectionSuspended", err)
	}
	if d := c.Stats().Sub(before); d.Commits != 0 {
		t.Errorf("%d transactions sent while suspended", d.Commits)
	}
	p.Heal()
	select {
	case <-h.Resumed():
	case <-h.Done():
		t.Fatalf("lost: %v", h.Err())
	case <-ctx.Done():
		t.Fatal("not resumed")
	}
	if _, err := h.Commit(ctx, recipe.SetData(base, []byte("seen"))); err != nil {
		t.Errorf("Commit after resuming = %v", err)
	}
}

func TestCommitBadInput(t *testing.T) {
	c := zktest.Client(t, zktest.Shared(t).Addr(), recipe.WithMaxPacket(64<<10))
	ctx, h, _, base := commitSetup(t, c)
	before := c.Stats()
	for name, tc := range map[string]struct {
		ctx context.Context
		ops []recipe.Op
	}{
		"nil context":    {nil, []recipe.Op{recipe.SetData(base, nil)}},
		"relative path":  {ctx, []recipe.Op{recipe.SetData("state", nil)}},
		"zero op":        {ctx, []recipe.Op{{}}},
		"bad version":    {ctx, []recipe.Op{recipe.Check(base, -2)}},
		"too much data":  {ctx, []recipe.Op{recipe.SetData(base, make([]byte, 40<<10)), recipe.Create(base+"/b", make([]byte, 40<<10))}},
		"trailing slash": {ctx, []recipe.Op{recipe.Create(base+"/", nil)}},
	} {
		if _, err := h.Commit(tc.ctx, tc.ops...); !errors.Is(err, recipe.ErrInvalidArgument) {
			t.Errorf("%s: Commit = %v, want ErrInvalidArgument", name, err)
		}
	}
	// A context that has ended sends nothing: the outcome is known.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.Commit(done, recipe.SetData(base, nil)); !errors.Is(err, context.Canceled) || errors.Is(err, recipe.ErrCommitUnknown) {
		t.Errorf("Commit with an ended context = %v, want context.Canceled and not ErrCommitUnknown", err)
	}
	if d := c.Stats().Sub(before); d.RoundTrips() != 0 {
		t.Errorf("bad input sent %d requests", d.RoundTrips())
	}
}
