package permify

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// api is a Permify handler on a test HTTP server, with tenant t1 on a memory store.
type api struct {
	t   testing.TB
	url string
	def store.Store
}

func newAPI(t testing.TB, mutate func(*Config)) *api {
	t.Helper()
	def := memory.New(memory.Options{GCInterval: -1})
	cfg := Config{
		Engine: engine.New(engine.Config{}), Default: def,
		Tenants: MemoryTenants{Options: memory.Options{GCInterval: -1}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Close()
		_ = def.Close()
	})
	return &api{t: t, url: srv.URL, def: def}
}

// do sends method path with body (marshalled unless already a string) and returns the
// status and decoded JSON answer.
func (a *api) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case nil:
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			a.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, a.url+path, bytes.NewReader(raw))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		a.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, data)
	}
	return resp.StatusCode, out
}

// ok posts and fails the test unless the answer is 200.
func (a *api) ok(path string, body any) map[string]any {
	a.t.Helper()
	code, out := a.do(http.MethodPost, path, body)
	if code != http.StatusOK {
		a.t.Fatalf("POST %s: status %d: %v", path, code, out)
	}
	return out
}

// fails posts and checks the answer is Permify's error shape with the given HTTP
// status, gRPC code and ERROR_CODE reason.
func (a *api) fails(method, path string, body any, status int, code codes.Code, reason string) map[string]any {
	a.t.Helper()
	got, out := a.do(method, path, body)
	if got != status || out["code"] != float64(code) || out["message"] != reason {
		a.t.Fatalf("%s %s: got status %d %v, want status %d code %d message %s", method, path, got, out, status, code, reason)
	}
	if d, ok := out["details"].([]any); !ok || len(d) != 1 {
		a.t.Fatalf("%s %s: details = %v", method, path, out["details"])
	}
	return out
}

func (a *api) check(tenant, entity, perm, subject string, extra map[string]any) string {
	a.t.Helper()
	body := map[string]any{"entity": ref(entity), "permission": perm, "subject": ref(subject), "metadata": map[string]any{"depth": 20}}
	for k, v := range extra {
		body[k] = v
	}
	out := a.ok("/v1/tenants/"+tenant+"/permissions/check", body)
	can, _ := out["can"].(string)
	return can
}

// ref turns "type:id" or "type:id#rel" into a wire entity or subject.
func ref(s string) map[string]any {
	out := map[string]any{}
	typ, rest, _ := cut(s, ':')
	id, relation, _ := cut(rest, '#')
	out["type"], out["id"] = typ, id
	if relation != "" {
		out["relation"] = relation
	}
	return out
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func tuple(entity, relation, subject string) map[string]any {
	return map[string]any{"entity": ref(entity), "relation": relation, "subject": ref(subject)}
}

func attr(entity, name string, value any) map[string]any {
	return map[string]any{"entity": ref(entity), "attribute": name, "value": value}
}

func boolValue(b bool) map[string]any {
	return map[string]any{"@type": "type.googleapis.com/base.v1.BooleanValue", "data": b}
}
