// Command ctxwalk follows one parameter of one function through the calls
// that pass it on, and prints the files the walk stays in, in order: how
// far a value travels, and how often it comes back to a file it had left.
// It reads the source with go/parser alone (no type checking), so it is a
// measure of the layout, not a proof:
//
//   - A call passes the parameter on when one of its arguments is the
//     parameter, or a name derived from it (a variable assigned from an
//     expression that mentions it, whose name contains "ctx"). Calls
//     inside function literals count where the literal is written.
//   - A callee is found by name: a package's function, or a method named
//     by the type of its receiver when the walk knows it (the receiver, a
//     parameter or result of a named type, a field of such a type), else
//     the only method of that name in the packages read. A call that
//     stays ambiguous, or that goes through an interface or a func value,
//     is not followed, and is listed.
//   - Each function is entered once; a call to one already entered adds
//     nothing.
//
// A stay is a run of functions entered one after the other in one file;
// a return is a stay in a file the walk had already stayed in.
//
// Usage, from the repository root:
//
//	go run ./internal/ctxwalk recipe/lock.go:Lock.Acquire:ctx
//
// Packages read: recipe, its internal packages but simzk, retry and
// driver (-dirs to change).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const module = "github.com/zkrecipes/zkrecipes/"

// fn is a function or method of a package read.
type fn struct {
	pkg  string // the package's directory
	file string
	recv string // the receiver's type name, "" for a function
	decl *ast.FuncDecl
}

func (f *fn) name() string {
	if f.recv != "" {
		return f.recv + "." + f.decl.Name.Name
	}
	return f.decl.Name.Name
}

// world is every package read.
type world struct {
	fset    *token.FileSet
	funcs   map[string]*fn               // by pkg + " " + name()
	methods map[string][]*fn             // by method name
	fields  map[string]map[string]string // struct type (pkg + " " + name) -> field -> type name
	elems   map[string]string            // slice type (pkg + " " + name) -> element type name
	imports map[string]map[string]string // file -> local name -> package directory
}

func main() {
	dirs := flag.String("dirs", "recipe,recipe/internal/transport,recipe/internal/jute,retry,driver", "comma-separated package `directories` to read")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ctxwalk [-dirs a,b] FILE:FUNCTION:PARAM")
		os.Exit(2)
	}
	wk, err := walk(strings.Split(*dirs, ","), flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wk.print()
}

// walk reads the packages in dirs and walks from spec
// (FILE:FUNCTION:PARAM).
func walk(dirs []string, spec string) (*walker, error) {
	w, err := load(dirs)
	if err != nil {
		return nil, err
	}
	start, param, err := w.start(spec)
	if err != nil {
		return nil, err
	}
	wk := &walker{w: w, entered: map[*fn]bool{}}
	wk.enter(start, param)
	return wk, nil
}

func load(dirs []string) (*world, error) {
	w := &world{fset: token.NewFileSet(), funcs: map[string]*fn{}, methods: map[string][]*fn{},
		fields: map[string]map[string]string{}, elems: map[string]string{}, imports: map[string]map[string]string{}}
	for _, dir := range dirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(w.fset, name, nil, 0)
			if err != nil {
				return nil, err
			}
			w.addFile(dir, name, f)
		}
	}
	return w, nil
}

func (w *world) addFile(dir, name string, f *ast.File) {
	imp := map[string]string{}
	for _, s := range f.Imports {
		path := strings.Trim(s.Path.Value, `"`)
		local := path[strings.LastIndex(path, "/")+1:]
		if s.Name != nil {
			local = s.Name.Name
		}
		if rest, ok := strings.CutPrefix(path, module); ok {
			imp[local] = rest
		}
	}
	w.imports[name] = imp
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			g := &fn{pkg: dir, file: name, decl: d}
			if d.Recv != nil && len(d.Recv.List) > 0 {
				g.recv = typeName(d.Recv.List[0].Type)
				w.methods[d.Name.Name] = append(w.methods[d.Name.Name], g)
			}
			w.funcs[dir+" "+g.name()] = g
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					continue
				}
				if at, ok := ts.Type.(*ast.ArrayType); ok {
					w.elems[dir+" "+ts.Name.Name] = typeName(at.Elt)
					continue
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				m := map[string]string{}
				for _, fl := range st.Fields.List {
					for _, n := range fl.Names {
						m[n.Name] = typeName(fl.Type)
					}
				}
				w.fields[dir+" "+ts.Name.Name] = m
			}
		}
	}
}

// typeName is the name of a named type, pointers and type arguments
// dropped; "" for any other type.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	}
	return ""
}

func (w *world) start(spec string) (*fn, string, error) {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		return nil, "", fmt.Errorf("want FILE:FUNCTION:PARAM, got %q", spec)
	}
	g := w.funcs[filepath.Dir(parts[0])+" "+parts[1]]
	if g == nil || g.file != parts[0] {
		return nil, "", fmt.Errorf("no function %s in %s", parts[1], parts[0])
	}
	return g, parts[2], nil
}

// walker is one walk.
type walker struct {
	w       *world
	entered map[*fn]bool
	trail   []*fn    // functions in the order entered
	lost    []string // calls passing the parameter that were not followed
}

// enter walks g's body with the parameter called param.
func (wk *walker) enter(g *fn, param string) {
	if wk.entered[g] || g.decl.Body == nil {
		return
	}
	wk.entered[g] = true
	wk.trail = append(wk.trail, g)
	tracked := map[string]bool{param: true}
	vars := wk.localTypes(g)
	ast.Inspect(g.decl.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			wk.noteTypes(g, vars, n)
			if mentions(n.Rhs, tracked) {
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && strings.Contains(strings.ToLower(id.Name), "ctx") {
						tracked[id.Name] = true
					}
				}
			}
		case *ast.CallExpr:
			for i, a := range n.Args {
				id, ok := a.(*ast.Ident)
				if !ok || !tracked[id.Name] {
					continue
				}
				callee := wk.resolve(g, vars, n.Fun)
				if callee == nil {
					wk.lost = append(wk.lost, fmt.Sprintf("%s (%s)", exprString(n.Fun), wk.w.fset.Position(n.Pos())))
					break
				}
				if p := paramName(callee.decl, i); p != "" {
					wk.enter(callee, p)
				}
				break
			}
		}
		return true
	})
}

// localTypes maps the names of g's receiver, parameters and results of
// named types to those types.
func (wk *walker) localTypes(g *fn) map[string]string {
	vars := map[string]string{}
	add := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, n := range f.Names {
				if t := typeName(f.Type); t != "" {
					vars[n.Name] = t
				}
			}
		}
	}
	add(g.decl.Recv)
	add(g.decl.Type.Params)
	add(g.decl.Type.Results)
	return vars
}

// noteTypes notes the named types of the variables an assignment
// declares, where the walk can tell: a composite literal, its address, or
// the results of a function it can resolve.
func (wk *walker) noteTypes(g *fn, vars map[string]string, a *ast.AssignStmt) {
	if a.Tok != token.DEFINE {
		return
	}
	var types []string
	switch {
	case len(a.Rhs) == len(a.Lhs):
		for _, r := range a.Rhs {
			types = append(types, wk.exprType(g, vars, r))
		}
	case len(a.Rhs) == 1:
		if c, ok := a.Rhs[0].(*ast.CallExpr); ok {
			types = wk.results(g, vars, c)
		}
	}
	for i, l := range a.Lhs {
		if id, ok := l.(*ast.Ident); ok && i < len(types) && types[i] != "" {
			vars[id.Name] = types[i]
		}
	}
}

// exprType is the named type of e, or "".
func (wk *walker) exprType(g *fn, vars map[string]string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.CompositeLit:
		return typeName(e.Type)
	case *ast.UnaryExpr:
		return wk.exprType(g, vars, e.X)
	case *ast.CallExpr:
		if r := wk.results(g, vars, e); len(r) > 0 {
			return r[0]
		}
	}
	return wk.typeOf(g.pkg, vars, e)
}

// results are the named types of the results of the function c calls.
func (wk *walker) results(g *fn, vars map[string]string, c *ast.CallExpr) []string {
	callee := wk.resolve(g, vars, c.Fun)
	if callee == nil || callee.decl.Type.Results == nil {
		return nil
	}
	var out []string
	for _, f := range callee.decl.Type.Results.List {
		for range max(len(f.Names), 1) {
			out = append(out, typeName(f.Type))
		}
	}
	return out
}

// resolve finds the function a call expression names, or nil.
func (wk *walker) resolve(g *fn, vars map[string]string, fun ast.Expr) *fn {
	switch f := fun.(type) {
	case *ast.Ident:
		return wk.w.funcs[g.pkg+" "+f.Name]
	case *ast.IndexExpr: // a generic function with type arguments
		return wk.resolve(g, vars, f.X)
	case *ast.SelectorExpr:
		if id, ok := f.X.(*ast.Ident); ok {
			if dir, ok := wk.w.imports[g.file][id.Name]; ok && vars[id.Name] == "" {
				return wk.w.funcs[dir+" "+f.Sel.Name]
			}
		}
		if t := wk.typeOf(g.pkg, vars, f.X); t != "" {
			if m := wk.w.funcs[g.pkg+" "+t+"."+f.Sel.Name]; m != nil {
				return m
			}
		}
		if ms := wk.w.methods[f.Sel.Name]; len(ms) == 1 {
			return ms[0]
		}
	}
	return nil
}

// typeOf is the named type of e when the walk can tell: a known variable,
// or a field of one.
func (wk *walker) typeOf(pkg string, vars map[string]string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return vars[e.Name]
	case *ast.SelectorExpr:
		if t := wk.typeOf(pkg, vars, e.X); t != "" {
			return wk.w.fields[pkg+" "+t][e.Sel.Name]
		}
	case *ast.ParenExpr:
		return wk.typeOf(pkg, vars, e.X)
	case *ast.IndexExpr:
		if t := wk.typeOf(pkg, vars, e.X); t != "" {
			return wk.w.elems[pkg+" "+t]
		}
	}
	return ""
}

// paramName is the name of the i-th parameter of d ("" if none, or "_").
func paramName(d *ast.FuncDecl, i int) string {
	k := 0
	for _, f := range d.Type.Params.List {
		names := f.Names
		if len(names) == 0 {
			names = []*ast.Ident{{Name: ""}}
		}
		for _, n := range names {
			if k == i {
				if n.Name == "_" {
					return ""
				}
				return n.Name
			}
			k++
		}
	}
	return ""
}

// mentions reports whether any of es uses a tracked name.
func mentions(es []ast.Expr, tracked map[string]bool) bool {
	found := false
	for _, e := range es {
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && tracked[id.Name] {
				found = true
			}
			return !found
		})
	}
	return found
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return exprString(e.Fun) + "(...)"
	case *ast.IndexExpr:
		return exprString(e.X) + "[...]"
	case *ast.ParenExpr:
		return "(" + exprString(e.X) + ")"
	}
	return fmt.Sprintf("%T", e)
}

// stay is a run of functions entered one after the other in one file.
type stay struct {
	file  string
	funcs []string
}

// stays groups the functions entered into stays.
func (wk *walker) stays() []stay {
	var stays []stay
	for _, g := range wk.trail {
		if n := len(stays); n > 0 && stays[n-1].file == g.file {
			stays[n-1].funcs = append(stays[n-1].funcs, g.name())
			continue
		}
		stays = append(stays, stay{file: g.file, funcs: []string{g.name()}})
	}
	return stays
}

// print prints the stays, then the counts and the calls not followed.
func (wk *walker) print() {
	stays := wk.stays()
	seen := map[string]int{}
	returns := 0
	for i, s := range stays {
		seen[s.file]++
		mark := ""
		if seen[s.file] > 1 {
			returns++
			mark = fmt.Sprintf("  (visit %d)", seen[s.file])
		}
		fmt.Printf("%3d. %s%s: %s\n", i+1, s.file, mark, strings.Join(s.funcs, ", "))
	}
	var back []string
	for f, n := range seen {
		if n > 1 {
			back = append(back, fmt.Sprintf("%s %d", f, n-1))
		}
	}
	slices.Sort(back)
	fmt.Printf("\n%d functions, %d stays in %d files, %d returns to a file left before", len(wk.trail), len(stays), len(seen), returns)
	if len(back) > 0 {
		fmt.Printf(" (%s)", strings.Join(back, ", "))
	}
	fmt.Println()
	if len(wk.lost) > 0 {
		fmt.Printf("not followed (an interface, a func value, or ambiguous): %s\n", strings.Join(wk.lost, "; "))
	}
}
