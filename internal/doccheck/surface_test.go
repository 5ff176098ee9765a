package doccheck

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The handles users hold (reentrant.Handle: custom recipes' users), and
// the methods they call on them. Each must be
// declared and documented on the type itself, so that `go doc` lists it:
// a method promoted from an embedded field is listed only on that field's
// type.
var surface = []struct {
	pkg, typ string
	methods  []string
}{
	{"mutex", "Mutex", []string{"Lock", "TryLock", "Enter", "TryEnter", "Unlock", "Participants", "ParticipantNodes", "Path",
		"Done", "Err", "Token", "Node", "Commit", "Revoked", "Suspended", "Resumed", "Take", "Release"}},
	{"rwlock", "Side", []string{"Path", "Mode", "RWLock", "Take", "Enter", "Release",
		"Done", "Err", "Token", "Node", "Commit", "Revoked", "Suspended", "Resumed"}},
	{"reentrant", "Handle", []string{"Path", "Take", "Enter", "Release",
		"Done", "Err", "Token", "Node", "Commit", "Revoked", "Suspended", "Resumed"}},
	{"semaphore", "Lease", []string{"Release", "Done", "Err", "Token", "Node", "Commit", "Suspended", "Resumed"}},
	{"leader", "Election", []string{"Campaign", "TryCampaign", "Resign", "Run", "Take", "Path",
		"IsLeader", "Done", "Err", "Token", "Node", "Commit", "Proclaim", "Suspended", "Resumed",
		"Leader", "Participants", "ParticipantNodes", "Observe", "Observer"}},
}

// TestSurfaceInGoDoc checks that the methods of surface are declared and
// documented on their types, and that the types have no exported field
// (embedded or not) a caller could replace.
func TestSurfaceInGoDoc(t *testing.T) {
	for _, s := range surface {
		typ := docType(t, filepath.Join(root, s.pkg), s.typ)
		if typ == nil {
			t.Errorf("%s.%s: type not found", s.pkg, s.typ)
			continue
		}
		documented := map[string]bool{}
		for _, m := range typ.Methods {
			documented[m.Name] = strings.HasPrefix(m.Doc, m.Name+" ")
		}
		for _, name := range s.methods {
			ok, declared := documented[name]
			switch {
			case !declared:
				t.Errorf("go doc %s.%s does not list %s", s.pkg, s.typ, name)
			case !ok:
				t.Errorf("%s.%s.%s: no doc comment starting with its name", s.pkg, s.typ, name)
			}
		}
		st, _ := typ.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType)
		if st == nil {
			continue
		}
		for _, f := range st.Fields.List {
			names := f.Names
			if len(names) == 0 { // embedded: the field is named after its type
				names = []*ast.Ident{embeddedName(f.Type)}
			}
			for _, n := range names {
				if n != nil && n.IsExported() {
					t.Errorf("%s.%s has the exported field %s, which a caller can replace", s.pkg, s.typ, n.Name)
				}
			}
		}
	}
}

// docType parses the package in dir (without tests) and returns the doc
// of its type name.
func docType(t *testing.T, dir, name string) *doc.Type {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		files = append(files, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := doc.NewFromFiles(fset, files, "example.com/"+filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pkg.Types, func(ty *doc.Type) bool { return ty.Name == name })
	if i < 0 {
		return nil
	}
	return pkg.Types[i]
}

// embeddedName is the name of an embedded field of type expr (T, *T,
// pkg.T, *pkg.T).
func embeddedName(expr ast.Expr) *ast.Ident {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel
	case *ast.Ident:
		return e
	}
	return nil
}
