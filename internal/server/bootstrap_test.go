package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

const bootstrapFile = `schema: |-
  definition user {}
  definition doc {
    relation viewer: user
    permission view = viewer
  }
relationships: |-
  doc:a#viewer@user:ann
`

// TestBootstrapFiles: --datastore-bootstrap-files loads a schema and relationships into
// an empty datastore, leaves a datastore that has a schema alone on a restart, and
// replaces it with BootstrapOverwrite.
func TestBootstrapFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "boot.yaml")
	if err := os.WriteFile(file, []byte(bootstrapFile), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	boot := func(overwrite bool) func(*Config) {
		return func(c *Config) {
			c.DatastoreEngine, c.DatastoreURI = "pebble", data
			c.BootstrapFiles, c.BootstrapOverwrite = []string{file}, overwrite
		}
	}
	view := func(ts *testServer, user string) v1.CheckPermissionResponse_Permissionship {
		t.Helper()
		resp, err := ts.check(t, fullyConsistent(), obj("doc", "a"), "view", sub("user", user, ""))
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		return resp.GetPermissionship()
	}
	ts := start(t, boot(false))
	if got := view(ts, "ann"); got != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("after bootstrap, ann's view = %v", got)
	}
	ts.write(t, relationship("doc", "a", "viewer", "user", "bob", ""))
	ts.stop(t)

	ts = start(t, boot(false))
	if got := view(ts, "bob"); got != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("a restart with bootstrap files lost bob's relationship: %v", got)
	}
	ts.stop(t)

	ts = start(t, boot(true))
	if got := view(ts, "bob"); got != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
		t.Fatalf("with overwrite, bob's relationship should be gone: %v", got)
	}
	if got := view(ts, "ann"); got != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("with overwrite, ann's view = %v", got)
	}
	ts.stop(t)

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(bootstrapFile, "doc:a#viewer@user:ann", "doc:a#editor@user:ann", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", PresharedKeys: []string{testKey}, DatastoreEngine: "memory", BootstrapFiles: []string{bad}})
	if err == nil || !strings.Contains(err.Error(), "doc:a#editor@user:ann") {
		t.Fatalf("a bootstrap file with a relationship the schema lacks: %v, want an error naming it", err)
	}
}
