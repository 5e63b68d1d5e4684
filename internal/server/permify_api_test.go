package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// permifyPost sends a Permify API request to the server's HTTP listener.
func permifyPost(t *testing.T, ts *testServer, key, path string, body any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+path, bytes.NewReader(raw))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %q is not JSON", path, data)
	}
	return resp.StatusCode, out
}

func TestPermifyAPIOnTheHTTPListener(t *testing.T) {
	ts := start(t, nil)
	code, out := permifyPost(t, ts, "", "/v1/tenants/t1/schemas/write", map[string]any{"schema": "entity user {}"})
	if code != http.StatusUnauthorized || out["message"] != "ERROR_CODE_MISSING_BEARER_TOKEN" {
		t.Errorf("without a key: %d %v", code, out)
	}
	if code, out = permifyPost(t, ts, "wrong", "/v1/tenants/list", nil); code != http.StatusForbidden {
		t.Errorf("with a wrong key: %d %v", code, out)
	}
	schema := "entity user {}\nentity doc { relation owner @user attribute is_public boolean permission view = owner or is_public }"
	if code, out = permifyPost(t, ts, testKey, "/v1/tenants/t1/schemas/write", map[string]any{"schema": schema}); code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	code, out = permifyPost(t, ts, testKey, "/v1/tenants/t1/data/write", map[string]any{
		"tuples":     []any{map[string]any{"entity": map[string]any{"type": "doc", "id": "1"}, "relation": "owner", "subject": map[string]any{"type": "user", "id": "alice"}}},
		"attributes": []any{map[string]any{"entity": map[string]any{"type": "doc", "id": "2"}, "attribute": "is_public", "value": map[string]any{"boolean": true}}},
	})
	if code != http.StatusOK {
		t.Fatalf("data/write: %d %v", code, out)
	}
	snap := out["snap_token"]
	code, out = permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", map[string]any{
		"metadata": map[string]any{"snap_token": snap, "depth": 20},
		"entity":   map[string]any{"type": "doc", "id": "1"}, "permission": "view", "subject": map[string]any{"type": "user", "id": "alice"},
	})
	if code != http.StatusOK || out["can"] != "CHECK_RESULT_ALLOWED" {
		t.Errorf("check: %d %v", code, out)
	}

	// Tenant t1 is the store the SpiceDB API serves: same schema, same data, same answers.
	ctx := context.Background()
	for _, c := range []struct {
		doc, user string
		want      v1.CheckPermissionResponse_Permissionship
	}{
		{"1", "alice", v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION},
		{"2", "bob", v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION},
		{"1", "bob", v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION},
	} {
		resp, err := ts.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
			Consistency: &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}},
			Resource:    &v1.ObjectReference{ObjectType: "doc", ObjectId: c.doc}, Permission: "view",
			Subject: &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: "user", ObjectId: c.user}},
		})
		if err != nil || resp.Permissionship != c.want {
			t.Errorf("SpiceDB check doc:%s#view@user:%s = %v, %v; want %v", c.doc, c.user, resp.GetPermissionship(), err, c.want)
		}
	}

	// Another tenant is invisible to the SpiceDB API and to t1.
	if code, out = permifyPost(t, ts, testKey, "/v1/tenants/create", map[string]any{"id": "t2"}); code != http.StatusOK {
		t.Fatalf("create: %d %v", code, out)
	}
	if code, _ = permifyPost(t, ts, testKey, "/v1/tenants/t2/schemas/write", map[string]any{"schema": "entity user {}\nentity other { relation owner @user }"}); code != http.StatusOK {
		t.Fatalf("t2 schema: %d", code)
	}
	rs, err := ts.schema.ReadSchema(ctx, &v1.ReadSchemaRequest{})
	if err != nil || bytes.Contains([]byte(rs.GetSchemaText()), []byte("other")) {
		t.Errorf("SpiceDB ReadSchema sees t2: %v %q", err, rs.GetSchemaText())
	}
	// The SpiceDB gateway still serves its own paths on the same listener.
	req, _ := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+"/v1/schema/read", bytes.NewReader([]byte("{}")))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("SpiceDB gateway /v1/schema/read: %d", resp.StatusCode)
	}
}

// TestPermifyTenantsSurviveRestarts: on pebble, a tenant created through the API keeps
// its schema and data across a restart, and deleting it removes its data.
func TestPermifyTenantsSurviveRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	onPebble := func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", dir }
	check := func(ts *testServer) (int, map[string]any) {
		return permifyPost(t, ts, testKey, "/v1/tenants/acme/permissions/check", map[string]any{
			"metadata": map[string]any{"depth": 20},
			"entity":   map[string]any{"type": "doc", "id": "1"}, "permission": "view", "subject": map[string]any{"type": "user", "id": "ann"},
		})
	}
	ts := start(t, onPebble)
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/create", map[string]any{"id": "acme", "name": "Acme"}); code != http.StatusOK {
		t.Fatalf("create: %d %v", code, out)
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/acme/schemas/write", map[string]any{"schema": "entity user {}\nentity doc { relation owner @user permission view = owner }"}); code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/acme/data/write", map[string]any{
		"tuples": []any{map[string]any{"entity": map[string]any{"type": "doc", "id": "1"}, "relation": "owner", "subject": map[string]any{"type": "user", "id": "ann"}}},
	}); code != http.StatusOK {
		t.Fatalf("data/write: %d %v", code, out)
	}
	ts.stop(t)

	ts = start(t, onPebble)
	if code, out := check(ts); code != http.StatusOK || out["can"] != "CHECK_RESULT_ALLOWED" {
		t.Errorf("check after a restart: %d %v", code, out)
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/list", nil); code != http.StatusOK || len(out["tenants"].([]any)) != 2 {
		t.Errorf("tenants after a restart: %d %v", code, out)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+ts.httpAddr+"/v1/tenants/acme", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(dir+".tenants", "acme")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the deleted tenant's data is still there: %v", err)
	}
	if code, _ := check(ts); code != http.StatusNotFound {
		t.Errorf("check in the deleted tenant: %d", code)
	}
}
