package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// patchFile is one patch zkrecipes ships: a unified diff against the files
// of a go-zookeeper release, after a free-text header.
type patchFile struct {
	name string
	text []byte
}

// patchedCopy returns the directory, under root, of go-zookeeper version
// (its files in src) with patches applied, making it if it is not there
// yet. The directory's name carries a digest of the patches, so a changed
// patch makes a new copy.
func patchedCopy(root, src, version string, patches []patchFile) (string, error) {
	h := sha256.New()
	for _, p := range patches {
		h.Write([]byte(p.name))
		h.Write(p.text)
	}
	dir := filepath.Join(root, "go-zookeeper-zk@"+version+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "copy-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(src, tmp); err != nil {
		return "", err
	}
	for _, p := range patches {
		if err := applyPatch(tmp, p.text); err != nil {
			return "", fmt.Errorf("%s does not apply to %s %s: %w", p.name, zkModule, version, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
			return dir, nil // made meanwhile by another run
		}
		return "", err
	}
	return dir, nil
}

// copyTree copies the regular files of src (a module in the read-only
// module cache) to dst, writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// applyPatch applies a unified diff to the files under dir. Every hunk must
// find its old lines (context and removals) as they are, at the line it
// names or elsewhere in the file, once.
func applyPatch(dir string, diff []byte) error {
	lines := strings.SplitAfter(string(diff), "\n")
	applied := 0
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "--- ") || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
			continue
		}
		name := strings.TrimSpace(strings.TrimPrefix(lines[i+1], "+++ "))
		name, _, _ = strings.Cut(name, "\t")
		if _, rest, ok := strings.Cut(name, "/"); ok {
			name = rest // -p1
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file := strings.SplitAfter(string(b), "\n")
		i += 2
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			var old, new []string
			at, err := hunkStart(lines[i])
			if err != nil {
				return err
			}
			for i++; i < len(lines) && hunkLine(lines[i]); i++ {
				l := lines[i]
				switch l[0] {
				case ' ':
					old, new = append(old, l[1:]), append(new, l[1:])
				case '-':
					old = append(old, l[1:])
				case '+':
					new = append(new, l[1:])
				}
			}
			if file, err = replaceLines(file, old, new, at); err != nil {
				return fmt.Errorf("%s: hunk at line %d: %w", name, at+1, err)
			}
			applied++
		}
		i--
		if err := os.WriteFile(path, []byte(strings.Join(file, "")), 0o644); err != nil {
			return err
		}
	}
	if applied == 0 {
		return errors.New("no hunk found")
	}
	return nil
}

// hunkLine reports whether l belongs to a hunk's body.
func hunkLine(l string) bool {
	return l != "" && (l[0] == ' ' || l[0] == '-' || l[0] == '+') && !strings.HasPrefix(l, "--- ")
}

// hunkStart reads the old file's first line (from 0) of a hunk header
// "@@ -l[,n] +l[,n] @@".
func hunkStart(h string) (int, error) {
	f := strings.Fields(h)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") {
		return 0, fmt.Errorf("bad hunk header %q", strings.TrimSpace(h))
	}
	n, _, _ := strings.Cut(f[1][1:], ",")
	l, err := strconv.Atoi(n)
	if err != nil {
		return 0, fmt.Errorf("bad hunk header %q", strings.TrimSpace(h))
	}
	return max(l-1, 0), nil
}

// replaceLines replaces old by new in file, at line at if old is there,
// else where old occurs once.
func replaceLines(file, old, new []string, at int) ([]string, error) {
	matches := func(i int) bool {
		if i < 0 || i+len(old) > len(file) {
			return false
		}
		for j, l := range old {
			if file[i+j] != l {
				return false
			}
		}
		return true
	}
	pos := -1
	if matches(at) {
		pos = at
	} else {
		for i := range file {
			if matches(i) {
				if pos >= 0 {
					return nil, errors.New("its lines occur more than once")
				}
				pos = i
			}
		}
	}
	if pos < 0 {
		return nil, errors.New("its lines are not in the file")
	}
	out := append([]string(nil), file[:pos]...)
	out = append(out, new...)
	return append(out, file[pos+len(old):]...), nil
}

// writeWork writes, under root, the go.work of the module in modDir with
// go-zookeeper version replaced by the patched copy, and returns its path.
// Each module has a go.work of its own, named after its directory.
func writeWork(root, modDir, version, patched string) (string, error) {
	modDir, err := filepath.Abs(modDir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(modDir))
	dir := filepath.Join(root, "work", filepath.Base(modDir)+"-"+hex.EncodeToString(sum[:])[:12])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work := filepath.Join(dir, "go.work")
	text := fmt.Sprintf(`// Written by zkrace (github.com/zkrecipes/zkrecipes/cmd/zkrace): the module
// in %s with %s %s patched. Remake it by running zkrace again.
go %s

use %s

replace %s %s => %s
`, modDir, zkModule, version, goVersion(),
		strconv.Quote(modDir), zkModule, version, strconv.Quote(patched))
	return work, os.WriteFile(work, []byte(text), 0o644)
}

// goVersion is the version of the go command zkrace was built with, the
// one that runs it (go run), as a go.work's go line takes it: a workspace
// needs at least the go line of each module it uses.
func goVersion() string {
	v, _, _ := strings.Cut(strings.TrimPrefix(runtime.Version(), "go"), " ")
	if v == "" || v[0] < '1' || v[0] > '9' {
		return "1.22" // a development toolchain: the first with go.work's go line rules
	}
	return v
}
