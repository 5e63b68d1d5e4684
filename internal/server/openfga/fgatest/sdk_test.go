package fgatest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fgasdk "github.com/openfga/go-sdk"
	"github.com/openfga/go-sdk/client"
	"github.com/openfga/go-sdk/credentials"
	"github.com/openfga/language/pkg/go/transformer"
)

// The SDK releases the runs install (into the user's cache directory, once).
const (
	nodeSDK   = "@openfga/sdk@0.9.7"
	pythonSDK = "openfga-sdk==0.10.5"
)

// sdkServer is an OpenFGA API for the SDKs: its HTTP base URL.
type sdkServer struct {
	name, url string
}

// sdkServers are the servers every SDK run drives: latch, and the real OpenFGA when its
// binary is there (which proves the runs themselves right).
func sdkServers(t *testing.T) []sdkServer {
	servers := []sdkServer{{"latch", "http://" + startLatch(t).HTTPAddr}}
	if OpenFGABinary(t) != "" {
		fga := StartOpenFGA(t, "--authn-method", "preshared", "--authn-preshared-keys", testKey)
		servers = append(servers, sdkServer{"openfga", "http://" + fga.HTTPAddr})
	}
	return servers
}

// sdkModelJSON writes testdata/sdk/model.fga as the JSON WriteAuthorizationModel takes.
func sdkModelJSON(t *testing.T) string {
	t.Helper()
	dsl, err := os.ReadFile(filepath.Join("testdata", "sdk", "model.fga"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := transformer.TransformDSLToJSON(string(dsl))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNodeSDK runs testdata/sdk/node/run.mjs with @openfga/sdk from npm.
func TestNodeSDK(t *testing.T) {
	dir := sdkCache(t, "node-"+nodeSDK)
	script := filepath.Join(dir, "run.mjs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@openfga", "sdk")); err != nil {
		install(t, dir, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", nodeSDK)
	}
	// ESM resolves packages beside the script, so the script runs from the install.
	copyFile(t, filepath.Join("testdata", "sdk", "node", "run.mjs"), script)
	model := sdkModelJSON(t)
	for _, s := range sdkServers(t) {
		t.Run(s.name, func(t *testing.T) { runSDK(t, s, model, "node", script) })
	}
}

// TestPythonSDK runs testdata/sdk/python/run.py with openfga-sdk from PyPI in a venv.
func TestPythonSDK(t *testing.T) {
	dir := sdkCache(t, "python-"+pythonSDK)
	python := filepath.Join(dir, "bin", "python")
	if _, err := os.Stat(filepath.Join(dir, "installed")); err != nil {
		install(t, dir, "python3", "-m", "venv", dir)
		install(t, dir, python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", pythonSDK)
		if err := os.WriteFile(filepath.Join(dir, "installed"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs(filepath.Join("testdata", "sdk", "python", "run.py"))
	if err != nil {
		t.Fatal(err)
	}
	model := sdkModelJSON(t)
	for _, s := range sdkServers(t) {
		t.Run(s.name, func(t *testing.T) { runSDK(t, s, model, python, script) })
	}
}

// runSDK runs one SDK script against s; the script checks every answer itself.
func runSDK(t *testing.T, s sdkServer, model string, command ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), "FGA_API_URL="+s.url, "FGA_MODEL_JSON="+model, "FGA_API_TOKEN="+testKey)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v against %s: %v\n%s", command, s.name, err, out)
	}
}

// sdkCache is a directory under the user's cache for one SDK release, so that each is
// downloaded once per machine.
func sdkCache(t *testing.T, name string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory for the SDK: %v", err)
	}
	dir := filepath.Join(base, "latch", "openfga-sdk", strings.NewReplacer("@", "", "/", "-", "==", "-").Replace(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// install runs an installing command. A missing tool or an unreachable registry skips
// the test, except in CI (CI=true), where the SDK runs must not pass by skipping.
func install(t *testing.T, dir string, command ...string) {
	t.Helper()
	if _, err := exec.LookPath(command[0]); err != nil && !filepath.IsAbs(command[0]) {
		skipOrFail(t, "%s is not installed: %v", command[0], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		skipOrFail(t, "%v (the registry may be unreachable): %v\n%s", command, err, out)
	}
}

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGoSDK drives github.com/openfga/go-sdk as an application would: the same use as
// the Node and Python runs.
func TestGoSDK(t *testing.T) {
	modelPath := sdkModelJSON(t)
	modelJSON, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sdkServers(t) {
		t.Run(s.name, func(t *testing.T) { runGoSDK(t, s.url, modelJSON) })
	}
}

const sdkNow = "2026-11-27T00:00:00Z"

func runGoSDK(t *testing.T, url string, modelJSON []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fga, err := client.NewSdkClient(&client.ClientConfiguration{
		ApiUrl: url,
		Credentials: &credentials.Credentials{
			Method: credentials.CredentialsMethodApiToken,
			Config: &credentials.Config{ApiToken: testKey},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fga.CreateStore(ctx).Body(client.ClientCreateStoreRequest{Name: "go-sdk"}).Execute()
	if err != nil {
		t.Fatalf("CreateStore: %v", err)
	}
	if err := fga.SetStoreId(store.Id); err != nil {
		t.Fatal(err)
	}
	var model fgasdk.WriteAuthorizationModelRequest
	if err := json.Unmarshal(modelJSON, &model); err != nil {
		t.Fatal(err)
	}
	written, err := fga.WriteAuthorizationModel(ctx).Body(model).Execute()
	if err != nil {
		t.Fatalf("WriteAuthorizationModel: %v", err)
	}
	if err := fga.SetAuthorizationModelId(written.AuthorizationModelId); err != nil {
		t.Fatal(err)
	}
	expires := map[string]any{"expires_at": "2030-01-01T00:00:00Z"}
	_, err = fga.Write(ctx).Body(client.ClientWriteRequest{Writes: []client.ClientTupleKey{
		{User: "user:anne", Relation: "owner", Object: "document:roadmap"},
		{User: "user:beth", Relation: "member", Object: "group:eng"},
		{User: "group:eng#member", Relation: "viewer", Object: "folder:plans"},
		{User: "folder:plans", Relation: "parent", Object: "document:roadmap"},
		{User: "user:carl", Relation: "viewer", Object: "document:budget", Condition: &fgasdk.RelationshipCondition{Name: "not_expired", Context: &expires}},
		{User: "user:*", Relation: "viewer", Object: "document:handbook"},
		{User: "user:dave", Relation: "blocked", Object: "document:handbook"},
	}}).Execute()
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	goSDKChecks(ctx, t, fga)
	changes, err := fga.ReadChanges(ctx).Body(client.ClientReadChangesRequest{Type: "document"}).Execute()
	if err != nil {
		t.Fatalf("ReadChanges: %v", err)
	}
	var got []string
	for _, c := range changes.Changes {
		k := c.TupleKey
		got = append(got, string(c.Operation)+" "+k.Object+"#"+k.Relation+"@"+k.User)
	}
	expectSet(t, "document changes", got, []string{
		"TUPLE_OPERATION_WRITE document:budget#viewer@user:carl",
		"TUPLE_OPERATION_WRITE document:handbook#blocked@user:dave",
		"TUPLE_OPERATION_WRITE document:handbook#viewer@user:*",
		"TUPLE_OPERATION_WRITE document:roadmap#owner@user:anne",
		"TUPLE_OPERATION_WRITE document:roadmap#parent@folder:plans",
	})
	goSDKLists(ctx, t, fga)
}

func goSDKChecks(ctx context.Context, t *testing.T, fga *client.OpenFgaClient) {
	t.Helper()
	now := map[string]any{"current_time": sdkNow}
	later := map[string]any{"current_time": "2031-01-01T00:00:00Z"}
	checks := []struct {
		req  client.ClientCheckRequest
		want bool
	}{
		{client.ClientCheckRequest{User: "user:anne", Relation: "viewer", Object: "document:roadmap"}, true},
		{client.ClientCheckRequest{User: "user:beth", Relation: "viewer", Object: "document:roadmap"}, true},
		{client.ClientCheckRequest{User: "user:carl", Relation: "viewer", Object: "document:roadmap"}, false},
		{client.ClientCheckRequest{User: "user:carl", Relation: "viewer", Object: "document:budget", Context: &now}, true},
		{client.ClientCheckRequest{User: "user:carl", Relation: "viewer", Object: "document:budget", Context: &later}, false},
		{client.ClientCheckRequest{User: "user:erin", Relation: "viewer", Object: "document:handbook"}, true},
		{client.ClientCheckRequest{User: "user:dave", Relation: "viewer", Object: "document:handbook"}, false},
	}
	var batch client.ClientBatchCheckBody
	for _, c := range checks {
		resp, err := fga.Check(ctx).Body(c.req).Execute()
		if err != nil {
			t.Fatalf("Check %+v: %v", c.req, err)
		}
		if resp.GetAllowed() != c.want {
			t.Errorf("Check %+v: allowed %v, want %v", c.req, resp.GetAllowed(), c.want)
		}
		batch = append(batch, c.req)
	}
	// This SDK release batches on the client: the checks again, in parallel.
	results, err := fga.BatchCheck(ctx).Body(batch).Execute()
	if err != nil {
		t.Fatalf("BatchCheck: %v", err)
	}
	for i, r := range *results {
		if r.Error != nil || r.GetAllowed() != checks[i].want {
			t.Errorf("BatchCheck %+v: allowed %v (error %v), want %v", r.Request, r.GetAllowed(), r.Error, checks[i].want)
		}
	}
}

func goSDKLists(ctx context.Context, t *testing.T, fga *client.OpenFgaClient) {
	t.Helper()
	now := map[string]any{"current_time": sdkNow}
	for _, c := range []struct {
		req  client.ClientListObjectsRequest
		want []string
	}{
		{client.ClientListObjectsRequest{User: "user:beth", Relation: "viewer", Type: "document"}, []string{"document:handbook", "document:roadmap"}},
		{client.ClientListObjectsRequest{User: "user:carl", Relation: "viewer", Type: "document", Context: &now}, []string{"document:budget", "document:handbook"}},
	} {
		resp, err := fga.ListObjects(ctx).Body(c.req).Execute()
		if err != nil {
			t.Fatalf("ListObjects %+v: %v", c.req, err)
		}
		expectSet(t, "ListObjects "+c.req.User, resp.GetObjects(), c.want)
	}
	for _, c := range []struct {
		req  client.ClientListUsersRequest
		want []string
	}{
		{client.ClientListUsersRequest{Object: fgasdk.FgaObject{Type: "document", Id: "roadmap"}, Relation: "viewer", UserFilters: []fgasdk.UserTypeFilter{{Type: "user"}}}, []string{"user:anne", "user:beth"}},
		{client.ClientListUsersRequest{Object: fgasdk.FgaObject{Type: "folder", Id: "plans"}, Relation: "viewer", UserFilters: []fgasdk.UserTypeFilter{{Type: "group", Relation: fgasdk.PtrString("member")}}}, []string{"group:eng#member"}},
	} {
		resp, err := fga.ListUsers(ctx).Body(c.req).Execute()
		if err != nil {
			t.Fatalf("ListUsers %+v: %v", c.req, err)
		}
		var got []string
		for _, u := range resp.GetUsers() {
			switch {
			case u.Object != nil:
				got = append(got, u.Object.Type+":"+u.Object.Id)
			case u.Userset != nil:
				got = append(got, u.Userset.Type+":"+u.Userset.Id+"#"+u.Userset.Relation)
			case u.Wildcard != nil:
				got = append(got, u.Wildcard.Type+":*")
			}
		}
		expectSet(t, "ListUsers "+c.req.Object.Id, got, c.want)
	}
}
