package main

import (
	"fmt"
	"path"
	"strings"
)

// layers lists the repository's packages from the top (the command) to the
// bottom (the API types), each layer by the path prefixes, relative to the
// module, of its packages. A package belongs to the longest prefix that
// names it or one of its parents; that prefix is its group.
//
// A package may import packages of its own group and of every layer below
// its own, never one above it or of another group of its own layer
// (controllermanager and registry do not know each other). What is not a
// library is under internal/. driver/, the
// library DRA drivers import, node agent included, sits below every
// controller: what it shares with them (how pods name their claims, the
// work loop) is in the layer below both.
var layers = [][]string{
	{"cmd"},
	{"internal/server"},
	{"internal/controllermanager", "internal/registry"},
	{"internal/inprocess"},
	{"internal/simulator", "internal/auth"},
	{"internal/controllers"},
	{"allocator", "driver", "internal/resourceclient"},
	{"internal/podclaims", "internal/worker"},
	{"apis/resource/validation"},
	{"internal/cel"},
	{"generated", "internal/sharedmaps"},
	{"apis", "internal/features", "internal/codec", "internal/reflectequal"},
}

// apiTier is the first layer of the API definition: validation, CEL,
// generated code and types. Tests of a package in it may import any other
// package in it (round-trip and compatibility tests exercise the types
// through generated code and validation together).
const apiTier = 8

// Outside the layers: tests (test/) and tools (hack/) may import anything,
// and only tests may import them. internal/testing holds helpers for tests:
// test files, test/ and other test helper packages (whose name ends in
// "testing") may import it.
const (
	testsPrefix       = "test"
	toolsPrefix       = "hack"
	testHelpersPrefix = "internal/testing"
)

// pkg is one package of the module and what it imports.
type pkg struct {
	// Path is relative to the module ("server", "registry/resourceslice").
	Path string
	// Imports of the package itself, and of its test files, relative to
	// the module; imports from outside the module are left out.
	Imports, TestImports []string
}

// placement is where a package sits in the layers.
type placement struct {
	layer int
	group string
}

// place finds the layer of a module-relative package path.
func place(p string) (placement, bool) {
	best, found := placement{}, false
	for i, layer := range layers {
		for _, prefix := range layer {
			if under(p, prefix) && (!found || len(prefix) > len(best.group)) {
				best, found = placement{layer: i, group: prefix}, true
			}
		}
	}
	return best, found
}

// under reports whether p is prefix or inside it.
func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

// isTestHelper reports whether a package exists to help tests.
func isTestHelper(p string) bool {
	return under(p, testsPrefix) || under(p, testHelpersPrefix) || strings.HasSuffix(path.Base(p), "testing")
}

// check returns one line per import that points the wrong way, and one per
// package that sits in no layer.
func check(pkgs []pkg) []string {
	var problems []string
	for _, p := range pkgs {
		if under(p.Path, testsPrefix) || under(p.Path, toolsPrefix) || under(p.Path, testHelpersPrefix) {
			continue
		}
		from, ok := place(p.Path)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: not in any layer; add its directory to the layers (and to docs/architecture.md)", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if msg := checkImport(p.Path, from, imp, isTestHelper(p.Path)); msg != "" {
				problems = append(problems, msg)
			}
		}
		for _, imp := range p.TestImports {
			if to, ok := place(imp); ok && from.layer >= apiTier && to.layer >= apiTier {
				continue
			}
			if msg := checkImport(p.Path+" (tests)", from, imp, true); msg != "" {
				problems = append(problems, msg)
			}
		}
	}
	return problems
}

// checkImport says what is wrong with importer importing imp, or "".
func checkImport(importer string, from placement, imp string, forTests bool) string {
	switch {
	case under(imp, testsPrefix) || under(imp, toolsPrefix):
		return fmt.Sprintf("%s imports %s: only test/ may import tests and tools", importer, imp)
	case under(imp, testHelpersPrefix):
		if forTests {
			return ""
		}
		return fmt.Sprintf("%s imports %s: test helpers are for tests only", importer, imp)
	}
	to, ok := place(imp)
	switch {
	case !ok:
		return fmt.Sprintf("%s imports %s, which is in no layer", importer, imp)
	case to.group == from.group || to.layer > from.layer:
		return ""
	case to.layer == from.layer:
		return fmt.Sprintf("%s imports %s: %s and %s are side by side and must not import each other", importer, imp, from.group, to.group)
	default:
		return fmt.Sprintf("%s imports %s: %s is above %s", importer, imp, to.group, from.group)
	}
}

// order is the layers as one line, top first.
func order() string {
	var parts []string
	for _, layer := range layers {
		if len(layer) == 1 {
			parts = append(parts, layer[0])
		} else {
			parts = append(parts, "{"+strings.Join(layer, ", ")+"}")
		}
	}
	return strings.Join(parts, " -> ")
}
