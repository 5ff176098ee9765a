package zktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The environment variables the kit reads.
const (
	// EnvAddr names an already running ZooKeeper server ("host:port")
	// that Start and Shared use instead of starting one. Faults then come
	// from the Proxy alone: such a server cannot be stopped, killed or
	// frozen by the kit, and ensembles still need a local installation.
	EnvAddr = "ZKTEST_ADDR"
	// EnvRequired, set to 1 (or true), makes a test fail instead of skip
	// when no ZooKeeper can be had, so that a CI machine without one
	// cannot pass by skipping every test.
	EnvRequired = "ZKTEST_REQUIRED"
	// EnvHome is the directory of an unpacked Apache ZooKeeper release;
	// its lib/ holds the jars.
	EnvHome = "ZOOKEEPER_HOME"
)

// ErrNotInstalled is returned (wrapped, with what to install) when no
// ZooKeeper installation or Java runtime is found. Start and
// StartEnsemble skip the test on it, or fail it when ZKTEST_REQUIRED=1.
var ErrNotInstalled = errors.New("zktest: no ZooKeeper installation found")

// ErrExternal is returned by the calls that need the server's process
// (Stop, Kill, Restart, Freeze, Thaw) on a server named by ZKTEST_ADDR.
var ErrExternal = errors.New("zktest: the server named by " + EnvAddr + " is not a process of this test")

// installHint says what to install; it ends every ErrNotInstalled.
const installHint = "install Debian's zookeeper package (apt-get install zookeeper, which brings a Java runtime), " +
	"or unpack an Apache ZooKeeper release and set " + EnvHome + " to it with java on PATH or JAVA_HOME set, " +
	"or point " + EnvAddr + " at a running server; " +
	"the test is skipped unless " + EnvRequired + "=1"

// Debian's zookeeper package: the jar (whose manifest names most of its
// dependencies) and jars its manifest leaves out: the slf4j binding to
// log4j, so the server logs, and the two netty jars the TLS connection
// factory loads.
const debianJar = "/usr/share/java/zookeeper.jar"

var debianExtras = []string{
	"/usr/share/java/slf4j-log4j12.jar",
	"/usr/share/java/log4j-1.2.jar",
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-resolver.jar",
}

// installation is what runs a server: a java binary and a class path.
type installation struct {
	java      string
	classPath []string
	// from names where the class path came from, for errors.
	from string
}

// system is the outside world locate looks at; tests replace it.
type system struct {
	getenv   func(string) string
	exists   func(string) bool
	glob     func(string) ([]string, error)
	lookPath func(string) (string, error)
}

var host = system{
	getenv: os.Getenv,
	exists: func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	},
	glob:     filepath.Glob,
	lookPath: exec.LookPath,
}

// locate finds ZooKeeper and java: the class path from WithClassPath, else
// from ZOOKEEPER_HOME, else Debian's package; java from JAVA_HOME, else
// PATH. The error wraps ErrNotInstalled and says what to install.
func (sys system) locate(classPath string) (installation, error) {
	var in installation
	switch home := sys.getenv(EnvHome); {
	case classPath != "":
		in.classPath, in.from = filepath.SplitList(classPath), "WithClassPath"
	case home != "":
		jars, _ := sys.glob(filepath.Join(home, "lib", "*.jar"))
		top, _ := sys.glob(filepath.Join(home, "*.jar"))
		jars = append(jars, top...)
		if !containsZooKeeper(jars) {
			return in, fmt.Errorf("%w: %s=%s has no zookeeper-*.jar in lib/; %s", ErrNotInstalled, EnvHome, home, installHint)
		}
		sort.Strings(jars)
		// conf/ first: it holds the release's logging configuration.
		in.classPath = append([]string{filepath.Join(home, "conf")}, jars...)
		in.from = EnvHome + "=" + home
	case sys.exists(debianJar):
		in.classPath, in.from = []string{debianJar}, "Debian's zookeeper package"
		for _, j := range debianExtras {
			if sys.exists(j) {
				in.classPath = append(in.classPath, j)
			}
		}
	default:
		return in, fmt.Errorf("%w (%s is not set and %s is missing): %s", ErrNotInstalled, EnvHome, debianJar, installHint)
	}
	java, err := sys.java()
	if err != nil {
		return in, fmt.Errorf("%w: ZooKeeper from %s, but %v; %s", ErrNotInstalled, in.from, err, installHint)
	}
	in.java = java
	return in, nil
}

// java finds the java binary: $JAVA_HOME/bin/java, else java on PATH.
func (sys system) java() (string, error) {
	if jh := sys.getenv("JAVA_HOME"); jh != "" {
		p := filepath.Join(jh, "bin", "java")
		if sys.exists(p) {
			return p, nil
		}
		return "", fmt.Errorf("JAVA_HOME=%s has no bin/java", jh)
	}
	p, err := sys.lookPath("java")
	if err != nil {
		return "", errors.New("no java on PATH and JAVA_HOME is not set")
	}
	return p, nil
}

func containsZooKeeper(jars []string) bool {
	for _, j := range jars {
		b := filepath.Base(j)
		if strings.HasPrefix(b, "zookeeper-") && !strings.HasPrefix(b, "zookeeper-jute") && strings.HasSuffix(b, ".jar") {
			return true
		}
	}
	return false
}

// required reports whether ZKTEST_REQUIRED asks to fail rather than skip.
func required() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvRequired))) {
	case "", "0", "false", "no":
		return false
	}
	return true
}
