package dataplane_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasOneDoc: every package of the module says what it
// owns and who may import it in exactly one package doc comment.
func TestEveryPackageHasOneDoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[2] == "" {
			continue
		}
		pkg, dir, docs := f[0], f[1], 0
		for _, name := range strings.Fields(f[2]) {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.TrimSpace(file.Doc.Text()) != "" {
				docs++
			}
		}
		checked++
		switch {
		case docs == 0:
			t.Errorf("package %s has no doc comment", pkg)
		case docs > 1:
			t.Errorf("package %s has %d doc comments; keep one", pkg, docs)
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked")
	}
}
