package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
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
	exitNoInput    = 66 // EX_NOINPUT: ls: there is no lock directory at PATH
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
	queueLimit     time.Duration               // the limit of leader, ls and rm; 0: queueTimeout
}

// limit returns how long leader, ls and rm may take once connected.
func (p *proc) limit() time.Duration {
	if p.queueLimit > 0 {
		return p.queueLimit
	}
	return queueTimeout
}

// connFlags are the connection flags every command takes.
type connFlags struct {
	servers         string
	sessionTimeout  time.Duration
	sessionFlag     durationValue
	acl             string
	tls             bool
	tlsCA, tlsCert  string
	tlsKey, tlsName string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.servers, "zk", "", "")
	c.sessionTimeout = defaultSessionTimeout
	c.sessionFlag.d = &c.sessionTimeout
	fs.Var(&c.sessionFlag, "session-timeout", "")
	fs.StringVar(&c.acl, "acl", "", "")
	fs.BoolVar(&c.tls, "tls", false, "")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "")
	fs.StringVar(&c.tlsKey, "tls-key", "", "")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "")
}

// connConfig is what connecting needs, checked before any I/O.
type connConfig struct {
	servers        []string
	sessionTimeout time.Duration
	user, password string
	auth           bool
	acl            string      // aclRead, aclPrivate or aclOpen
	tls            *tls.Config // nil: plain TCP
}

// The ACL modes of --acl: what zklock gives the lock directories (and
// their missing parents) and lock nodes it creates.
const (
	aclRead    = "read"    // the credentials' user may do everything, everyone may read
	aclPrivate = "private" // the credentials' user may do everything, nobody else anything
	aclOpen    = "open"    // everyone may do everything (ZooKeeper's default), no directory check
)

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
	var err error
	if cfg.acl, err = c.resolveACL(env, cfg.auth); err != nil {
		return cfg, err
	}
	if cfg.tls, err = c.resolveTLS(env); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// resolveACL returns the ACL mode of --acl or ZKLOCK_ACL: by default
// "read" with credentials, "open" without; a mode that needs credentials
// without them is a usage error.
func (c *connFlags) resolveACL(env func(string) (string, bool), auth bool) (string, error) {
	mode, from := c.acl, "--acl"
	if mode == "" {
		mode, _ = env("ZKLOCK_ACL")
		from = "ZKLOCK_ACL"
	}
	switch {
	case mode == "" && auth:
		return aclRead, nil
	case mode == "":
		return aclOpen, nil
	case mode != aclRead && mode != aclPrivate && mode != aclOpen:
		return "", usageErr("%s %s: want read, private or open", from, recipe.Quote(mode))
	case mode != aclOpen && !auth:
		return "", usageErr("%s %s needs credentials: set ZKLOCK_AUTH=user:password", from, mode)
	}
	return mode, nil
}

// setting returns the value of a flag, or else of the environment
// variable.
func setting(flagValue string, env func(string) (string, bool), name string) string {
	if flagValue != "" {
		return flagValue
	}
	v, _ := env(name)
	return v
}

// resolveTLS returns the TLS configuration the flags and environment ask
// for, nil for plain TCP. Any TLS setting turns TLS on; --tls alone trusts
// the system's certificate authorities.
func (c *connFlags) resolveTLS(env func(string) (string, bool)) (*tls.Config, error) {
	ca := setting(c.tlsCA, env, "ZKLOCK_TLS_CA")
	cert := setting(c.tlsCert, env, "ZKLOCK_TLS_CERT")
	key := setting(c.tlsKey, env, "ZKLOCK_TLS_KEY")
	name := setting(c.tlsName, env, "ZKLOCK_TLS_SERVER_NAME")
	if !c.tls && ca == "" && cert == "" && key == "" && name == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usageErr("TLS CA: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageErr("TLS CA %s: no PEM certificate in it", ca)
		}
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, usageErr("TLS certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "" || key != "":
		return nil, usageErr("a TLS client certificate needs both --tls-cert and --tls-key (or ZKLOCK_TLS_CERT and ZKLOCK_TLS_KEY)")
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

// maxDuration is the longest duration a flag takes: the longest
// time.Duration, about 292 years.
const maxDuration = time.Duration(math.MaxInt64)

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		switch {
		case errors.Is(ferr, strconv.ErrRange),
			ferr == nil && (math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= maxDuration.Seconds()),
			ferr != nil && tooLong(s, err):
			return fmt.Errorf("out of range: want at most %v (about 292 years)", maxDuration.Truncate(time.Second))
		case ferr != nil:
			return fmt.Errorf("want a duration such as 500ms, 30s, 5m, or seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	*v.d, v.set = d, true
	return nil
}

// tooLong reports whether err, time.ParseDuration's error for s, says
// that s is well formed but beyond the longest duration ("invalid
// duration" is also its error for "-", "." or "--5s").
func tooLong(s string, err error) bool {
	if !strings.HasPrefix(err.Error(), "time: invalid duration") {
		return false
	}
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] >= '0' && s[0] <= '9' &&
		!strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789.nsuµmh", r) })
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
