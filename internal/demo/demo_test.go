//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or, in a child started by Spawn, plays the
// child the test asked for.
func TestMain(m *testing.M) {
	if role, n, ok := Self(); ok {
		os.Exit(playChild(role, n))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// playChild is a child of the tests below.
func playChild(role string, n int) int {
	p := ToParent()
	defer p.Close()
	switch role {
	case "quits": // ends before the start
		return 3
	case "greets": // waits for go, says hello, reports n
		if err := p.Ready(); err != nil {
			return 1
		}
		p.Send("hello", n)
		p.Send("result", map[string]int{"n": n})
		return 0
	case "talks": // ready; on "ping" says "pong"
		if p.Send("ready", nil) != nil || p.Expect("ping") != nil {
			return 1
		}
		p.Send("pong", nil)
		_, err := p.Recv() // waits for the end of its input
		if err == nil {
			return 1
		}
		return 0
	}
	return 2
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRun(t *testing.T) {
	ctx := testCtx(t)
	children, err := SpawnN(ctx, "greets", 3)
	if err != nil {
		t.Fatal(err)
	}
	started := false
	var hellos []string
	err = Run(ctx, children, func() { started = true }, func(c *Child, verb, arg string) {
		if !started {
			t.Errorf("line %q from %s before the start", verb, c.Name())
		}
		hellos = append(hellos, verb+" "+arg)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(hellos)
	if want := []string{"hello 1", "hello 2", "hello 3"}; !slices.Equal(hellos, want) {
		t.Errorf("lines %q, want %q", hellos, want)
	}
	for _, c := range children {
		var r map[string]int
		if code := c.Wait(); code != 0 {
			t.Errorf("%s: exit status %d", c.Name(), code)
		}
		if !c.Report(&r) || r["n"] != c.N {
			t.Errorf("%s: report %s", c.Name(), c.Result)
		}
	}
}

func TestRunEarlyExit(t *testing.T) {
	ctx := testCtx(t)
	greeters, err := SpawnN(ctx, "greets", 2)
	if err != nil {
		t.Fatal(err)
	}
	quitter, err := Spawn(ctx, "quits", 3)
	if err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, append(greeters, quitter), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "quits 3 ended before the start (exit status 3)") {
		t.Fatalf("Run: %v, want an error naming quits 3", err)
	}
	for _, c := range greeters {
		if code := c.Wait(); code == 0 {
			t.Errorf("%s: exit status 0, want it stopped before the start", c.Name())
		}
	}
}

func TestConverse(t *testing.T) {
	ctx := testCtx(t)
	c, err := Spawn(ctx, "talks", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Converse(ctx, []*Child{c}, Await(c, "ready"), Tell(c, "ping"), Await(c, "pong")); err != nil {
		t.Fatal(err)
	}
	c, err = Spawn(ctx, "talks", 2)
	if err != nil {
		t.Fatal(err)
	}
	err = Converse(ctx, []*Child{c}, Await(c, "ready"), Tell(c, "ping"), Await(c, "something else"))
	if err == nil || !strings.Contains(err.Error(), `talks 2 said "pong", want "something else"`) {
		t.Fatalf("Converse: %v, want the mismatch", err)
	}
}

func TestCounterFences(t *testing.T) {
	c := Counter{Path: filepath.Join(t.TempDir(), "counter")}
	if err := c.Init(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(1, 10); err != nil {
		t.Fatal(err)
	}
	prev, err := c.Write(2, 12)
	if err != nil || prev != (CounterState{1, 10}) {
		t.Fatalf("Write(2, 12) = %v, %v; want the state it replaced, {1 10}", prev, err)
	}
	_, err = c.Write(3, 11) // an earlier holder, late
	if fe, ok := errors.AsType[*FencedError](err); !ok || fe.File != (CounterState{2, 12}) {
		t.Fatalf("Write(3, 11) = %v, want a FencedError with {2 12}", err)
	}
	if st, err := c.Read(); err != nil || st != (CounterState{2, 12}) {
		t.Fatalf("Read = %v, %v; want {2 12}: a fenced write leaves the file", st, err)
	}
}

func TestPresence(t *testing.T) {
	p := Presence{Path: filepath.Join(t.TempDir(), "inside")}
	if err := p.Init(); err != nil {
		t.Fatal(err)
	}
	p.Enter(false)
	if r, w, err := p.Enter(true); err != nil || r != 1 || w != 1 {
		t.Fatalf("Enter(writer) = %d, %d, %v; want 1 reader and 1 writer", r, w, err)
	}
	if r, w, err := p.Exit(false); err != nil || r != 1 || w != 1 {
		t.Fatalf("Exit(reader) = %d, %d, %v; want the counts before leaving, 1 and 1", r, w, err)
	}
}

func TestDocumentTornRead(t *testing.T) {
	d := Document{Path: filepath.Join(t.TempDir(), "doc")}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := d.Rewrite(0, 7, stop); !errors.Is(err, ErrStopped) {
		t.Fatalf("Rewrite with stop closed: %v, want ErrStopped", err)
	}
	if v, err := d.Rewrite(0, 7, nil); err != nil || v != 1 {
		t.Fatalf("Rewrite = %d, %v; want version 1", v, err)
	}
	// Half of version 2 written: a torn document.
	b, _ := os.ReadFile(d.Path)
	lines := strings.SplitAfter(string(b), "\n")
	lines[0] = strings.Replace(lines[0], "v1", "v2", 1)
	os.WriteFile(d.Path, []byte(strings.Join(lines, "")), 0o644)
	if v, torn, err := d.Read(0); err != nil || v != 1 || !torn {
		t.Fatalf("Read = %d, %v, %v; want version 1, torn", v, torn, err)
	}
}

func TestMaxOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		ivs  []Interval
		want int
		at   int64
	}{
		{"none", nil, 0, 0},
		{"one", []Interval{{1, 5}}, 1, 1},
		{"touching do not overlap", []Interval{{1, 5}, {5, 9}}, 1, 1},
		{"nested", []Interval{{1, 10}, {2, 3}, {4, 8}, {5, 6}}, 3, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, at := MaxOverlap(tc.ivs)
			if got != tc.want || at.UnixNano() != tc.at {
				t.Errorf("MaxOverlap = %d at %d, want %d at %d", got, at.UnixNano(), tc.want, tc.at)
			}
		})
	}
}

func TestWaitsAndServers(t *testing.T) {
	var w Waits
	if w.Mean() != 0 {
		t.Errorf("mean of no waits = %v", w.Mean())
	}
	w.Add(10 * time.Millisecond)
	w.Add(30 * time.Millisecond)
	if got, want := w.String(), "wait mean 20.0ms  max 30.0ms"; got != want {
		t.Errorf("Waits = %q, want %q", got, want)
	}
	if got := Servers(" a:1, ,b:2,"); !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("Servers = %q", got)
	}
}
