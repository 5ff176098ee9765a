package faults

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// ring is a slog.Handler that keeps the last lines a client logged, for
// the notes on a worker that was not granted again (Config.Trace).
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	attrs []slog.Attr
}

// ringSize is how many lines a ring keeps.
const ringSize = 300

func newRing() *ring { return &ring{lines: make([]string, 0, ringSize)} }

func (r *ring) Enabled(context.Context, slog.Level) bool { return true }

func (r *ring) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", rec.Time.Format("15:04:05.000"), rec.Level, rec.Message)
	for _, a := range r.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < ringSize {
		r.lines = append(r.lines, b.String())
	} else {
		r.lines[r.next] = b.String()
		r.next = (r.next + 1) % ringSize
	}
	return nil
}

func (r *ring) WithAttrs(as []slog.Attr) slog.Handler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &ring{lines: r.lines, attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}

func (r *ring) WithGroup(string) slog.Handler { return r }

// since returns the lines logged at or after t, oldest first.
func (r *ring) since(t time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...)
	from := t.Format("15:04:05.000")
	var out []string
	for _, l := range all {
		if l[:12] >= from {
			out = append(out, l)
		}
	}
	return out
}
