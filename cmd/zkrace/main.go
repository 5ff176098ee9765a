// Command zkrace runs a go command of your module against go-zookeeper
// with the fix of its data race on Conn.lastZxid, which the race detector
// can report in tests that drop connections (see docs/testing.md). From
// the directory of your module:
//
//	go run github.com/zkrecipes/zkrecipes/cmd/zkrace go test -race ./...
//
// It changes nothing in your module. It finds the go-zookeeper version
// your module builds with, copies that module from the module cache into
// your user cache directory (zkrecipes/zkrace under [os.UserCacheDir]),
// applies there the patch for that version that zkrecipes ships in its
// patches directory, and writes next to it a go.work that uses your
// module and replaces go-zookeeper by the patched copy. It then runs the
// command with GOWORK naming that go.work, and exits with its status.
// With -print it prints the go.work's path instead, for a shell or a CI
// job to export as GOWORK.
//
// It needs a go-zookeeper version zkrecipes has a patch for (v1.0.4), and
// fails, saying so, for any other: a later release may have the fix.
// Programs built without zkrace get go-zookeeper as released.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	zkModule    = "github.com/go-zookeeper/zk"
	ourModule   = "github.com/zkrecipes/zkrecipes"
	usageHeader = `usage: zkrace [-print] [COMMAND [ARG...]]

Run COMMAND (such as go test -race ./...) in your module against
go-zookeeper with the fix of its data race on Conn.lastZxid, without
changing your module: the patched copy and a go.work live in your user
cache directory, and COMMAND runs with GOWORK naming that go.work.

flags:
`
)

func main() {
	printWork := flag.Bool("print", false, "print the path of the go.work instead of running a command")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usageHeader)
		flag.PrintDefaults()
	}
	flag.Parse()
	if !*printWork && flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	work, err := prepare()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zkrace: %v\n", err)
		os.Exit(1)
	}
	if *printWork {
		fmt.Println(work)
		return
	}
	os.Exit(run(work, flag.Args()))
}

// run runs args with GOWORK=work and returns its exit status.
func run(work string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "zkrace: %v\n", err)
	return 1
}

// module is what go list -m -json says of a module.
type module struct {
	Path, Version, Dir, GoMod string
	Main                      bool
	Replace                   *module
}

// prepare makes (or finds) the patched copy of the go-zookeeper the
// module in the working directory builds with, writes the go.work, and
// returns its path.
func prepare() (string, error) {
	mods, err := goList("-m", "-json", ourModule, zkModule)
	if err != nil {
		return "", fmt.Errorf("%w (run zkrace in a module that requires %s)", err, ourModule)
	}
	var main, ours, zk *module
	for i := range mods {
		switch m := &mods[i]; {
		case m.Main:
			main = m
		case m.Path == ourModule:
			ours = m
		case m.Path == zkModule:
			zk = m
		}
	}
	if main == nil {
		if ours == nil || zk == nil {
			return "", fmt.Errorf("go list found no %s and %s here", ourModule, zkModule)
		}
		if main, err = mainModule(); err != nil {
			return "", err
		}
	}
	if ours == nil {
		ours = main // zkrace run from zkrecipes itself
	}
	if zk == nil {
		return "", fmt.Errorf("this module does not build with %s", zkModule)
	}
	if zk.Replace != nil {
		return "", fmt.Errorf("this module already replaces %s by %s; zkrace does not patch a replacement", zkModule, where(zk.Replace))
	}
	patches, err := patchesFor(dirOf(ours), zk.Version)
	if err != nil {
		return "", err
	}
	src := zk.Dir
	if src == "" {
		if src, err = download(zk.Path + "@" + zk.Version); err != nil {
			return "", err
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, "zkrecipes", "zkrace")
	patched, err := patchedCopy(root, src, zk.Version, patches)
	if err != nil {
		return "", err
	}
	return writeWork(root, filepath.Dir(main.GoMod), zk.Version, patched)
}

// mainModule is the module in the working directory, when go list -m
// of the two modules did not name it (it is one of them).
func mainModule() (*module, error) {
	mods, err := goList("-m", "-json")
	if err != nil || len(mods) == 0 || mods[0].GoMod == "" {
		return nil, fmt.Errorf("no module here: run zkrace in your module's directory (%v)", err)
	}
	return &mods[0], nil
}

// dirOf is the directory of m's files, or of its replacement.
func dirOf(m *module) string {
	if m.Replace != nil {
		return m.Replace.Dir
	}
	return m.Dir
}

func where(m *module) string {
	if m.Version != "" {
		return m.Path + " " + m.Version
	}
	return m.Path
}

// patchesFor reads the patches zkrecipes ships for go-zookeeper version,
// in name order, with their names.
func patchesFor(dir, version string) ([]patchFile, error) {
	if dir == "" {
		return nil, fmt.Errorf("the files of %s are not in the module cache: run go mod download %s", ourModule, ourModule)
	}
	names, err := filepath.Glob(filepath.Join(dir, "patches", "go-zookeeper-zk-"+version+"-*.patch"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s ships no patch for %s %s: that version may have the fix of the race on Conn.lastZxid (go-zookeeper/zk#35); run your command as it is",
			ourModule, zkModule, version)
	}
	var out []patchFile
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, patchFile{name: filepath.Base(n), text: b})
	}
	return out, nil
}

// download fetches module@version into the module cache and returns its
// directory.
func download(mv string) (string, error) {
	out, err := goCmd("mod", "download", "-json", mv)
	if err != nil {
		return "", err
	}
	var m module
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s gave no directory (%v)", mv, err)
	}
	return m.Dir, nil
}

// goList runs go list with args and decodes its stream of JSON objects.
func goList(args ...string) ([]module, error) {
	out, err := goCmd(append([]string{"list"}, args...)...)
	if err != nil {
		return nil, err
	}
	var mods []module
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m module
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// goCmd runs the go command with args, outside any workspace (the module's
// own go.mod decides what it builds with), and returns its output.
func goCmd(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
