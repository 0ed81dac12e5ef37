package allocator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckerIsIndependent keeps the reference checker honest: it may not
// use any of the allocator's own declarations (types, helpers, constants),
// so that a rule the allocator gets wrong cannot be shared with the test
// that judges it. What the allocator returns is a resourceapi type, which
// the checker reads without help.
func TestCheckerIsIndependent(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	production := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					production[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						production[spec.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							production[n.Name] = true
						}
					}
				}
			}
		}
	}
	if len(production) < 20 {
		t.Fatalf("found only %d declarations of the allocator: %v", len(production), production)
	}
	if used := productionUses(t, fset, "checker_test.go", production); len(used) > 0 {
		t.Errorf("checker_test.go uses the allocator's own %v; state the rule in the checker instead", used)
	}
}

// productionUses lists the production names a file refers to: plain
// identifiers that are neither a field or method after a dot, a field
// name, a composite literal key, nor declared in the file itself.
func productionUses(t *testing.T, fset *token.FileSet, file string, production map[string]bool) []string {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[*ast.Ident]bool{}
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			skip[n.Sel] = true
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				skip[id] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.TypeSpec:
			declared[n.Name.Name] = true
		case *ast.FuncDecl:
			declared[n.Name.Name] = true
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{n.Key, n.Value} {
				if id, ok := e.(*ast.Ident); ok {
					declared[id.Name] = true
				}
			}
		}
		return true
	})
	var used []string
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !skip[id] && production[id.Name] && !declared[id.Name] && !slices.Contains(used, id.Name) {
			used = append(used, id.Name)
		}
		return true
	})
	slices.Sort(used)
	return used
}
