package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPlaygroundOnGateway: the HTTP listener serves the playground page and its API
// without a key (it never touches the server's data), and the server's data stays
// out of its scratch stores.
func TestPlaygroundOnGateway(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition doc { relation viewer: user }")
	ts.write(t, relationship("doc", "1", "viewer", "user", "a", ""))
	resp, err := http.Get("http://" + ts.httpAddr + "/playground/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "latch playground") {
		t.Fatalf("GET /playground/: %d %.200s", resp.StatusCode, page)
	}
	code, out := ts.post(t, "/playground/api/check", "",
		`{"session":"0123456789abcdef","schema":"definition user {}\ndefinition doc { relation viewer: user }","checks":"doc:1#viewer@user:a"}`)
	checks, _ := out["checks"].([]any)
	if code != http.StatusOK || len(checks) != 1 || checks[0].(map[string]any)["result"] != "NO_PERMISSION" {
		t.Fatalf("playground check on an empty scratch store: %d %v, want NO_PERMISSION", code, out)
	}
}
