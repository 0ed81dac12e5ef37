// Command longfuncs lists the functions of the module's hand-written Go
// files (tests only with -tests) that are longer than -max lines, longest
// first, and whether their doc comment gives a reason (it says "long
// because"). It exits 1 when one of them gives no reason (`make
// verify-longfuncs`). Generated files are left out: those with the
// standard "// Code generated ... DO NOT EDIT." header (go/ast.IsGenerated),
// zz_generated* files and the generated/ directory. Run it from the module
// root.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	max := flag.Int("max", 100, "longest function allowed without a reason")
	tests := flag.Bool("tests", false, "include _test.go files (table-driven tests are long by design)")
	flag.Parse()
	type long struct {
		where  string
		lines  int
		reason bool
	}
	var found []long
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "generated" || d.Name() == "_output" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		if !*tests && strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n <= *max {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = fmt.Sprintf("(%s).%s", typeName(fn.Recv.List[0].Type), name)
			}
			found = append(found, long{
				where:  fmt.Sprintf("%s:%d %s", path, fset.Position(fn.Pos()).Line, name),
				lines:  n,
				reason: fn.Doc != nil && strings.Contains(fn.Doc.Text(), "long because"),
			})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	unexplained := 0
	for _, f := range found {
		reason := ""
		if f.reason {
			reason = " (reason given)"
		} else {
			unexplained++
		}
		fmt.Printf("%4d %s%s\n", f.lines, f.where, reason)
	}
	if unexplained > 0 {
		fmt.Fprintf(os.Stderr, "%d function(s) longer than %d lines without a reason: shorten them, or say why in the doc comment (\"long because ...\")\n", unexplained, *max)
		os.Exit(1)
	}
}

func typeName(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return fmt.Sprintf("%T", expr)
}
