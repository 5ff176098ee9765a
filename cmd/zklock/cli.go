package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Exit statuses of zklock itself (CMD's own status is passed through).
const (
	exitOK         = 0
	exitConflict   = 1  // not acquired in time (or the value of -E)
	exitNoLeader   = 3  // leader: nobody leads
	exitUsage      = 64 // EX_USAGE: bad command line or environment
	exitMismatch   = 65 // EX_DATAERR: PATH holds another kind of lock
	exitFailure    = 69 // EX_UNAVAILABLE: ZooKeeper unreachable or failing
	exitPermission = 77 // EX_NOPERM: ZooKeeper refused for lack of rights
	exitLost       = 75 // EX_TEMPFAIL: the lock was lost while CMD ran
	exitNoExec     = 126
	exitNotFound   = 127
)

// Defaults of the connection flags: the servers when neither --zk nor
// ZKLOCK_SERVERS is set, and --session-timeout.
const (
	defaultServers        = "127.0.0.1:2181"
	defaultSessionTimeout = 10 * time.Second
)

// exitError ends the program with code after printing msg (and, for a
// usage error, the command's usage) on stderr.
type exitError struct {
	code  int
	msg   string
	usage bool
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...), usage: true}
}

func failf(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// command is one subcommand: its flag set, help text and body.
type command struct {
	name string
	help string
	fs   *flag.FlagSet
	conn connFlags
	run  func(p *proc, args []string) error
}

// newCommand returns a command with the connection flags registered; the
// caller registers its own flags on cmd.fs and sets cmd.run.
func newCommand(name, help string) *command {
	cmd := &command{name: name, help: help, fs: newFlagSet(name)}
	cmd.conn.register(cmd.fs)
	return cmd
}

// proc is what a command's body sees of the process: its output streams
// and environment.
type proc struct {
	stdout, stderr io.Writer
	getenv         func(string) (string, bool) // os.LookupEnv
}

// connFlags are the connection flags every command takes.
type connFlags struct {
	servers        string
	sessionTimeout time.Duration
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "zk", "", "")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", defaultSessionTimeout, "")
}

// connConfig is what connecting needs, checked before any I/O.
type connConfig struct {
	servers        []string
	sessionTimeout time.Duration
	user, password string
	auth           bool
}

// resolve checks the connection flags and the environment.
func (c *connFlags) resolve(env func(string) (string, bool)) (connConfig, error) {
	var cfg connConfig
	s := c.servers
	if s == "" {
		var set bool
		s, set = env("ZKLOCK_SERVERS")
		switch {
		case !set:
			s = defaultServers
		case strings.TrimSpace(s) == "":
			// Set, but to nothing: a variable the operator meant to fill
			// in, not a wish for a local server.
			return cfg, usageErr("ZKLOCK_SERVERS is set but empty: name the servers (host:port,...), or unset it for %s", defaultServers)
		}
	}
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return cfg, usageErr("empty server address in %q", s)
		}
		if !strings.Contains(a, ":") {
			return cfg, usageErr("server address %q: want host:port", a)
		}
		cfg.servers = append(cfg.servers, a)
	}
	if c.sessionTimeout <= 0 {
		return cfg, usageErr("--session-timeout %v: must be positive", c.sessionTimeout)
	}
	cfg.sessionTimeout = c.sessionTimeout
	if a, _ := env("ZKLOCK_AUTH"); a != "" {
		user, password, found := strings.Cut(a, ":")
		switch {
		case !found || user == "":
			return cfg, usageErr("ZKLOCK_AUTH: want user:password")
		case password == "":
			return cfg, usageErr("ZKLOCK_AUTH: empty password for user %q: want user:password", user)
		}
		cfg.user, cfg.password, cfg.auth = user, password, true
	}
	return cfg, nil
}

// durationValue is a flag.Value for a duration given as "500ms", "2m" or
// a plain number of seconds ("5", "0.5", as flock takes it).
type durationValue struct {
	d   *time.Duration
	set bool
}

func (v *durationValue) String() string {
	if v == nil || v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("want a duration such as 500ms, 30s, 5m, or seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	*v.d, v.set = d, true
	return nil
}

// newFlagSet returns a flag set that reports errors to the caller only.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with the command's flags and turns flag errors into
// usage errors. It reports help=true for -h/--help.
func (cmd *command) parse(args []string) (rest []string, help bool, err error) {
	if err := cmd.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, true, nil
		}
		return nil, false, usageErr("%s", flagMessage(err))
	}
	return cmd.fs.Args(), false, nil
}

// flagMessage rewrites the flag package's messages to name long flags
// with two dashes, as the help text does.
func flagMessage(err error) string {
	msg := err.Error()
	const undef = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(msg, undef); ok {
		if len(name) > 2 {
			name = "-" + name
		}
		return "unknown flag " + name
	}
	return msg
}

// splitCmd splits "PATH [--] CMD [ARG...]" after the flags.
func splitCmd(args []string) (path string, argv []string, err error) {
	if len(args) == 0 {
		return "", nil, usageErr("missing PATH")
	}
	path, argv = args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return "", nil, usageErr("missing CMD to run")
	}
	if err := checkPath(path); err != nil {
		return "", nil, err
	}
	return path, argv, nil
}

// checkPath refuses a PATH that cannot name a lock directory, before any
// I/O.
func checkPath(p string) error {
	if err := recipe.ValidatePath(p); err != nil {
		return usageErr("PATH %s", strings.TrimPrefix(err.Error(), recipe.ErrInvalidPath.Error()+" "))
	}
	return nil
}

// exactArgs checks the number of positional arguments.
func exactArgs(args []string, names ...string) error {
	if len(args) < len(names) {
		return usageErr("missing %s", names[len(args)])
	}
	if len(args) > len(names) {
		return usageErr("unexpected argument %q", args[len(names)])
	}
	return nil
}

// isSet reports whether one of the named flags was given.
func isSet(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			set = set || f.Name == n
		}
	})
	return set
}
