// Package demo holds what the programs under examples/ share, so that each
// program shows one recipe and nothing else: the flags every program takes,
// the logger, the connection, starting copies of the running program as
// child processes and talking to them, and a few formatting and counting
// helpers for their reports.
//
// A program built on it runs in one of two modes. Run by a user, it is the
// parent: it starts children with [Spawn], which runs the same executable
// with the same arguments and tells the child who it is through the
// environment. A child finds out with [Self] and talks back to the parent
// with [ToParent]: it writes lines ("ready", "result {...}") to a pipe on
// file descriptor 3 and reads lines ("go") from its standard input. Its
// standard output and error are the parent's.
//
// The package is for the examples only: it is internal, and its API changes
// with them.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Config holds the flags every example takes. [Flags] registers them.
type Config struct {
	ZK             string        // -zk: comma-separated host:port list
	Path           string        // -path: ZooKeeper path of the recipe
	SessionTimeout time.Duration // -session-timeout: of each process's session
}

// Flags registers -zk, -path (the ZooKeeper path of the program's recipe,
// named what, default path) and -session-timeout on the command line and
// returns the config they fill in.
func Flags(what, path string) *Config {
	c := &Config{}
	flag.StringVar(&c.ZK, "zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated host:port list")
	flag.StringVar(&c.Path, "path", path, "ZooKeeper path of the "+what)
	flag.DurationVar(&c.SessionTimeout, "session-timeout", 3*time.Second, "ZooKeeper session timeout of each process")
	return c
}

// Servers returns the host:port list of -zk, blanks trimmed, empty entries
// dropped.
func (c *Config) Servers() []string { return Servers(c.ZK) }

// Servers splits a comma-separated host:port list, trimming blanks and
// dropping empty entries.
func Servers(list string) []string {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// check validates the common flags.
func (c *Config) check() error {
	switch {
	case len(c.Servers()) == 0:
		return errors.New("-zk: no servers")
	case c.SessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: must be positive", c.SessionTimeout)
	}
	return recipe.ValidatePath(c.Path)
}

// Parse parses the command line. If there are arguments left, a common
// flag is bad, or check (which validates the program's own flags; may be
// nil) fails, it prints the error and the usage and exits with status 2.
func Parse(c *Config, check func() error) {
	name := filepath.Base(os.Args[0])
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags]\n", name)
		flag.PrintDefaults()
	}
	flag.Parse()
	err := c.check()
	switch {
	case flag.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", flag.Args())
	case err == nil && check != nil:
		err = check()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		flag.Usage()
		os.Exit(2)
	}
}

// Logger returns the examples' logger: text on standard error, warnings
// and errors only, without time stamps.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// Connect opens a session to the -zk servers with the -session-timeout,
// giving up after 15 seconds; opts come after those two.
func Connect(ctx context.Context, c *Config, opts ...recipe.Option) (*recipe.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	opts = append([]recipe.Option{recipe.WithSessionTimeout(c.SessionTimeout)}, opts...)
	client, err := recipe.Connect(ctx, c.Servers(), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.ZK, err)
	}
	return client, nil
}

// ErrStopped is returned by work that stopped because its hold was lost.
var ErrStopped = errors.New("stopped: the hold was lost")

// Closed reports whether ch is closed, without waiting.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Ms formats d in milliseconds with one decimal: "12.3ms".
func Ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// Waits sums up waiting times. The zero value is ready to use; its fields
// are exported so that a child can send it to the parent as JSON.
type Waits struct {
	N   int           // waits added
	Sum time.Duration // their total
	Max time.Duration // the longest
}

// Add counts one wait of d.
func (w *Waits) Add(d time.Duration) {
	w.N++
	w.Sum += d
	w.Max = max(w.Max, d)
}

// Mean returns the mean wait, 0 if there was none.
func (w Waits) Mean() time.Duration {
	if w.N == 0 {
		return 0
	}
	return w.Sum / time.Duration(w.N)
}

// String formats the waits as "wait mean 12.3ms  max 45.6ms".
func (w Waits) String() string {
	return "wait mean " + Ms(w.Mean()) + "  max " + Ms(w.Max)
}

// Plural returns word, with an "s" unless n is 1.
func Plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
