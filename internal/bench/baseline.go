package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The baseline is this module at another git revision (-baseline REV), run
// as a peer: the runner copies the revision's tree out of git (git archive)
// into a directory under .cache/, adds the Go peer program of
// peers/gopeer to it, and builds that program there, against the same
// patched go-zookeeper its own build uses (the replaces of its go.work).
// The peer runs the cycles of the runner's mutex, semaphore and rwlock
// scenarios, so each round measures the recipes at REV next to the
// current ones, in the same groups as zk.Lock, Curator and kazoo.

// peerBaseline names the baseline peer; its scenarios' titles start with it.
const peerBaseline = "baseline"

// modulePath is this module's path.
const modulePath = "github.com/zkrecipes/zkrecipes"

// goPeerDir is the directory, under the peers' directory, of the Go peer.
const goPeerDir = "gopeer"

// baselinePeer is the baseline's built program.
type baselinePeer struct {
	commit string // the revision, resolved
	dir    string // the copy and the program, under .cache/; removed by close
	binary string
}

func (b *baselinePeer) close() {
	if b != nil && b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// baselineIDs are the ids of the scenarios the baseline runs.
var baselineIDs = []string{"baseline-mutex", "baseline-mutex-contended", "baseline-semaphore", "baseline-rwlock"}

// withBaseline leaves the baseline's scenarios out of scenarios unless
// -baseline names a revision; naming one of them in -only without it is an
// error.
func withBaseline(scenarios []scenario, cfg config) ([]scenario, error) {
	if cfg.baseline != "" {
		return scenarios, nil
	}
	if cfg.only != "" {
		for _, s := range scenarios {
			if slices.Contains(baselineIDs, s.id) {
				return nil, fmt.Errorf("-only %s: the baseline's scenarios need -baseline REV", s.id)
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(scenarios), func(s scenario) bool {
		return slices.Contains(baselineIDs, s.id)
	}), nil
}

// revPattern is what -baseline takes: a commit, branch or tag name, with
// the suffixes git's revision syntax adds (~2, ^, @{1}); no option, no
// range, no path.
var revPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./@{}^~-]*$`)

// checkRev checks -baseline's value before it reaches git.
func checkRev(rev string) error {
	switch {
	case !revPattern.MatchString(rev):
		return fmt.Errorf("-baseline %.80q: not a revision (a commit, branch or tag, e.g. HEAD~1)", rev)
	case strings.Contains(rev, ".."):
		return fmt.Errorf("-baseline %.80q: one revision, not a range", rev)
	}
	return nil
}

// buildBaseline copies the module at rev out of the git repository that
// holds peersDir and builds the Go peer in the copy.
func buildBaseline(rev, peersDir string, progress func(string, ...any)) (_ *baselinePeer, err error) {
	if err := checkRev(rev); err != nil {
		return nil, err
	}
	root, err := gitOutput(peersDir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("-baseline: the peers' directory is not in a git repository: %w", err)
	}
	commit, err := gitOutput(root, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("-baseline %s: no such commit", rev)
	}
	work, err := goWorkspace(root)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(root, ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cache, "bench-baseline-")
	if err != nil {
		return nil, err
	}
	b := &baselinePeer{commit: commit, dir: dir, binary: filepath.Join(dir, "gopeer")}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	progress("building the baseline: %s at %.12s in %s...", modulePath, commit, dir)
	src := filepath.Join(dir, "src")
	if err := extractCommit(root, commit, src); err != nil {
		return nil, err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("-baseline %s: %w", rev, err)
	}
	mod, goLine := modFileLines(gomod)
	if mod != modulePath {
		return nil, fmt.Errorf("-baseline %s: its go.mod is not of %s", rev, modulePath)
	}
	peerSrc := filepath.Join(src, "internal", "benchbaselinepeer")
	if err := copyGoFiles(filepath.Join(peersDir, goPeerDir), peerSrc); err != nil {
		return nil, err
	}
	goWork := filepath.Join(dir, "go.work")
	text := goWorkFile(newestGo(goLine, work.Go), src, work.replaces())
	if err := os.WriteFile(goWork, []byte(text), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(goCommand(), "build", "-o", b.binary, "./internal/benchbaselinepeer")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK="+goWork)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("-baseline %s: building the Go peer at %.12s: %v\n%s", rev, commit, err, tail(out, 4096))
	}
	return b, nil
}

// goCommand returns the go command: $GO (as the Makefile sets it) or go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// gitOutput runs git in dir and returns its trimmed output.
func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v %s", args[0], err, tail(stderr.Bytes(), 1024))
	}
	return strings.TrimSpace(string(out)), nil
}

// extractCommit writes the tree of commit into dir, which must not exist.
func extractCommit(root, commit, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	tar := filepath.Join(filepath.Dir(dir), "src.tar")
	if _, err := gitOutput(root, "archive", "--format=tar", "--output="+tar, commit); err != nil {
		return err
	}
	defer os.Remove(tar)
	if out, err := exec.Command("tar", "-x", "-f", tar, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v %s", err, tail(out, 1024))
	}
	return nil
}

// copyGoFiles copies the Go files of from, tests aside, into the new
// directory to.
func copyGoFiles(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(from, "*.go"))
	if err != nil {
		return err
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no Go peer in %s", from)
	}
	return nil
}

// workspace is what go work edit -json says of a go.work.
type workspace struct {
	path    string // the file; "" when the build uses none
	Go      string
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

// goWorkspace returns the workspace this runner is built in (GOWORK, as
// make bench-peers sets it), or an empty one.
func goWorkspace(root string) (workspace, error) {
	cmd := exec.Command(goCommand(), "env", "GOWORK")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return workspace{}, fmt.Errorf("go env GOWORK: %w", err)
	}
	p := strings.TrimSpace(string(out))
	if p == "" || p == "off" {
		return workspace{}, nil
	}
	cmd = exec.Command(goCommand(), "work", "edit", "-json", p)
	cmd.Dir = root
	if out, err = cmd.Output(); err != nil {
		return workspace{}, fmt.Errorf("go work edit -json %s: %w", p, err)
	}
	w := workspace{path: p}
	if err := json.Unmarshal(out, &w); err != nil {
		return workspace{}, fmt.Errorf("go work edit -json %s: %w", p, err)
	}
	return w, nil
}

// replace is one replace directive of a go.work.
type replace struct{ old, oldVersion, new, newVersion string }

// replaces returns w's replaces of modules other than this one, local
// paths made absolute.
func (w workspace) replaces() []replace {
	var out []replace
	for _, r := range w.Replace {
		if r.Old.Path == modulePath {
			continue
		}
		n := r.New.Path
		if r.New.Version == "" && !filepath.IsAbs(n) {
			n = filepath.Join(filepath.Dir(w.path), n)
		}
		out = append(out, replace{old: r.Old.Path, oldVersion: r.Old.Version, new: n, newVersion: r.New.Version})
	}
	return out
}

// goWorkFile returns the text of a go.work that uses the module in src with
// the replaces reps. A replace of one version of a module applies to every
// version, so that a baseline requiring another release of it is built
// with the same copy.
func goWorkFile(goVersion, src string, reps []replace) string {
	var b strings.Builder
	b.WriteString("// Written by internal/bench for -baseline; removed at the end of the run.\n")
	if goVersion != "" {
		fmt.Fprintf(&b, "go %s\n", goVersion)
	}
	fmt.Fprintf(&b, "\nuse %s\n", quoteModPath(src))
	for _, r := range reps {
		to := quoteModPath(r.new)
		if r.newVersion != "" {
			to += " " + r.newVersion
		}
		fmt.Fprintf(&b, "\nreplace %s => %s\n", quoteModPath(r.old), to)
	}
	return b.String()
}

// quoteModPath quotes p when go.mod's syntax needs it.
func quoteModPath(p string) string {
	if strings.ContainsAny(p, " \t\"'`\\") || p == "" {
		return fmt.Sprintf("%q", p)
	}
	return p
}

// modFileLines returns the module path and the go version of a go.mod.
func modFileLines(gomod []byte) (module, goVersion string) {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "module":
			if module == "" {
				module = strings.Trim(f[1], `"`)
			}
		case "go":
			if goVersion == "" {
				goVersion = f[1]
			}
		}
	}
	return module, goVersion
}

// newestGo returns the newer of two go lines' versions ("" when neither
// is valid): a go.work's must be at least every module's.
func newestGo(a, b string) string {
	va, vb := "go"+a, "go"+b
	switch {
	case !version.IsValid(va) && !version.IsValid(vb):
		return ""
	case !version.IsValid(vb):
		return a
	case !version.IsValid(va):
		return b
	case version.Compare(va, vb) >= 0:
		return a
	}
	return b
}

// tail returns the last n bytes of out, as text safe to print.
func tail(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(out)), "?")
}

// errNoBaseline is returned when the baseline's peer was not built.
var errNoBaseline = errors.New("baseline not built (-baseline)")
