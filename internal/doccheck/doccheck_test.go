package doccheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// imports maps the package names a snippet may use without importing them
// to their import paths. A snippet that uses another package states its
// imports.
var imports = map[string]string{
	// This module.
	"driver":    "github.com/zkrecipes/zkrecipes/driver",
	"leader":    "github.com/zkrecipes/zkrecipes/leader",
	"multilock": "github.com/zkrecipes/zkrecipes/multilock",
	"mutex":     "github.com/zkrecipes/zkrecipes/mutex",
	"recipe":    "github.com/zkrecipes/zkrecipes/recipe",
	"retry":     "github.com/zkrecipes/zkrecipes/retry",
	"rwlock":    "github.com/zkrecipes/zkrecipes/rwlock",
	"semaphore": "github.com/zkrecipes/zkrecipes/semaphore",
	"telemetry": "github.com/zkrecipes/zkrecipes/telemetry",
	"zktest":    "github.com/zkrecipes/zkrecipes/zktest",
	// Dependencies.
	"zk":        "github.com/go-zookeeper/zk",
	"otel":      "go.opentelemetry.io/otel",
	"attribute": "go.opentelemetry.io/otel/attribute",
	"metric":    "go.opentelemetry.io/otel/metric",
	"trace":     "go.opentelemetry.io/otel/trace",
	"sdkmetric": "go.opentelemetry.io/otel/sdk/metric",
	"sdktrace":  "go.opentelemetry.io/otel/sdk/trace",
	// The standard library.
	"bytes":    "bytes",
	"context":  "context",
	"errors":   "errors",
	"exec":     "os/exec",
	"filepath": "path/filepath",
	"fmt":      "fmt",
	"http":     "net/http",
	"io":       "io",
	"json":     "encoding/json",
	"log":      "log",
	"net":      "net",
	"os":       "os",
	"signal":   "os/signal",
	"slog":     "log/slog",
	"strconv":  "strconv",
	"strings":  "strings",
	"sync":     "sync",
	"atomic":   "sync/atomic",
	"syscall":  "syscall",
	"testing":  "testing",
	"time":     "time",
	"tls":      "crypto/tls",
}

// block is one Go code block of a Markdown file.
type block struct {
	file   string // absolute path of the Markdown file
	line   int    // line of its first line of code
	code   string
	exempt string // the reason given by <!-- not compiled: ... -->, if any
}

// given is the text of a <!-- doccheck: ... --> comment.
type given struct {
	file string
	line int // line of its first line of text
	text string
}

var (
	fenceRE  = regexp.MustCompile("^(```+|~~~+)\\s*(\\S*)")
	exemptRE = regexp.MustCompile(`^<!--\s*not compiled:\s*(.*?)\s*-->$`)
)

// scan returns the Go code blocks and the doccheck comments of a Markdown
// file.
func scan(t *testing.T, file string) ([]block, []given) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var (
		blocks   []block
		givens   []given
		lastText string // the last non-blank line outside a block
	)
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if m := fenceRE.FindStringSubmatch(trimmed); m != nil {
			fence, lang := m[1], m[2]
			start := i + 1
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), fence); i++ {
				code = append(code, lines[i])
			}
			if lang == "go" {
				b := block{file: file, line: start + 1, code: strings.Join(code, "\n")}
				if m := exemptRE.FindStringSubmatch(lastText); m != nil {
					if m[1] == "" {
						t.Errorf("%s:%d: <!-- not compiled: --> gives no reason", rel(file), start)
					}
					b.exempt = m[1]
				}
				blocks = append(blocks, b)
			} else if exemptRE.MatchString(lastText) {
				t.Errorf("%s:%d: <!-- not compiled --> is not right before a Go block", rel(file), start)
			}
			lastText = ""
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, "<!-- doccheck:"); ok {
			g := given{file: file, line: i + 1}
			var text []string
			for {
				if before, ok := strings.CutSuffix(strings.TrimSpace(rest), "-->"); ok {
					text = append(text, before)
					break
				}
				text = append(text, rest)
				i++
				if i == len(lines) {
					t.Fatalf("%s:%d: unterminated <!-- doccheck: comment", rel(file), g.line)
				}
				rest = lines[i]
			}
			if strings.TrimSpace(text[0]) == "" {
				text, g.line = text[1:], g.line+1
			}
			g.text = strings.Join(text, "\n")
			givens = append(givens, g)
			lastText = trimmed
			continue
		}
		if trimmed != "" {
			if exemptRE.MatchString(lastText) && !exemptRE.MatchString(trimmed) {
				t.Errorf("%s:%d: <!-- not compiled --> is not right before a Go block", rel(file), i)
			}
			lastText = trimmed
		}
	}
	return blocks, givens
}

var root = func() string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return dir
}()

// rel returns path relative to the module root, for messages.
func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// relErr returns err's message with paths relative to the module root.
func relErr(err error) string {
	return strings.ReplaceAll(err.Error(), root+string(filepath.Separator), "")
}

// lineDirective makes the compiler report positions in the Markdown file.
func lineDirective(file string, line int) string {
	return fmt.Sprintf("//line %s:%d\n", file, line)
}

// pkg is the source of one generated package.
type pkg struct {
	name  string
	files map[string]string // file name -> source
	main  bool              // package main, from a block of its own
}

// generate turns the blocks and givens of one Markdown file into packages:
// one for the file, and one more for each block with a package clause.
func generate(t *testing.T, name string, blocks []block, givens []given) []pkg {
	main := pkg{name: name, files: map[string]string{}}
	pkgs := []pkg{}
	type pending struct {
		fname string
		src   string // without imports, after the package clause
		f     *ast.File
		own   bool // states its imports
	}
	var todo []pending
	declared := map[string]bool{} // package-level names of main
	header := "package " + name + "\n\n"
	parse := func(src string) (*ast.File, error) {
		return parser.ParseFile(token.NewFileSet(), "", src, parser.ParseComments)
	}
	collect := func(f *ast.File) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = true
						}
					}
				}
			}
		}
	}
	for i, g := range givens {
		src := lineDirective(g.file, g.line) + g.text + "\n"
		f, err := parse(header + src)
		if err != nil {
			t.Errorf("doccheck comment: %s", relErr(err))
			continue
		}
		collect(f)
		todo = append(todo, pending{fname: fmt.Sprintf("given%d.go", i), src: src, f: f})
	}
	for i, b := range blocks {
		if b.exempt != "" {
			continue
		}
		fname := fmt.Sprintf("block%d.go", i)
		if f, err := parser.ParseFile(token.NewFileSet(), "", b.code, parser.PackageClauseOnly); err == nil {
			// A whole file, in a package of its own.
			p := pkg{name: fmt.Sprintf("%s_%d", name, i), files: map[string]string{
				fname: lineDirective(b.file, b.line) + b.code + "\n",
			}, main: f.Name.Name == "main"}
			pkgs = append(pkgs, p)
			continue
		}
		src := lineDirective(b.file, b.line) + b.code + "\n"
		if f, err := parse(header + src); err == nil {
			collect(f)
			todo = append(todo, pending{fname: fname, src: src, f: f, own: len(f.Imports) > 0})
			continue
		}
		// Statements: the body of a function.
		body := "func _() error {\n" + src
		f, err := parse(header + body + "return nil\n}\n")
		if err != nil {
			t.Errorf("%s", relErr(err))
			continue
		}
		fn := f.Decls[len(f.Decls)-1].(*ast.FuncDecl)
		var uses []string
		for _, s := range fn.Body.List {
			for _, id := range defined(s) {
				if id != "_" && !slices.Contains(uses, id) {
					uses = append(uses, id)
				}
			}
		}
		body += "\n" // after a trailing line comment
		for _, id := range uses {
			body += "_ = " + id + "\n"
		}
		body += "return nil\n}\n"
		f, err = parse(header + body)
		if err != nil {
			t.Errorf("%s", relErr(err))
			continue
		}
		todo = append(todo, pending{fname: fname, src: body, f: f})
	}
	for _, p := range todo {
		imps := ""
		if !p.own {
			imps = importsFor(p.f, declared)
		}
		main.files[p.fname] = header + imps + p.src
	}
	if len(main.files) > 0 {
		pkgs = append(pkgs, main)
	}
	return pkgs
}

// defined returns the names a statement declares in its scope.
func defined(s ast.Stmt) []string {
	var names []string
	switch s := s.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			for _, e := range s.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					names = append(names, id.Name)
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, sp := range g.Specs {
				for _, id := range sp.(*ast.ValueSpec).Names {
					names = append(names, id.Name)
				}
			}
		}
	}
	return names
}

// importsFor returns the import declaration for the packages f names that
// are neither declared in f nor at the package level (declared).
func importsFor(f *ast.File, declared map[string]bool) string {
	unresolved := map[*ast.Ident]bool{}
	for _, id := range f.Unresolved { //nolint:staticcheck // the parser's own resolution is what is needed here
		unresolved[id] = true
	}
	var paths []string
	names := map[string]string{} // path -> the name the file uses
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || !unresolved[id] || declared[id.Name] {
			return true
		}
		if path, ok := imports[id.Name]; ok && !slices.Contains(paths, path) {
			paths = append(paths, path)
			names[path] = id.Name
		}
		return true
	})
	if len(paths) == 0 {
		return ""
	}
	slices.Sort(paths)
	var b strings.Builder
	b.WriteString("import (\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%s %q\n", names[p], p)
	}
	b.WriteString(")\n\n")
	return b.String()
}

// goTool finds the go command: on PATH, else where this Go installation
// keeps it.
func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOROOT, "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command: %v", err)
	}
	return p
}

// docs returns README.md and docs/*.md.
func docs(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// TestDocSnippets compiles (go build) and vets (go vet) every Go code
// block of README.md and docs/*.md.
func TestDocSnippets(t *testing.T) {
	start := time.Now()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	var pkgs []pkg
	compiled, exempt := 0, 0
	for _, file := range docs(t) {
		blocks, givens := scan(t, file)
		for _, b := range blocks {
			if b.exempt != "" {
				exempt++
				t.Logf("%s:%d: not compiled: %s", rel(b.file), b.line-1, b.exempt)
			} else {
				compiled++
			}
		}
		name := strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(strings.ToLower(rel(file)))
		pkgs = append(pkgs, generate(t, name, blocks, givens)...)
	}
	if compiled == 0 {
		t.Fatal("no Go code block found")
	}
	if t.Failed() {
		return
	}

	// The packages go in the module, under testdata (which ./... skips),
	// and are removed afterwards. The directory's name is always the same,
	// so that the build cache serves the unchanged ones next time.
	gen := filepath.Join("testdata", "generated")
	if err := os.RemoveAll(gen); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(gen)
		os.Remove("testdata") // only if empty
	})
	var args []string
	for _, p := range pkgs {
		dir := filepath.Join(gen, p.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, src := range p.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "./"+filepath.ToSlash(dir))
	}
	run := func(args ...string) {
		cmd := exec.Command(goTool(t), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go %s: %v\n%s", args[0], err, bytes.ReplaceAll(out, []byte(root+string(filepath.Separator)), nil))
		}
	}
	build := []string{"build"}
	for _, p := range pkgs {
		if p.main {
			// Binaries go to a directory of their own, not the package's.
			build = append(build, "-o", t.TempDir()+string(filepath.Separator))
			break
		}
	}
	run(append(build, args...)...)
	if !t.Failed() {
		// Statements after a snippet's return are the wrapper's.
		run(append([]string{"vet", "-unreachable=false"}, args...)...)
	}
	t.Logf("%d Go blocks compiled, %d exempt, in %d packages, %v", compiled, exempt, len(pkgs), time.Since(start).Round(time.Millisecond))
}
