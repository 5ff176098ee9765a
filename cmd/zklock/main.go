// Command zklock runs shell commands under ZooKeeper locks and leader
// elections, and shows and clears lock queues: flock(1) for a ZooKeeper
// cluster, for cron jobs, deploy scripts and operators.
//
//	zklock run [flags] PATH [--] CMD [ARG...]
//	zklock elect [flags] PATH [--] CMD [ARG...]
//	zklock leader [--watch] PATH
//	zklock ls [--json] PATH
//	zklock rm [--force] PATH NODE
//
// It is a thin program over the packages mutex, rwlock, semaphore and
// leader: the locks it takes are the ones Go programs take with those
// packages on the same path, and Curator's. Install it with
//
//	go install github.com/zkrecipes/zkrecipes/cmd/zklock@latest
//
// The manual is docs/cli.md; "zklock --help" and "zklock COMMAND --help"
// print the same text.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

const mainHelp = `usage: zklock COMMAND [flags] ARGS...

Run commands under ZooKeeper locks and leader elections; show and clear
lock queues.

commands:
  run [flags] PATH [--] CMD [ARG...]    run CMD while holding the lock at PATH
  elect [flags] PATH [--] CMD [ARG...]  run CMD once elected leader at PATH
  leader [--watch] PATH                 print the id of the leader at PATH
  ls [--json] PATH                      list the queue of the lock at PATH
  rm [--force] PATH NODE                delete one node of the queue at PATH

flags of every command (before PATH; "--" ends the flags):
  --zk HOST:PORT[,HOST:PORT...]   servers (default: $ZKLOCK_SERVERS,
                                  else 127.0.0.1:2181)
  --session-timeout DURATION      ZooKeeper session timeout, also the bound
                                  on connecting (default 10s)
  --acl MODE                      with ZKLOCK_AUTH, the ACL of the nodes
                                  zklock creates: read (the default: the
                                  user may do all, others only read),
                                  private (the user only), or open (anyone
                                  may do all; no check of the directory)
  --tls                           connect over TLS (implied by --tls-*)
  --tls-ca FILE                   trust the CA certificates (PEM) in FILE
                                  (default: the system's)
  --tls-cert FILE, --tls-key FILE the client certificate and key (PEM)
  --tls-server-name NAME          the name the servers' certificate must
                                  carry (default: each server's host)
  -h, --help                      print the command's help

environment:
  ZKLOCK_SERVERS   servers, when --zk is not given (set but empty: an error)
  ZKLOCK_AUTH      user:password for digest authentication (not passed on
                   to CMD)
  ZKLOCK_ACL, ZKLOCK_TLS_CA, ZKLOCK_TLS_CERT, ZKLOCK_TLS_KEY,
  ZKLOCK_TLS_SERVER_NAME   the flag of the same name, when it is not given

exit status:
  0    success (run, elect: CMD's status)
  1    not acquired in time (or the value of -E)
  3    leader: nobody leads
  64   usage error
  65   PATH holds another kind of lock
  66   ls: there is no lock directory at PATH
  69   ZooKeeper unreachable, or a request failed
  75   the lock was lost while CMD ran
  77   ZooKeeper refused for lack of rights
  126  CMD could not be executed
  127  CMD not found
  128+N  CMD was killed by signal N, or zklock was interrupted by it while
         waiting

zklock --version prints the version. The manual: docs/cli.md.
`

// mainUsage is what a usage error without a command prints.
const mainUsage = "usage: zklock COMMAND [flags] ARGS...\nRun \"zklock --help\" for the commands.\n"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// Main runs zklock with args (without the program name), reading the
// environment with env (os.LookupEnv), and returns the exit status.
func Main(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "zklock: missing COMMAND")
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, mainHelp)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "zklock", version())
		return exitOK
	case watchdogCommand:
		return runWatchdog(args[1:], os.Stdin, stderr)
	}
	newCmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zklock: unknown command %q\n", args[0])
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	cmd := newCmd()
	rest, help, err := cmd.parse(args[1:])
	if err == nil && help {
		fmt.Fprint(stdout, cmd.help)
		return exitOK
	}
	if err == nil {
		err = cmd.run(&proc{stdout: stdout, stderr: stderr, getenv: env}, rest)
	}
	return report(cmd, err, stderr)
}

// commands makes each command by its name.
var commands = map[string]func() *command{
	"run":    newRunCommand,
	"elect":  newElectCommand,
	"leader": newLeaderCommand,
	"ls":     newLsCommand,
	"rm":     newRmCommand,
}

// report reports err, the outcome of cmd, on stderr and returns the
// exit status it means.
func report(cmd *command, err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(stderr, "zklock %s: %s\n", cmd.name, ee.msg)
		}
		if ee.usage {
			fmt.Fprintln(stderr, strings.SplitN(cmd.help, "\n", 2)[0])
			fmt.Fprintf(stderr, "Run \"zklock %s --help\" for the flags.\n", cmd.name)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "zklock %s: %v\n", cmd.name, err)
		return exitFailure
	}
}

// version says what zklock was built from: the module version when it
// was built as a module ("go install ...@v1.2.3"), else the commit of the
// checkout it was built in (with "+dirty" for uncommitted changes), else
// "(devel)"; then the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return describeBuild(bi)
}

// describeBuild is version's text for the build information bi.
func describeBuild(bi *debug.BuildInfo) string {
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if rev != "" && (v == "(devel)" || strings.Contains(v, rev[:min(12, len(rev))])) {
		// Built in a checkout: the module version is a pseudo-version
		// or (devel); the commit says more.
		v += " commit " + rev
		if at != "" {
			v += " (" + at + ")"
		}
		if dirty {
			v += " +dirty"
		}
	}
	return v + " " + bi.GoVersion
}
