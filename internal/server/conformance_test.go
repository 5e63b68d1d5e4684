package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// conformanceFile is one SpiceDB validation file (../shared/conformance/README.md).
type conformanceFile struct {
	Schema        string `yaml:"schema"`
	Relationships string `yaml:"relationships"`
	Assertions    struct {
		True     []string `yaml:"assertTrue"`
		False    []string `yaml:"assertFalse"`
		Caveated []string `yaml:"assertCaveated"`
	} `yaml:"assertions"`
}

// conformanceDir finds ../shared/conformance/spicedb beside the module root.
func conformanceDir(t *testing.T) string {
	t.Helper()
	return sharedPath(t, "conformance", "spicedb")
}

// sharedPath is a file or folder of ../shared beside the module root. The test is
// skipped when it is missing, unless in CI (CI=true), where that is a failure.
func sharedPath(t *testing.T, elem ...string) string {
	t.Helper()
	path := filepath.Join(append([]string{moduleRoot(t), "..", "shared"}, elem...)...)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must have ../shared beside the repository", path)
		}
		t.Skipf("%s is missing (../shared is not beside the repository); skipping", path)
	}
	return path
}

// moduleRoot is the directory of go.mod above the test's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// conformanceStores are the datastores every conformance file runs against, each
// setting up a fresh, empty store for one test.
var conformanceStores = []struct {
	name  string
	setup func(t *testing.T, c *Config)
}{
	{"memory", func(t *testing.T, c *Config) { c.DatastoreEngine = "memory" }},
	{"pebble", func(t *testing.T, c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", t.TempDir() }},
	{"postgres", func(t *testing.T, c *Config) {
		c.DatastoreEngine = "postgres"
		c.DatastoreURI = pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
	}},
}

// conformanceFiles reads every SpiceDB validation file, named by its file name.
func conformanceFiles(t *testing.T) []namedConformanceFile {
	t.Helper()
	dir := conformanceDir(t)
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no conformance files in %s: %v", dir, err)
	}
	files := make([]namedConformanceFile, len(paths))
	for i, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[i].name = strings.TrimSuffix(filepath.Base(path), ".yaml")
		if err := yaml.Unmarshal(raw, &files[i].conformanceFile); err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
	}
	return files
}

type namedConformanceFile struct {
	name string
	conformanceFile
}

// TestSpiceDBConformance runs every SpiceDB validation file through the gRPC API on
// every datastore: write its schema and relationships, then check each assertion.
func TestSpiceDBConformance(t *testing.T) {
	files := conformanceFiles(t)
	for _, st := range conformanceStores {
		t.Run(st.name, func(t *testing.T) {
			for _, f := range files {
				t.Run(f.name, func(t *testing.T) {
					runConformance(t, f.conformanceFile, func(c *Config) { st.setup(t, c) })
				})
			}
		})
	}
}

func runConformance(t *testing.T, cf conformanceFile, setup func(*Config)) {
	ts := start(t, func(c *Config) {
		c.HTTPAddr = ""
		setup(c)
	})
	ts.loadConformance(t, cf)
	ts.assertConformance(t, cf)
}

// loadConformance writes cf's schema and relationships.
func (ts *testServer) loadConformance(t *testing.T, cf conformanceFile) {
	t.Helper()
	ts.writeSchema(t, cf.Schema)
	var updates []*v1.RelationshipUpdate
	for _, line := range strings.Split(cf.Relationships, "\n") {
		// Validation files allow blank lines and `//` comment lines between relationships.
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		r, err := rel.Parse(line)
		if err != nil {
			t.Fatalf("relationship %q: %v", line, err)
		}
		wire, err := relationshipToV1(r)
		if err != nil {
			t.Fatalf("relationship %q: %v", line, err)
		}
		updates = append(updates, update(v1.RelationshipUpdate_OPERATION_TOUCH, wire))
	}
	for len(updates) > 0 {
		n := min(len(updates), DefaultMaxUpdatesPerWrite)
		if _, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: updates[:n]}); err != nil {
			t.Fatalf("WriteRelationships: %v", err)
		}
		updates = updates[n:]
	}
}

// assertConformance checks each of cf's assertions, and that the lookups agree with
// those that are not caveated.
func (ts *testServer) assertConformance(t *testing.T, cf conformanceFile) {
	t.Helper()
	for _, group := range []struct {
		assertions []string
		want       v1.CheckPermissionResponse_Permissionship
	}{
		{cf.Assertions.True, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION},
		{cf.Assertions.False, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION},
		{cf.Assertions.Caveated, v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION},
	} {
		for _, a := range group.assertions {
			got, err := ts.checkAssertion(t, a)
			if err != nil {
				t.Errorf("%s: %v", a, err)
			} else if got != group.want {
				t.Errorf("%s: got %s, want %s", a, got, group.want)
			}
			if group.want != v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION {
				ts.checkLookupsAgree(t, a, group.want == v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION)
			}
		}
	}
}

func (ts *testServer) checkAssertion(t *testing.T, a string) (v1.CheckPermissionResponse_Permissionship, error) {
	t.Helper()
	resource, permission, subject, checkCtx, err := rel.ParseCheck(a)
	if err != nil {
		t.Fatalf("assertion %q: %v", a, err)
	}
	req := &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(),
		Resource:    relv1.Object(resource),
		Permission:  permission,
		Subject:     relv1.Subject(subject),
	}
	if len(checkCtx) > 0 {
		if req.Context, err = structpb.NewStruct(checkCtx); err != nil {
			t.Fatalf("assertion %q context: %v", a, err)
		}
	}
	resp, err := ts.perms.CheckPermission(ctxT(t), req)
	return resp.GetPermissionship(), err
}
