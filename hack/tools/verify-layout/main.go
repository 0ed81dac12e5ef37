// Command verify-layout fails when a package of the module imports one
// above it in the layers of layout.go (the order docs/architecture.md
// documents). It reads the imports with `go list`, test imports included,
// and runs from anywhere inside the module.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const listFormat = `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}{{"\t"}}{{join .TestImports " "}} {{join .XTestImports " "}}`

func main() {
	pkgs, err := list()
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify-layout:", err)
		os.Exit(2)
	}
	problems := check(pkgs)
	missing, err := undocumentedDirs(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify-layout:", err)
		os.Exit(2)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "README.md's Layout section does not name these top-level directories (as `<dir>/`): %s\n", strings.Join(missing, ", "))
		os.Exit(1)
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "Imports must point down: "+order())
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "  "+p)
		}
		os.Exit(1)
	}
	fmt.Printf("layout ok: %d packages, imports point down %s\n", len(pkgs), order())
}

// list returns the module's packages with their imports inside the module.
func list() ([]pkg, error) {
	module, err := goList("-m")
	if err != nil {
		return nil, err
	}
	modulePath := strings.TrimSpace(string(module))
	out, err := goList("-f", listFormat, modulePath+"/...")
	if err != nil {
		return nil, err
	}
	rel := func(imports string) []string {
		var paths []string
		for _, imp := range strings.Fields(imports) {
			if r, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				paths = append(paths, r)
			}
		}
		return paths
	}
	var pkgs []pkg
	scanner := bufio.NewScanner(bytes.NewReader(out))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		fields := strings.Split(scanner.Text(), "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("unexpected go list line %q", scanner.Text())
		}
		path, ok := strings.CutPrefix(fields[0], modulePath+"/")
		if !ok {
			return nil, fmt.Errorf("package %s outside module %s", fields[0], modulePath)
		}
		pkgs = append(pkgs, pkg{Path: path, Imports: rel(fields[1]), TestImports: rel(fields[2])})
	}
	return pkgs, scanner.Err()
}

func goList(args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// undocumentedDirs returns the top-level directories of root that the
// README's "## Layout" section does not name as "`<dir>/`".
func undocumentedDirs(root string) ([]string, error) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	section, ok := layoutSection(string(readme))
	if !ok {
		return nil, fmt.Errorf("README.md has no \"## Layout\" section")
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		if !strings.Contains(section, "`"+name+"/") {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// layoutSection is the README's "## Layout" section, up to the next
// second-level heading.
func layoutSection(readme string) (string, bool) {
	_, rest, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return "", false
	}
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest, true
}
