// Package lint holds the house rules that can be checked mechanically, as tests.
package lint

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/latch-authz/latch/"

// forbidden lists, per layer, the import path prefixes its packages must not depend on,
// directly or transitively: the engine, schema and store layers do no network or SQL
// I/O and know nothing of the wire protos or the CLI (DESIGN.md, "Layers").
var forbidden = map[string][]string{
	"internal/engine": {"google.golang.org/grpc", "net/http", "database/sql", "github.com/jackc/pgx", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/server", module + "internal/cli"},
	"internal/schema": {"google.golang.org/grpc", "net/http", "database/sql", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/engine", module + "internal/store", module + "internal/server", module + "internal/cli"},
	"internal/store":  {"google.golang.org/grpc", "net/http", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/engine", module + "internal/server", module + "internal/cli"},
	"internal/rel":    {"google.golang.org/grpc", "net/http", "github.com/authzed/authzed-go", module + "internal/"},
	"internal/caveat": {"google.golang.org/grpc", "net/http", "github.com/authzed/authzed-go", module + "internal/"},
	"internal/server": {module + "internal/cli"},
}

// directOnly lists bans checked on a package's own imports only: well-kept libraries we
// depend on (pebble reports through sentry) link net/http without latch serving or
// calling anything over it.
var directOnly = map[string]bool{"net/http": true}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func TestLayerImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, d := range p.Imports {
			if isTestSupport(d) && !isTestSupport(p.ImportPath) {
				t.Errorf("%s imports %s: test-support packages are for tests only", p.ImportPath, d)
			}
		}
		for layer, bans := range forbidden {
			if rel != layer && !strings.HasPrefix(rel, layer+"/") {
				continue
			}
			checked++
			for _, ban := range bans {
				deps := p.Deps
				if directOnly[ban] {
					deps = p.Imports
				}
				for _, d := range deps {
					if strings.HasPrefix(d, ban) && !allowedSelf(rel, d) {
						t.Errorf("%s depends on %s: layer %s must not import %s", p.ImportPath, d, layer, ban)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked: the module path or layout changed")
	}
}

// testSupport lists the packages that exist for tests: a store conformance suite, a
// throwaway PostgreSQL, random schemas and data.
var testSupport = []string{"internal/store/storetest", "internal/store/postgres/pgtest", "internal/engine/enginetest"}

// isTestSupport reports whether path is a test-support package. go list's Imports leaves
// out _test.go files, so an import of one that it lists is from code that would ship.
func isTestSupport(path string) bool {
	return slices.Contains(testSupport, strings.TrimPrefix(path, module))
}

// allowedSelf lets a layer import its own sub-packages and the layers below it that
// a ban on module+"internal/" would otherwise catch.
func allowedSelf(pkgPath, dep string) bool {
	d := strings.TrimPrefix(dep, module)
	top := strings.SplitN(pkgPath, "/", 3)
	return len(top) >= 2 && strings.HasPrefix(d, top[0]+"/"+top[1])
}
