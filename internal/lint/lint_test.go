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

// offline is what a package below the network face must not depend on: it serves and
// calls nothing over the network and knows nothing of the wire protos, the server or
// the CLI.
var offline = []string{"google.golang.org/grpc", "net/http", "github.com/authzed/authzed-go", module + "internal/server", module + "internal/cli"}

// forbidden lists, per layer, the import path prefixes its packages must not depend on,
// directly or transitively: the engine, schema and store layers do no network or SQL
// I/O and know nothing of the wire protos or the CLI (docs/ARCHITECTURE.md, "Layers").
var forbidden = map[string][]string{
	"internal/engine": {"google.golang.org/grpc", "net/http", "database/sql", "github.com/jackc/pgx", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/server", module + "internal/cli", module + "internal/materialize"},
	"internal/schema": {"google.golang.org/grpc", "net/http", "database/sql", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/engine", module + "internal/store", module + "internal/server", module + "internal/cli"},
	"internal/store":  {"google.golang.org/grpc", "net/http", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/engine", module + "internal/server", module + "internal/cli"},
	"internal/rel":    {"google.golang.org/grpc", "net/http", "github.com/authzed/authzed-go", module + "internal/"},
	"internal/caveat": {"google.golang.org/grpc", "net/http", "github.com/authzed/authzed-go", module + "internal/"},
	// TLS configuration is plain crypto/tls over files: no wire, no other layer.
	"internal/tlsconfig": append(slices.Clone(offline), module+"internal/"),
	"internal/relv1":     {"net/http", module + "internal/engine", module + "internal/schema", module + "internal/store", module + "internal/server", module + "internal/cli"},
	"internal/server":    {module + "internal/cli"},
	// The cluster carries the engine's subproblems between nodes over its own gRPC
	// service: no API protos, no HTTP, no SQL, and nothing of the server or the CLI.
	"internal/cluster": {"net/http", "database/sql", "github.com/jackc/pgx", "github.com/spf13/cobra", "github.com/authzed/authzed-go", module + "internal/server", module + "internal/cli"},
	// The syntax tree sits below the checker and the IR; the compiled IR, which the
	// engine imports, knows nothing of the syntax tree or of the compiler.
	"internal/schema/ast": {module + "internal/"},
	"internal/schema/ir":  {module + "internal/schema/"},
	// Permify's data model and the validation files run without a network face: they
	// call the engine and a store directly. So do the rules the server applies.
	"internal/permdata": offline,
	// OpenFGA's data model speaks in the openfga/api protos, whose package carries its
	// gRPC service and gateway: it may link them, never the server, the CLI or
	// authzed-go, and serves nothing itself.
	"internal/fga":            {"net/http", "github.com/authzed/authzed-go", module + "internal/server", module + "internal/cli"},
	"internal/validationfile": offline,
	"internal/revision":       offline,
	"internal/relcounter":     offline,
	"internal/schemachange":   append(slices.Clone(offline), module+"internal/engine"),
	// The index of nested sets reads a store and a compiled schema; the engine consults
	// it through engine.SetIndex without either importing the other.
	"internal/materialize": append(slices.Clone(offline), module+"internal/engine", module+"internal/store/", module+"internal/schema/zed", module+"internal/schema/perm", module+"internal/schema/check"),
	"internal/runtime":     append(slices.Clone(offline), module+"internal/"),
	// The load tool is a client of the server (and may start one in-process); its data
	// sets and distributions are plain generators.
	"internal/bench":         {module + "internal/cli"},
	"internal/bench/dataset": append(slices.Clone(offline), module+"internal/store", module+"internal/engine", module+"internal/schema"),
	"internal/bench/dist":    append(slices.Clone(offline), module+"internal/"),
	// An example is a client any application could have written: the public
	// libraries only, nothing of latch's own packages.
	"examples": {module + "internal/", module + "cmd/"},
}

// protoImporters are the packages that may import the authzed-go protos themselves:
// the gRPC server, the CLI, the load tool and the examples (all clients of it), and
// relv1, the one conversion between relationships and their wire form that the
// others share.
var protoImporters = []string{"internal/server", "internal/cli", "internal/bench", "internal/relv1", "examples"}

// directOnly lists bans checked on a package's own imports only: well-kept libraries we
// depend on (pebble reports through sentry) link net/http without latch serving or
// calling anything over it.
var directOnly = map[string]bool{"net/http": true}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// packages lists the module's packages with their imports.
func packages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package: the module path or layout changed")
	}
	return pkgs
}

// within reports whether the package path p is dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func TestLayerImports(t *testing.T) {
	checked := 0
	for _, p := range packages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, d := range p.Imports {
			if isTestSupport(d) && !isTestSupport(p.ImportPath) {
				t.Errorf("%s imports %s: test-support packages are for tests only", p.ImportPath, d)
			}
		}
		for layer, bans := range forbidden {
			if !within(rel, layer) {
				continue
			}
			checked++
			for _, ban := range bans {
				deps := p.Deps
				if directOnly[ban] {
					deps = p.Imports
				}
				for _, d := range deps {
					if strings.HasPrefix(d, ban) && !allowedSelf(layer, d) {
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

// allowedSelf lets a layer import its own packages, which a ban on a prefix of the
// layer's path (module+"internal/") would otherwise catch.
func allowedSelf(layer, dep string) bool {
	d := strings.TrimPrefix(dep, module)
	return within(d, layer)
}

func TestProtoImporters(t *testing.T) {
	for _, p := range packages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		allowed := false
		for _, dir := range protoImporters {
			allowed = allowed || within(rel, dir)
		}
		if allowed {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/authzed/authzed-go/") {
				t.Errorf("%s imports %s: only %v speak the wire protos", p.ImportPath, imp, protoImporters)
			}
		}
	}
}
