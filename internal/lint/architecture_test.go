package lint

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archDoc is the map of record, relative to this package's directory.
const archDoc = "../../docs/ARCHITECTURE.md"

var (
	// listedPackage matches a line of the "Packages" section: "- `internal/x` — ...".
	listedPackage = regexp.MustCompile("^- `((?:cmd|internal|examples)/[a-z0-9_/-]+)` — ")
	// packagePath matches a package path anywhere in the document: in prose, code spans
	// or the layer diagram. A match followed by a file extension names a file, not a
	// package, and is skipped.
	packagePath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:cmd|internal|examples)(?:/[a-z0-9_-]+)+)(\.[a-z]+)?`)
)

// TestArchitectureDocNamesEveryPackage fails when a Go package exists that
// docs/ARCHITECTURE.md does not list under "Packages", when the list names a package
// twice, or when the document names a package path that does not exist: the map must
// tell the truth about the house.
func TestArchitectureDocNamesEveryPackage(t *testing.T) {
	src, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, p := range packages(t) {
		exists[strings.TrimPrefix(p.ImportPath, module)] = true
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		m := listedPackage.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if listed[m[1]] {
			t.Errorf("%s lists %s twice", archDoc, m[1])
		}
		listed[m[1]] = true
	}
	var missing []string
	for p := range exists {
		if !listed[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("package %s exists but %s does not list it under Packages (one line: \"- `%s` — what it owns\")", p, archDoc, p)
	}
	named := map[string]bool{}
	for _, m := range packagePath.FindAllStringSubmatch(string(src), -1) {
		if m[2] == "" {
			named[m[1]] = true
		}
	}
	for p := range listed {
		named[p] = true
	}
	var gone []string
	for p := range named {
		if !exists[p] {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range gone {
		t.Errorf("%s names %s, which is not a package of this module", archDoc, p)
	}
}
