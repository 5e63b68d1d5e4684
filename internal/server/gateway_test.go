package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends a JSON body to the gateway the way curl would and decodes the reply.
func (ts *testServer) post(t *testing.T, path, key, body string) (int, map[string]any) {
	t.Helper()
	code, raw := ts.postRaw(t, path, key, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: status %d, body %q is not JSON: %v", path, code, raw, err)
	}
	return code, out
}

func (ts *testServer) postRaw(t *testing.T, path, key, body string) (int, []byte) {
	t.Helper()
	return ts.postReader(t, path, key, strings.NewReader(body))
}

// postReader is postRaw with the body from r (sent chunked unless r's length is known).
func (ts *testServer) postReader(t *testing.T, path, key string, r io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ts.httpAddr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func TestGateway(t *testing.T) {
	ts := start(t, nil)
	defer http.DefaultClient.CloseIdleConnections()
	schemaJSON, _ := json.Marshal(map[string]string{"schema": docSchema})

	code, body := ts.post(t, "/v1/schema/write", testKey, string(schemaJSON))
	if code != http.StatusOK || body["writtenAt"] == nil {
		t.Fatalf("schema write: %d %v", code, body)
	}
	code, body = ts.post(t, "/v1/schema/read", testKey, `{}`)
	if code != http.StatusOK || !strings.Contains(body["schemaText"].(string), "definition document") {
		t.Fatalf("schema read: %d %v", code, body)
	}
	code, body = ts.post(t, "/v1/relationships/write", testKey, `{"updates":[
		{"operation":"OPERATION_TOUCH","relationship":{"resource":{"objectType":"document","objectId":"readme"},"relation":"owner","subject":{"object":{"objectType":"user","objectId":"alice"}}}},
		{"operation":"OPERATION_TOUCH","relationship":{"resource":{"objectType":"document","objectId":"other"},"relation":"owner","subject":{"object":{"objectType":"user","objectId":"alice"}}}}]}`)
	if code != http.StatusOK {
		t.Fatalf("relationships write: %d %v", code, body)
	}
	token := body["writtenAt"].(map[string]any)["token"].(string)

	check := `{"consistency":{"atLeastAsFresh":{"token":"` + token + `"}},"resource":{"objectType":"document","objectId":"readme"},"permission":"view","subject":{"object":{"objectType":"user","objectId":"alice"}}}`
	code, body = ts.post(t, "/v1/permissions/check", testKey, check)
	if code != http.StatusOK || body["permissionship"] != "PERMISSIONSHIP_HAS_PERMISSION" {
		t.Fatalf("check: %d %v", code, body)
	}

	code, raw := ts.postRaw(t, "/v1/relationships/read", testKey, `{"consistency":{"fullyConsistent":true},"relationshipFilter":{"resourceType":"document"}}`)
	if code != http.StatusOK {
		t.Fatalf("read: %d %s", code, raw)
	}
	lines := 0
	for sc := bufio.NewScanner(bytes.NewReader(raw)); sc.Scan(); {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["result"] == nil {
			t.Fatalf("read stream line %q: %v", sc.Text(), err)
		}
		lines++
	}
	if lines != 2 {
		t.Errorf("read streamed %d relationships, want 2:\n%s", lines, raw)
	}

	for _, tc := range []struct {
		name, path, key, body string
		want                  int
		grpcCode              float64
	}{
		{"no key", "/v1/permissions/check", "", check, http.StatusUnauthorized, 16},
		{"wrong key", "/v1/permissions/check", "wrong", check, http.StatusForbidden, 7},
		{"unknown definition", "/v1/permissions/check", testKey, strings.Replace(check, `"document"`, `"folder"`, 1), http.StatusBadRequest, 9},
		{"invalid request", "/v1/permissions/check", testKey, `{"permission":"view"}`, http.StatusBadRequest, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := ts.post(t, tc.path, tc.key, tc.body)
			if code != tc.want || body["code"] != tc.grpcCode {
				t.Errorf("status %d body %v, want %d with code %v", code, body, tc.want, tc.grpcCode)
			}
		})
	}
}

func TestGatewayHealthzAndLimits(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxRequestBytes = 1024 })
	defer http.DefaultClient.CloseIdleConnections()
	resp, err := http.Get("http://" + ts.httpAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "SERVING") {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, raw)
	}
	big, _ := json.Marshal(map[string]string{"schema": strings.Repeat("x", 4096)})
	code, body := ts.post(t, "/v1/schema/write", testKey, string(big))
	if code != http.StatusRequestEntityTooLarge || body["code"] != float64(8) {
		t.Errorf("oversized body: %d %v", code, body)
	}
}

func TestGatewayDisabled(t *testing.T) {
	ts := start(t, func(c *Config) { c.HTTPAddr = "-" })
	if ts.httpAddr != "" {
		t.Fatalf("gateway listening on %q although disabled", ts.httpAddr)
	}
}

// TestGatewayNamesAnUnknownField: a misspelled field is refused with its name, not
// dropped (which would run the request without what the field meant to ask).
func TestGatewayNamesAnUnknownField(t *testing.T) {
	ts := start(t, nil)
	req, err := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+"/v1/permissions/check",
		strings.NewReader(`{"consistncy": {"fullyConsistent": true}, "resource": {"objectType": "d", "objectId": "1"}, "permission": "view", "subject": {"object": {"objectType": "user", "objectId": "u"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `unknown field \"consistncy\"`) {
		t.Fatalf("status %d, body %s; want 400 naming the field", resp.StatusCode, body)
	}
}
