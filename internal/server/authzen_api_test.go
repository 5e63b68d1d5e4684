package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// authzenDo sends an AuthZEN request to the server's HTTP listener and returns the
// status and the body (decoded when it is JSON, else the text under "text").
func authzenDo(t *testing.T, ts *testServer, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, "http://"+ts.httpAddr+path, rd)
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
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s: %q is not JSON", path, data)
		}
		return resp.StatusCode, out
	}
	return resp.StatusCode, map[string]any{"text": string(data)}
}

func authzenPost(t *testing.T, ts *testServer, path string, body any) (int, map[string]any) {
	t.Helper()
	return authzenDo(t, ts, testKey, http.MethodPost, path, body)
}

const authzenSchema = `definition user {}
definition group {
	relation member: user | group#member
}
caveat on_weekday(day string) {
	day != "sunday"
}
definition doc {
	relation owner: user
	relation viewer: user | user:* | group#member | user with on_weekday
	permission edit = owner
	permission view = viewer + owner
}`

// authzenData writes the schema and relationships every AuthZEN test reads: doc:1
// owned by alice and viewed by group eng (bob), doc:2 viewed by carol on weekdays,
// doc:pub viewed by everyone, and doc:p00..p24 viewed by dave (for paging).
func authzenData(t *testing.T, ts *testServer) {
	t.Helper()
	ts.writeSchema(t, authzenSchema)
	weekday := relationship("doc", "2", "viewer", "user", "carol", "")
	weekday.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: "on_weekday", Context: &structpb.Struct{}}
	rs := []*v1.Relationship{
		relationship("doc", "1", "owner", "user", "alice", ""),
		relationship("doc", "1", "viewer", "group", "eng", "member"),
		relationship("group", "eng", "member", "user", "bob", ""),
		weekday,
		relationship("doc", "pub", "viewer", "user", "*", ""),
	}
	for i := range 25 {
		rs = append(rs, relationship("doc", fmt.Sprintf("p%02d", i), "viewer", "user", "dave", ""))
	}
	ts.write(t, rs...)
}

func user(id string) map[string]any  { return map[string]any{"type": "user", "id": id} }
func doc(id string) map[string]any   { return map[string]any{"type": "doc", "id": id} }
func act(name string) map[string]any { return map[string]any{"name": name} }

func TestAuthZENOnTheHTTPListener(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			ts := start(t, func(c *Config) {
				c.QuantizationWindow = -1
				if backend == "pebble" {
					c.DatastoreEngine, c.DatastoreURI = "pebble", filepath.Join(t.TempDir(), "data")
				}
			})
			authzenData(t, ts)
			t.Run("auth and metadata", func(t *testing.T) { testAuthZENAuth(t, ts) })
			t.Run("evaluation", func(t *testing.T) { testAuthZENEvaluation(t, ts) })
			t.Run("bad input", func(t *testing.T) { testAuthZENBadInput(t, ts) })
			t.Run("evaluations", func(t *testing.T) { testAuthZENEvaluations(t, ts) })
			t.Run("resource search", func(t *testing.T) { testAuthZENResourceSearch(t, ts) })
			t.Run("subject search", func(t *testing.T) { testAuthZENSubjectSearch(t, ts) })
			t.Run("action search", func(t *testing.T) { testAuthZENActionSearch(t, ts) })
		})
	}
}

func testAuthZENAuth(t *testing.T, ts *testServer) {
	req := map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")}
	if code, out := authzenDo(t, ts, "", http.MethodPost, "/access/v1/evaluation", req); code != http.StatusUnauthorized {
		t.Errorf("without a key: %d %v", code, out)
	}
	if code, out := authzenDo(t, ts, "wrong", http.MethodPost, "/access/v1/search/resource", req); code != http.StatusForbidden {
		t.Errorf("with a wrong key: %d %v", code, out)
	}
	if code, out := authzenDo(t, ts, testKey, http.MethodGet, "/access/v1/evaluation", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an evaluation: %d %v", code, out)
	}
	code, out := authzenDo(t, ts, "", http.MethodGet, "/.well-known/authzen-configuration", nil)
	base := "http://" + ts.httpAddr
	want := map[string]any{
		"policy_decision_point":       base,
		"access_evaluation_endpoint":  base + "/access/v1/evaluation",
		"access_evaluations_endpoint": base + "/access/v1/evaluations",
		"search_subject_endpoint":     base + "/access/v1/search/subject",
		"search_resource_endpoint":    base + "/access/v1/search/resource",
		"search_action_endpoint":      base + "/access/v1/search/action",
	}
	if code != http.StatusOK || !reflect.DeepEqual(out, want) {
		t.Errorf("metadata: %d %v, want %v", code, out, want)
	}
}

func testAuthZENEvaluation(t *testing.T, ts *testServer) {
	for _, c := range []struct {
		name string
		req  map[string]any
		want map[string]any
	}{
		{"owner edits", map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")}, map[string]any{"decision": true}},
		{"a relation as the action", map[string]any{"subject": user("alice"), "action": act("owner"), "resource": doc("1")}, map[string]any{"decision": true}},
		{"group member views", map[string]any{"subject": user("bob"), "action": act("view"), "resource": doc("1")}, map[string]any{"decision": true}},
		{"group member does not edit", map[string]any{"subject": user("bob"), "action": act("edit"), "resource": doc("1")}, map[string]any{"decision": false}},
		{"subject set in the id", map[string]any{"subject": map[string]any{"type": "group", "id": "eng#member"}, "action": act("view"), "resource": doc("1")}, map[string]any{"decision": true}},
		{"subject set in properties", map[string]any{"subject": map[string]any{"type": "group", "id": "eng", "properties": map[string]any{"relation": "member"}}, "action": act("view"), "resource": doc("1")}, map[string]any{"decision": true}},
		{"wildcard", map[string]any{"subject": user("zed"), "action": act("view"), "resource": doc("pub")}, map[string]any{"decision": true}},
		{"caveat context", map[string]any{"subject": user("carol"), "action": act("view"), "resource": doc("2"), "context": map[string]any{"day": "monday"}}, map[string]any{"decision": true}},
		{"caveat context denies", map[string]any{"subject": user("carol"), "action": act("view"), "resource": doc("2"), "context": map[string]any{"day": "sunday"}}, map[string]any{"decision": false}},
		{"missing caveat context", map[string]any{"subject": user("carol"), "action": act("view"), "resource": doc("2")}, map[string]any{"decision": false, "context": map[string]any{
			"id": "conditional", "missing_context": []any{"day"},
			"reason_admin": map[string]any{"en": "the decision depends on caveat context the request did not supply: day"},
		}}},
	} {
		code, out := authzenPost(t, ts, "/access/v1/evaluation", c.req)
		if code != http.StatusOK || !reflect.DeepEqual(out, c.want) {
			t.Errorf("%s: %d %v, want %v", c.name, code, out, c.want)
		}
	}
	// Properties are caveat context under their part's prefix.
	withProps := `{"subject": {"type": "user", "id": "carol"}, "action": {"name": "view"}, "resource": {"type": "doc", "id": "2", "properties": {"x": 1}}, "context": {"day": "monday"}}`
	if code, out := authzenPost(t, ts, "/access/v1/evaluation", withProps); code != http.StatusOK || out["decision"] != true {
		t.Errorf("with properties: %d %v", code, out)
	}
}

func testAuthZENBadInput(t *testing.T, ts *testServer) {
	for _, c := range []struct {
		body any
		code int
		says string
	}{
		{"", http.StatusBadRequest, "body is empty"},
		{"{", http.StatusBadRequest, "not valid JSON"},
		{map[string]any{"action": act("view"), "resource": doc("1")}, http.StatusBadRequest, "subject is required"},
		{map[string]any{"subject": map[string]any{"id": "x"}, "action": act("view"), "resource": doc("1")}, http.StatusBadRequest, "subject.type"},
		{map[string]any{"subject": map[string]any{"type": "user"}, "action": act("view"), "resource": doc("1")}, http.StatusBadRequest, "subject.id is required"},
		{map[string]any{"subject": user("a"), "action": map[string]any{"name": 3}, "resource": doc("1")}, http.StatusBadRequest, "action.name"},
		{map[string]any{"subject": user("a"), "action": map[string]any{}, "resource": doc("1")}, http.StatusBadRequest, "action.name is required"},
		{map[string]any{"subject": user("a b"), "action": act("view"), "resource": doc("1")}, http.StatusBadRequest, "subject.id"},
		{map[string]any{"subject": user("a"), "action": act("view"), "resource": map[string]any{"type": "doc"}}, http.StatusBadRequest, "resource.id is required"},
		{map[string]any{"subject": user("a"), "action": act("view"), "resource": doc("1"), "context": []any{1}}, http.StatusBadRequest, "context"},
		{map[string]any{"subject": user("a"), "action": act("nope"), "resource": doc("1")}, http.StatusBadRequest, "nope"},
		{map[string]any{"subject": user("a"), "action": act("view"), "resource": map[string]any{"type": "folder", "id": "1"}}, http.StatusBadRequest, "folder"},
		{map[string]any{"subject": user("a"), "action": act("view"), "resource": map[string]any{"type": "doc", "id": "2", "properties": map[string]any{"day": "x"}}, "context": map[string]any{"resource_day": "y"}}, http.StatusBadRequest, "resource.properties.day"},
		{map[string]any{"subject": map[string]any{"type": "group", "id": "eng#member", "properties": map[string]any{"relation": "owner"}}, "action": act("view"), "resource": doc("1")}, http.StatusBadRequest, "name one"},
	} {
		code, out := authzenPost(t, ts, "/access/v1/evaluation", c.body)
		text, _ := out["text"].(string)
		if code != c.code || !strings.Contains(text, c.says) {
			t.Errorf("%v: %d %v, want %d saying %q", c.body, code, out, c.code, c.says)
		}
	}
}

func decisions(out map[string]any) []bool {
	var ds []bool
	evs, _ := out["evaluations"].([]any)
	for _, e := range evs {
		ds = append(ds, e.(map[string]any)["decision"] == true)
	}
	return ds
}

func testAuthZENEvaluations(t *testing.T, ts *testServer) {
	items := []any{
		map[string]any{"resource": doc("1")},
		map[string]any{"resource": doc("2")},
		map[string]any{"resource": doc("pub")},
		map[string]any{"resource": doc("1"), "action": act("edit")},
	}
	req := func(semantic string, items []any) map[string]any {
		r := map[string]any{"subject": user("bob"), "action": act("view"), "evaluations": items}
		if semantic != "" {
			r["options"] = map[string]any{"evaluations_semantic": semantic}
		}
		return r
	}
	for _, c := range []struct {
		semantic string
		items    []any
		want     []bool
	}{
		{"", items, []bool{true, false, true, false}},
		{"execute_all", items, []bool{true, false, true, false}},
		{"deny_on_first_deny", items, []bool{true, false}},
		{"deny_on_first_deny", items[:1], []bool{true}},
		{"permit_on_first_permit", items[1:], []bool{false, true}},
		{"permit_on_first_permit", items[3:], []bool{false}},
	} {
		code, out := authzenPost(t, ts, "/access/v1/evaluations", req(c.semantic, c.items))
		if got := decisions(out); code != http.StatusOK || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q over %d items: %d %v, want %v", c.semantic, len(c.items), code, out, c.want)
		}
	}
	// The evaluation that ends a short-circuited call says why.
	_, out := authzenPost(t, ts, "/access/v1/evaluations", req("deny_on_first_deny", items))
	last := out["evaluations"].([]any)[1].(map[string]any)
	if ctx, _ := last["context"].(map[string]any); ctx["reason"] != "deny_on_first_deny" {
		t.Errorf("the denial that stopped the call: %v", last)
	}
	// An evaluation that fails is denied with its error; the others are answered.
	withBad := append([]any{map[string]any{"resource": map[string]any{"type": "folder", "id": "1"}}}, items[0])
	code, out := authzenPost(t, ts, "/access/v1/evaluations", req("", withBad))
	evs, _ := out["evaluations"].([]any)
	if code != http.StatusOK || len(evs) != 2 || evs[1].(map[string]any)["decision"] != true {
		t.Fatalf("with a failing evaluation: %d %v", code, out)
	}
	bad := evs[0].(map[string]any)
	if e, _ := bad["context"].(map[string]any)["error"].(map[string]any); bad["decision"] != false || e["status"] != float64(http.StatusBadRequest) || !strings.Contains(e["message"].(string), "folder") {
		t.Errorf("the failing evaluation: %v", bad)
	}
	// Without evaluations it is an access evaluation.
	if code, out := authzenPost(t, ts, "/access/v1/evaluations", map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")}); code != http.StatusOK || out["decision"] != true {
		t.Errorf("without evaluations: %d %v", code, out)
	}
	if code, out := authzenPost(t, ts, "/access/v1/evaluations", req("first_wins", items)); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "options.evaluations_semantic") {
		t.Errorf("an unknown semantic: %d %v", code, out)
	}
	if code, out := authzenPost(t, ts, "/access/v1/evaluations", req("", []any{map[string]any{"resource": map[string]any{"type": "doc"}}})); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "evaluations[0].resource.id") {
		t.Errorf("an evaluation without a resource id: %d %v", code, out)
	}
}

// searchAll pages through a search with page.limit limit and returns the ids (or
// action names) of every page in order, and the counts of the pages.
func searchAll(t *testing.T, ts *testServer, path string, req map[string]any, limit int) (ids []string, counts []int) {
	t.Helper()
	token := ""
	for range 100 {
		req["page"] = map[string]any{"limit": limit, "token": token}
		code, out := authzenPost(t, ts, path, req)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", path, code, out)
		}
		for _, r := range out["results"].([]any) {
			m := r.(map[string]any)
			if id, ok := m["id"]; ok {
				ids = append(ids, id.(string))
			} else {
				ids = append(ids, m["name"].(string))
			}
		}
		pg := out["page"].(map[string]any)
		counts = append(counts, int(pg["count"].(float64)))
		if token = pg["next_token"].(string); token == "" {
			return ids, counts
		}
	}
	t.Fatalf("%s: more than 100 pages", path)
	return nil, nil
}

func testAuthZENResourceSearch(t *testing.T, ts *testServer) {
	req := map[string]any{"subject": user("dave"), "action": act("view"), "resource": map[string]any{"type": "doc"}}
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("p%02d", i))
	}
	want = append(want, "pub")
	for _, c := range []struct {
		limit  int
		counts []int
	}{{0, []int{26}}, {10, []int{10, 10, 6}}, {13, []int{13, 13}}, {26, []int{26}}, {1000, []int{26}}} {
		ids, counts := searchAll(t, ts, "/access/v1/search/resource", req, c.limit)
		if !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(counts, c.counts) {
			t.Errorf("limit %d: %v in pages of %v, want %v in pages of %v", c.limit, ids, counts, want, c.counts)
		}
	}
	// A token continues the search that returned it only.
	req["page"] = map[string]any{"limit": 5}
	_, out := authzenPost(t, ts, "/access/v1/search/resource", req)
	token := out["page"].(map[string]any)["next_token"].(string)
	other := map[string]any{"subject": user("alice"), "action": act("view"), "resource": map[string]any{"type": "doc"}, "page": map[string]any{"token": token}}
	if code, out := authzenPost(t, ts, "/access/v1/search/resource", other); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "page.token") {
		t.Errorf("another search's token: %d %v", code, out)
	}
	req["page"] = map[string]any{"limit": 1001}
	if code, out := authzenPost(t, ts, "/access/v1/search/resource", req); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "page.limit") {
		t.Errorf("a limit past the maximum: %d %v", code, out)
	}
	// carol's doc:2 depends on context: left out without it, listed with it.
	carol := map[string]any{"subject": user("carol"), "action": act("view"), "resource": map[string]any{"type": "doc"}}
	if ids, _ := searchAll(t, ts, "/access/v1/search/resource", carol, 0); !reflect.DeepEqual(ids, []string{"pub"}) {
		t.Errorf("carol without context: %v", ids)
	}
	carol["context"] = map[string]any{"day": "monday"}
	if ids, _ := searchAll(t, ts, "/access/v1/search/resource", carol, 0); !reflect.DeepEqual(ids, []string{"2", "pub"}) {
		t.Errorf("carol on a monday: %v", ids)
	}
}

func testAuthZENSubjectSearch(t *testing.T, ts *testServer) {
	req := map[string]any{"subject": map[string]any{"type": "user"}, "action": act("view"), "resource": doc("1")}
	for _, limit := range []int{0, 1, 2} {
		if ids, _ := searchAll(t, ts, "/access/v1/search/subject", req, limit); !reflect.DeepEqual(ids, []string{"alice", "bob"}) {
			t.Errorf("limit %d: %v", limit, ids)
		}
	}
	req["resource"] = doc("pub")
	code, out := authzenPost(t, ts, "/access/v1/search/subject", req)
	if want := []any{map[string]any{"type": "user", "id": "*"}}; code != http.StatusOK || !reflect.DeepEqual(out["results"], want) {
		t.Errorf("a wildcard: %d %v", code, out)
	}
	sets := map[string]any{"subject": map[string]any{"type": "group", "properties": map[string]any{"relation": "member"}}, "action": act("view"), "resource": doc("1")}
	if ids, _ := searchAll(t, ts, "/access/v1/search/subject", sets, 0); !reflect.DeepEqual(ids, []string{"eng#member"}) {
		t.Errorf("subject sets: %v", ids)
	}
}

func testAuthZENActionSearch(t *testing.T, ts *testServer) {
	// The action search computes its whole answer, so its pages say the total.
	one := map[string]any{"subject": user("alice"), "resource": doc("1"), "page": map[string]any{"limit": 1}}
	code, out := authzenPost(t, ts, "/access/v1/search/action", one)
	if pg, _ := out["page"].(map[string]any); code != http.StatusOK || pg["count"] != float64(1) || pg["total"] != float64(2) || pg["next_token"] == "" {
		t.Errorf("alice's first action: %d %v, want 1 of 2 and a next token", code, out)
	}
	for _, c := range []struct {
		subject string
		limit   int
		want    []string
	}{{"alice", 0, []string{"edit", "view"}}, {"alice", 1, []string{"edit", "view"}}, {"bob", 0, []string{"view"}}, {"zed", 0, nil}} {
		req := map[string]any{"subject": user(c.subject), "resource": doc("1")}
		if ids, _ := searchAll(t, ts, "/access/v1/search/action", req, c.limit); !reflect.DeepEqual(ids, c.want) {
			t.Errorf("%s, limit %d: %v, want %v", c.subject, c.limit, ids, c.want)
		}
	}
}

// TestAuthZENShedsWith429: AuthZEN's calls go through the same limiters as the other
// APIs: with every cheap slot taken, an evaluation is refused with 429, its reason and
// Retry-After, while a search, in the expensive class, still runs; both are measured.
func TestAuthZENShedsWith429(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.MaxInflightCheap, c.MaxQueuedCheap, c.AdmissionWait = 1, 1, time.Millisecond
		c.QuantizationWindow, c.MetricsAddr = -1, "127.0.0.1:0"
	})
	authzenData(t, ts)
	holdSlots(t, ts.srv.adm.cheap)
	raw, _ := json.Marshal(map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")})
	req, _ := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+"/access/v1/evaluation", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "server overloaded") {
		t.Fatalf("an evaluation with every cheap slot taken: %d %q (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	search := map[string]any{"subject": user("alice"), "action": act("view"), "resource": map[string]any{"type": "doc"}}
	if code, out := authzenPost(t, ts, "/access/v1/search/resource", search); code != http.StatusOK {
		t.Fatalf("a search (expensive class) while the cheap class is full: %d %v", code, out)
	}
	// Both are measured, by endpoint and status.
	resp, err = http.Get("http://" + ts.srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`latch_authzen_request_duration_seconds_count{code="429",endpoint="evaluation"} 1`,
		`latch_authzen_request_duration_seconds_count{code="200",endpoint="search/resource"} 1`,
	} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// TestAuthZENDisabled: with AuthZENDisabled the listener does not serve the API.
func TestAuthZENDisabled(t *testing.T) {
	ts := start(t, func(c *Config) { c.AuthZENDisabled = true })
	req := map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")}
	if code, out := authzenPost(t, ts, "/access/v1/evaluation", req); code != http.StatusNotFound {
		t.Errorf("an evaluation: %d %v", code, out)
	}
	if code, out := authzenDo(t, ts, "", http.MethodGet, "/.well-known/authzen-configuration", nil); code != http.StatusNotFound {
		t.Errorf("the metadata: %d %v", code, out)
	}
}

// TestAuthZENLimitsAndRequestID: an evaluations request past MaxChecksPerBulk is
// refused naming the bound, and a response carries the request's X-Request-ID, as
// AuthZEN asks.
func TestAuthZENLimitsAndRequestID(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxChecksPerBulk, c.QuantizationWindow = 2, -1 })
	authzenData(t, ts)
	items := []any{map[string]any{"resource": doc("1")}, map[string]any{"resource": doc("2")}, map[string]any{"resource": doc("pub")}}
	req := map[string]any{"subject": user("bob"), "action": act("view"), "evaluations": items}
	if code, out := authzenPost(t, ts, "/access/v1/evaluations", req); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "more than the maximum of 2") {
		t.Errorf("3 evaluations, 2 allowed: %d %v", code, out)
	}
	raw, _ := json.Marshal(map[string]any{"subject": user("alice"), "action": act("edit"), "resource": doc("1")})
	hreq, _ := http.NewRequest(http.MethodPost, "http://"+ts.httpAddr+"/access/v1/evaluation", bytes.NewReader(raw))
	hreq.Header.Set("Authorization", "Bearer "+testKey)
	hreq.Header.Set("X-Request-ID", "bfe9eb29-ab87-4ca3-be83-a1d5d8305716")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-ID"); resp.StatusCode != http.StatusOK || got != "bfe9eb29-ab87-4ca3-be83-a1d5d8305716" {
		t.Errorf("X-Request-ID: %d %q", resp.StatusCode, got)
	}
}

// TestAuthZENOnPermifyData: data written through Permify's API (tenant t1, the
// server's store) answers through AuthZEN: Permify's permissions are actions, its
// attributes count, and a rule reads the request's data as Permify's does
// (context.data), which AuthZEN sends as context {"context": {"data": ...}}.
func TestAuthZENOnPermifyData(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = -1 })
	schema := `entity user {}
entity organization {
  relation member @user
  attribute ip_range string[]
  permission view = check_ip_range(ip_range) and member
}
entity document {
  relation org @organization
  relation owner @user
  attribute is_public boolean
  permission view = is_public or owner or org.view
}
rule check_ip_range(ip_range string[]) {
  context.data.ip_address in ip_range
}`
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/schemas/write", map[string]any{"schema": schema}); code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/data/write", map[string]any{
		"metadata": map[string]any{},
		"tuples": []any{
			map[string]any{"entity": map[string]any{"type": "organization", "id": "acme"}, "relation": "member", "subject": map[string]any{"type": "user", "id": "ann"}},
			map[string]any{"entity": map[string]any{"type": "document", "id": "plan"}, "relation": "org", "subject": map[string]any{"type": "organization", "id": "acme"}},
		},
		"attributes": []any{
			map[string]any{"entity": map[string]any{"type": "organization", "id": "acme"}, "attribute": "ip_range", "value": map[string]any{"@type": "type.googleapis.com/base.v1.StringArrayValue", "data": []any{"10.0.0.1"}}},
			map[string]any{"entity": map[string]any{"type": "document", "id": "readme"}, "attribute": "is_public", "value": map[string]any{"@type": "type.googleapis.com/base.v1.BooleanValue", "data": true}},
		},
	})
	if code != http.StatusOK {
		t.Fatalf("data/write: %d %v", code, out)
	}
	from := func(ip string) map[string]any {
		return map[string]any{"subject": user("ann"), "action": act("view"), "resource": map[string]any{"type": "document", "id": "plan"}, "context": map[string]any{"context": map[string]any{"data": map[string]any{"ip_address": ip}}}}
	}
	for ip, want := range map[string]bool{"10.0.0.1": true, "10.9.9.9": false} {
		if code, out := authzenPost(t, ts, "/access/v1/evaluation", from(ip)); code != http.StatusOK || out["decision"] != want {
			t.Errorf("ann views the plan from %s: %d %v, want %v", ip, code, out, want)
		}
	}
	public := map[string]any{"subject": user("bob"), "action": act("view"), "resource": map[string]any{"type": "document", "id": "readme"}}
	if code, out := authzenPost(t, ts, "/access/v1/evaluation", public); code != http.StatusOK || out["decision"] != true {
		t.Errorf("bob views the public readme: %d %v", code, out)
	}
}
