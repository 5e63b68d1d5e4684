package server

import (
	"net/http"
	"strconv"
	"testing"
)

// loadTestSchema is the schema of Permify's published load test.
const loadTestSchema = `entity user {
    relation self @user
    relation follower @user
    relation blocked @user
    attribute is_public boolean
    permission view = self or (is_public or follower) not blocked
}
entity content {
    relation owner @user
    attribute is_public boolean
    permission view = owner.self or (is_public or owner.follower) not owner.blocked
}
entity interaction {
    relation creator @user
    relation parent @content
    permission view = creator.self or (creator.view and parent.view)
}`

// TestPermifyLoadScriptRequests: the requests of Permify's published k6 scripts, as
// they send them, against --insecure-no-auth: the write script's data/write batches
// (no Authorization header, the schema version the schema write returned, values as
// {"boolean": ...}) and the check script's checks (a placeholder bearer token, an
// empty snap_token, depth 20 and a page_size field checks do not have).
func TestPermifyLoadScriptRequests(t *testing.T) {
	ts := start(t, func(c *Config) { c.NoAuth, c.PresharedKeys = true, nil })
	code, out := permifyPost(t, ts, "", "/v1/tenants/t1/schemas/write", map[string]any{"schema": loadTestSchema})
	if code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	version := out["schema_version"]
	const ids = 8
	var tuples, attrs []any
	ref := func(typ string, id int) map[string]any { return map[string]any{"type": typ, "id": strconv.Itoa(id)} }
	subject := func(typ string, id int) map[string]any {
		return map[string]any{"type": typ, "id": strconv.Itoa(id), "relation": ""}
	}
	for i := range ids {
		for _, tp := range []struct {
			typ, rel string
			subj     map[string]any
		}{
			{"user", "self", subject("user", i)},
			{"user", "follower", subject("user", (i+1)%ids)},
			{"user", "blocked", subject("user", (i+2)%ids)},
			{"content", "owner", subject("user", i)},
			{"interaction", "creator", subject("user", i)},
			{"interaction", "parent", subject("content", i)},
		} {
			tuples = append(tuples, map[string]any{"entity": ref(tp.typ, i), "relation": tp.rel, "subject": tp.subj})
		}
		for _, typ := range []string{"user", "content"} {
			attrs = append(attrs, map[string]any{"entity": ref(typ, i), "attribute": "is_public", "value": map[string]any{"boolean": i%4 == 0}})
		}
	}
	for key, items := range map[string][]any{"tuples": tuples, "attributes": attrs} {
		body := map[string]any{"metadata": map[string]any{"schema_version": version}, key: items}
		if code, out := permifyPost(t, ts, "", "/v1/tenants/t1/data/write", body); code != http.StatusOK {
			t.Fatalf("data/write %s: %d %v", key, code, out)
		}
	}
	for _, c := range []struct {
		typ          string
		entity, user int
		want         string
	}{
		{"content", 3, 3, "CHECK_RESULT_ALLOWED"},     // owner.self
		{"content", 3, 4, "CHECK_RESULT_ALLOWED"},     // owner.follower
		{"content", 3, 5, "CHECK_RESULT_DENIED"},      // owner.blocked, not public
		{"content", 4, 7, "CHECK_RESULT_ALLOWED"},     // public
		{"interaction", 3, 3, "CHECK_RESULT_ALLOWED"}, // creator.self
		{"interaction", 3, 6, "CHECK_RESULT_DENIED"},
	} {
		code, out := permifyPost(t, ts, "<your-token>", "/v1/tenants/t1/permissions/check", map[string]any{
			"metadata": map[string]any{"snap_token": "", "schema_version": version, "depth": 20},
			"entity":   ref(c.typ, c.entity), "permission": "view", "subject": map[string]any{"type": "user", "id": strconv.Itoa(c.user)},
			"page_size": 20,
		})
		if code != http.StatusOK || out["can"] != c.want {
			t.Errorf("check %s:%d view user:%d: %d %v, want %s", c.typ, c.entity, c.user, code, out, c.want)
		}
	}
}
