package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestUndocumentedDirs: a top-level directory the README's Layout section
// does not name is reported; hidden ones, _output and files are not, and
// a name outside the section does not count.
func TestUndocumentedDirs(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"cmd", "driver", "codec", ".git", "_output"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readme := "# x\n\n`codec/` is named before the section.\n\n## Layout\n\n- `cmd/`: commands.\n- `driver/`: the library.\n\n## Other\n\n- `codec/`\n"
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing, err := undocumentedDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"codec"}) {
		t.Errorf("undocumented %v, want [codec]", missing)
	}
}

// TestRepositoryLayoutDocumented runs the check on this repository.
func TestRepositoryLayoutDocumented(t *testing.T) {
	missing, err := undocumentedDirs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("README.md's Layout section lacks %v", missing)
	}
}
