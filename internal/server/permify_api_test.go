package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// permifyPost sends a Permify API request to the server's HTTP listener.
func permifyPost(t *testing.T, ts *testServer, key, path string, body any) (int, map[string]any) {
	t.Helper()
	code, out, err := permifyDo(ts, key, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, out
}

// permifyDo is permifyPost for goroutines other than the test's.
func permifyDo(ts *testServer, key, path string, body any) (int, map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+path, bytes.NewReader(raw))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, nil, fmt.Errorf("%s: %q is not JSON", path, data)
	}
	return resp.StatusCode, out, nil
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

// TestPermifyTenantsSurviveRestarts: on every durable store, a tenant created
// through the API keeps its schema and every acknowledged write across a restart, its
// data is invisible to other tenants through every endpoint, and deleting it removes
// its data.
func TestPermifyTenantsSurviveRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	pgURI := ""
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) func(*Config)
		gone   func(t *testing.T) bool // whether the deleted tenant's data is gone
	}{
		{
			"pebble",
			func(*testing.T) func(*Config) {
				return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", dir }
			},
			func(t *testing.T) bool {
				_, err := os.Stat(filepath.Join(dir+".tenants", "acme"))
				return errors.Is(err, fs.ErrNotExist)
			},
		},
		{
			"postgres",
			func(t *testing.T) func(*Config) {
				pgURI = pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
				return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "postgres", pgURI }
			},
			func(t *testing.T) bool {
				conn, err := pgx.Connect(ctxT(t), pgURI)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				var n int
				if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'latch\_tenant\_%'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n == 1 // beta's is left
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := tc.config(t)
			ts := start(t, config)
			writeTenants(t, ts)
			ts.stop(t)

			ts = start(t, config)
			checkTenants(t, ts)
			deleteTenant(t, ts, "acme")
			if !tc.gone(t) {
				t.Error("the deleted tenant's data is still there")
			}
			if code, _ := tenantCheck(t, ts, "acme", "ann"); code != http.StatusNotFound {
				t.Errorf("check in the deleted tenant: %d", code)
			}
			ts.stop(t)
			ts = start(t, config)
			if code, out := permifyPost(t, ts, testKey, "/v1/tenants/list", nil); code != http.StatusOK || len(out["tenants"].([]any)) != 2 {
				t.Errorf("tenants after the delete and a restart: %d %v", code, out)
			}
			if !t.Failed() {
				t.Logf("reliability: permify tenants on %s: 301 acknowledged writes in 2 tenants, all there after a restart, isolated; a deleted tenant's data gone, also after a restart", tc.name)
			}
		})
	}
}

const tenantSchema = "entity user {}\nentity doc { relation owner @user permission view = owner }"

// writeTenants creates tenants acme and beta with the same schema: acme's doc:N is
// owned by ann (300 relationships, each write acknowledged), beta's doc:1 by bob.
func writeTenants(t *testing.T, ts *testServer) {
	t.Helper()
	tuple := func(doc int, user string) map[string]any {
		return map[string]any{"entity": map[string]any{"type": "doc", "id": strconv.Itoa(doc)}, "relation": "owner", "subject": map[string]any{"type": "user", "id": user}}
	}
	for _, id := range []string{"acme", "beta"} {
		if code, out := permifyPost(t, ts, testKey, "/v1/tenants/create", map[string]any{"id": id, "name": id}); code != http.StatusOK {
			t.Fatalf("create %s: %d %v", id, code, out)
		}
		if code, out := permifyPost(t, ts, testKey, "/v1/tenants/"+id+"/schemas/write", map[string]any{"schema": tenantSchema}); code != http.StatusOK {
			t.Fatalf("schemas/write: %d %v", code, out)
		}
	}
	for batch := range 30 {
		var tuples []any
		for i := range 10 {
			tuples = append(tuples, tuple(batch*10+i, "ann"))
		}
		if code, out := permifyPost(t, ts, testKey, "/v1/tenants/acme/data/write", map[string]any{"tuples": tuples}); code != http.StatusOK || out["snap_token"] == "" {
			t.Fatalf("data/write: %d %v", code, out)
		}
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/beta/data/write", map[string]any{"tuples": []any{tuple(1, "bob")}}); code != http.StatusOK {
		t.Fatalf("data/write: %d %v", code, out)
	}
}

// deleteTenant deletes tenant id through Permify's API.
func deleteTenant(t *testing.T, ts *testServer, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, "http://"+ts.httpAddr+"/v1/tenants/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("delete %s: %v %v", id, resp, err)
	}
	resp.Body.Close()
}

func tenantCheck(t *testing.T, ts *testServer, tenant, user string) (int, map[string]any) {
	return permifyPost(t, ts, testKey, "/v1/tenants/"+tenant+"/permissions/check", map[string]any{
		"metadata": map[string]any{"depth": 20},
		"entity":   map[string]any{"type": "doc", "id": "1"}, "permission": "view", "subject": map[string]any{"type": "user", "id": user},
	})
}

// checkTenants holds each tenant to its own data after a restart, through checks,
// both lookups, reads, and the SpiceDB API's tenant t1.
func checkTenants(t *testing.T, ts *testServer) {
	t.Helper()
	for _, c := range []struct {
		tenant, user, want string
	}{
		{"acme", "ann", "CHECK_RESULT_ALLOWED"},
		{"acme", "bob", "CHECK_RESULT_DENIED"},
		{"beta", "bob", "CHECK_RESULT_ALLOWED"},
		{"beta", "ann", "CHECK_RESULT_DENIED"},
	} {
		if code, out := tenantCheck(t, ts, c.tenant, c.user); code != http.StatusOK || out["can"] != c.want {
			t.Errorf("%s: check doc:1 view for %s: %d %v, want %s", c.tenant, c.user, code, out, c.want)
		}
	}
	for tenant, want := range map[string]int{"acme": 300, "beta": 0} {
		code, out := permifyPost(t, ts, testKey, "/v1/tenants/"+tenant+"/permissions/lookup-entity", map[string]any{
			"metadata": map[string]any{"depth": 20}, "entity_type": "doc", "permission": "view", "subject": map[string]any{"type": "user", "id": "ann"},
		})
		if ids, _ := out["entity_ids"].([]any); code != http.StatusOK || len(ids) != want {
			t.Errorf("%s: lookup-entity for ann: %d, %d ids, want %d", tenant, code, len(ids), want)
		}
	}
	code, out := permifyPost(t, ts, testKey, "/v1/tenants/beta/permissions/lookup-subject", map[string]any{
		"metadata": map[string]any{"depth": 20}, "entity": map[string]any{"type": "doc", "id": "2"}, "permission": "view",
		"subject_reference": map[string]any{"type": "user"},
	})
	if ids, _ := out["subject_ids"].([]any); code != http.StatusOK || len(ids) != 0 {
		t.Errorf("beta: lookup-subject on doc:2 (acme's): %d %v", code, out)
	}
	code, out = permifyPost(t, ts, testKey, "/v1/tenants/beta/data/relationships/read", map[string]any{
		"metadata": map[string]any{}, "filter": map[string]any{"entity": map[string]any{"type": "doc"}},
	})
	if tuples, _ := out["tuples"].([]any); code != http.StatusOK || len(tuples) != 1 {
		t.Errorf("beta: read relationships: %d %v, want its one tuple", code, out)
	}
	resp, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("doc", "1"), Permission: "view", Subject: sub("user", "ann", ""),
	})
	if err == nil && resp.Permissionship == v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Error("the SpiceDB API's t1 sees tenant acme's data")
	}
}

// TestPermifyTenantsShareConnections: on PostgreSQL, tenants use the server's own
// connection pools. Fifty tenants, written and checked concurrently, leave no more of
// latch's sessions on the database than those pools hold, and each tenant's checks
// see its own data and not its neighbour's.
func TestPermifyTenantsShareConnections(t *testing.T) {
	const tenants, workers, conns = 50, 8, 4
	uri := pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
	ts := start(t, func(c *Config) {
		c.DatastoreEngine, c.DatastoreURI, c.ReadConns, c.WriteConns = "postgres", uri, conns, conns
	})
	ids := make([]string, tenants)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant%02d", i)
		if code, out := permifyPost(t, ts, testKey, "/v1/tenants/create", map[string]any{"id": ids[i], "name": ids[i]}); code != http.StatusOK {
			t.Fatalf("create %s: %d %v", ids[i], code, out)
		}
	}
	jobs := make(chan int)
	errs := make(chan error, tenants)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				errs <- useTenant(ts, ids[i], ids[(i+1)%tenants])
			}
		}()
	}
	for i := range ids {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	conn, err := pgx.Connect(ctxT(t), uri)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var sessions int
	err = conn.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name IN ('latch-read', 'latch-write')`).Scan(&sessions)
	if err != nil {
		t.Fatal(err)
	}
	if sessions > 2*conns {
		t.Errorf("%d latch sessions on the database with %d tenants; want at most %d, the server's pools", sessions, tenants, 2*conns)
	}
	t.Logf("reliability: %d Permify tenants on PostgreSQL, used concurrently: %d latch sessions on the database (pools of %d+%d), no tenant saw another's data", tenants, sessions, conns, conns)
}

// useTenant writes tenant id's schema and doc:1 owned by user:id, then checks that
// id's owner may view it and other's may not.
func useTenant(ts *testServer, id, other string) error {
	steps := []struct {
		path string
		body map[string]any
		want string // the check's answer, for checks
	}{
		{path: "/schemas/write", body: map[string]any{"schema": tenantSchema}},
		{path: "/data/write", body: map[string]any{"tuples": []any{map[string]any{
			"entity": map[string]any{"type": "doc", "id": "1"}, "relation": "owner", "subject": map[string]any{"type": "user", "id": id},
		}}}},
		{path: "/permissions/check", body: ownerCheck(id), want: "CHECK_RESULT_ALLOWED"},
		{path: "/permissions/check", body: ownerCheck(other), want: "CHECK_RESULT_DENIED"},
	}
	for _, s := range steps {
		code, out, err := permifyDo(ts, testKey, "/v1/tenants/"+id+s.path, s.body)
		if err == nil && (code != http.StatusOK || s.want != "" && out["can"] != s.want) {
			err = fmt.Errorf("%d %v (want %s)", code, out, s.want)
		}
		if err != nil {
			return fmt.Errorf("tenant %s: %s: %w", id, s.path, err)
		}
	}
	return nil
}

func ownerCheck(user string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"depth": 20},
		"entity":   map[string]any{"type": "doc", "id": "1"}, "permission": "view", "subject": map[string]any{"type": "user", "id": user},
	}
}

// TestPermifyOlderSchemaVersion: a Permify check on t1 that runs with an older schema
// (schema_version) than the one in force at its snapshot gets evaluation's answer under
// that schema, whatever the cache and the index hold for the newer one, and the newer
// one's answers are not those of the older: the older schema's group#member admits
// users only, so the nested group the newer one allowed is not followed.
func TestPermifyOlderSchemaVersion(t *testing.T) {
	const older = "entity user {}\nentity group { relation member @user }\nentity document { relation viewer @group#member permission view = viewer }"
	const newer = "entity user {}\nentity group { relation member @user @group#member }\nentity document { relation viewer @group#member permission view = viewer }"
	for _, indexed := range []bool{true, false} {
		ts := start(t, func(c *Config) { c.MaterializeDisabled = !indexed })
		var version any
		for _, src := range []string{older, newer} {
			code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/schemas/write", map[string]any{"schema": src})
			if code != http.StatusOK {
				t.Fatalf("schema write: %d %v", code, out)
			}
			if version == nil {
				version = out["schema_version"]
			}
		}
		written := ts.write(t, relationship("group", "a", "member", "group", "b", "member"), relationship("group", "b", "member", "user", "u", ""),
			relationship("document", "d", "viewer", "group", "a", "member"))
		if indexed {
			awaitIndex(t, ts)
		}
		for _, c := range []struct {
			version any
			want    string
		}{{"", "CHECK_RESULT_ALLOWED"}, {version, "CHECK_RESULT_DENIED"}, {"", "CHECK_RESULT_ALLOWED"}, {version, "CHECK_RESULT_DENIED"}} {
			code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", map[string]any{
				"metadata": map[string]any{"depth": 20, "schema_version": c.version, "snap_token": written.GetToken()},
				"entity":   map[string]any{"type": "document", "id": "d"}, "permission": "view", "subject": map[string]any{"type": "user", "id": "u"},
			})
			if code != http.StatusOK || out["can"] != c.want {
				t.Fatalf("index %v, schema_version %q: %d %v, want %s", indexed, c.version, code, out, c.want)
			}
		}
	}
}
