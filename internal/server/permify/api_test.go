package permify

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

const docSchema = `entity user {}
entity team { relation member @user }
entity doc {
    relation owner @user
    relation viewer @user @team#member
    relation parent @folder
    attribute is_public boolean
    attribute tags string[]
    attribute size integer
    attribute price double
    permission view = owner or viewer or is_public or parent.view
    action edit = owner not blocked_edit
    permission blocked_edit = viewer and owner
    permission cheap = within_budget(price)
    permission tagged = has_tag(tags)
}
entity folder { relation owner @user permission view = owner }
rule within_budget(price double) { price <= context.data.budget }
rule has_tag(tags string[]) { context.data.tag in tags }
`

func seedDocs(t *testing.T, a *api, tenant string) string {
	t.Helper()
	out := a.ok("/v1/tenants/"+tenant+"/schemas/write", map[string]any{"schema": docSchema, "unknown_field": 1})
	if v, _ := out["schema_version"].(string); v == "" {
		t.Fatalf("schemas/write answered %v", out)
	}
	out = a.ok("/v1/tenants/"+tenant+"/data/write", map[string]any{
		"tuples": []any{
			tuple("doc:1", "owner", "user:alice"),
			tuple("doc:1", "viewer", "team:eng#member"),
			tuple("team:eng", "member", "user:bob"),
			tuple("doc:2", "parent", "folder:f"),
			tuple("folder:f", "owner", "user:carol"),
			tuple("doc:1", "owner", "user:alice"), // repeated in one write: accepted
		},
		"attributes": []any{
			attr("doc:3", "is_public", map[string]any{"boolean": true}),
			attr("doc:4", "is_public", boolValue(false)),
			attr("doc:1", "price", map[string]any{"@type": "type.googleapis.com/base.v1.DoubleValue", "data": 12.5}),
			attr("doc:1", "tags", map[string]any{"@type": "type.googleapis.com/base.v1.StringArrayValue", "data": []any{"red", "blue"}}),
			attr("doc:1", "size", 3),
		},
	})
	snap, _ := out["snap_token"].(string)
	if snap == "" {
		t.Fatalf("data/write answered %v", out)
	}
	return snap
}

func TestCheckAnswersFollowTheSchema(t *testing.T) {
	a := newAPI(t, nil)
	snap := seedDocs(t, a, "t1")
	withSnap := map[string]any{"metadata": map[string]any{"snap_token": snap, "schema_version": "", "depth": 20}}
	budget := func(b float64) map[string]any {
		return map[string]any{"context": map[string]any{"data": map[string]any{"budget": b}}}
	}
	tag := func(s string) map[string]any {
		return map[string]any{"context": map[string]any{"data": map[string]any{"tag": s}}}
	}
	cases := []struct {
		entity, perm, subject string
		extra                 map[string]any
		want                  string
	}{
		{"doc:1", "view", "user:alice", withSnap, allowed},
		{"doc:1", "view", "user:bob", nil, allowed},        // through team#member
		{"doc:1", "view", "user:mallory", nil, denied},     // nobody
		{"doc:2", "view", "user:carol", nil, allowed},      // parent.view
		{"doc:3", "view", "user:anyone", nil, allowed},     // is_public true
		{"doc:4", "view", "user:anyone", nil, denied},      // is_public false
		{"doc:3", "view", "team:eng#member", nil, allowed}, // public: any subject
		{"doc:1", "edit", "user:alice", nil, allowed},
		{"doc:1", "cheap", "user:x", budget(20), allowed},
		{"doc:1", "cheap", "user:x", budget(10), denied},
		{"doc:1", "cheap", "user:x", nil, denied}, // rule lacks context: CONDITIONAL, answered DENIED
		{"doc:9", "cheap", "user:x", budget(20), denied},
		{"doc:1", "tagged", "user:x", tag("red"), allowed},
		{"doc:1", "tagged", "user:x", tag("green"), denied},
	}
	for _, c := range cases {
		if got := a.check("t1", c.entity, c.perm, c.subject, c.extra); got != c.want {
			t.Errorf("%s#%s@%s %v: got %s, want %s", c.entity, c.perm, c.subject, c.extra, got, c.want)
		}
	}
	// A rule reads attributes written later and keeps the others.
	a.ok("/v1/tenants/t1/data/write", map[string]any{"attributes": []any{attr("doc:1", "price", 30.0)}})
	if got := a.check("t1", "doc:1", "cheap", "user:x", budget(20)); got != denied {
		t.Errorf("after raising the price: %s", got)
	}
}

func TestBulkLookupsSubjectPermissionExpand(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	out := a.ok("/v1/tenants/t1/permissions/bulk-check", map[string]any{"items": []any{
		map[string]any{"entity": ref("doc:1"), "permission": "view", "subject": ref("user:bob")},
		map[string]any{"entity": ref("doc:1"), "permission": "view", "subject": ref("user:eve")},
	}})
	results, _ := out["results"].([]any)
	if len(results) != 2 || results[0].(map[string]any)["can"] != allowed || results[1].(map[string]any)["can"] != denied {
		t.Errorf("bulk-check = %v", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/lookup-entity", map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice")})
	if !reflect.DeepEqual(out["entity_ids"], []any{"1", "3"}) {
		t.Errorf("lookup-entity = %v (doc:1 as owner, doc:3 public)", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/lookup-entity", map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice"), "page_size": 1})
	if !reflect.DeepEqual(out["entity_ids"], []any{"1"}) || out["continuous_token"] == "" {
		t.Fatalf("lookup-entity page 1 = %v", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/lookup-entity", map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice"), "page_size": 1, "continuous_token": out["continuous_token"]})
	if !reflect.DeepEqual(out["entity_ids"], []any{"3"}) || out["continuous_token"] != "" {
		t.Errorf("lookup-entity page 2 = %v", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/lookup-subject", map[string]any{"entity": ref("doc:1"), "permission": "view", "subject_reference": map[string]any{"type": "user"}})
	if !reflect.DeepEqual(out["subject_ids"], []any{"alice", "bob"}) {
		t.Errorf("lookup-subject = %v", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/subject-permission", map[string]any{"entity": ref("doc:1"), "subject": ref("user:alice"), "metadata": map[string]any{"only_permission": true}})
	want := map[string]any{"view": allowed, "edit": allowed, "blocked_edit": denied, "cheap": denied, "tagged": denied}
	if !reflect.DeepEqual(out["results"], want) {
		t.Errorf("subject-permission = %v, want %v", out["results"], want)
	}
	out = a.ok("/v1/tenants/t1/permissions/subject-permission", map[string]any{"entity": ref("doc:1"), "subject": ref("user:alice")})
	if res, _ := out["results"].(map[string]any); res["owner"] != allowed || res["is_public"] != nil {
		t.Errorf("subject-permission with relations = %v (relations in, attributes out)", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/expand", map[string]any{"entity": ref("doc:1"), "permission": "edit"})
	tree, _ := out["tree"].(map[string]any)
	exp, _ := tree["expand"].(map[string]any)
	if exp["operation"] != "OPERATION_EXCLUSION" || len(exp["children"].([]any)) != 2 {
		t.Errorf("expand = %v", out)
	}
}

func TestDataReadAndDelete(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	out := a.ok("/v1/tenants/t1/data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "doc", "ids": []string{"1"}}}})
	if tuples, _ := out["tuples"].([]any); len(tuples) != 2 {
		t.Errorf("relationships/read of doc:1 = %v (owner and viewer; attribute carriers hidden)", out)
	}
	out = a.ok("/v1/tenants/t1/data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "doc"}}, "page_size": 1})
	if tuples, _ := out["tuples"].([]any); len(tuples) != 1 || out["continuous_token"] == "" {
		t.Fatalf("paged read = %v", out)
	}
	out = a.ok("/v1/tenants/t1/data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "doc"}}, "page_size": 5, "continuous_token": out["continuous_token"]})
	if tuples, _ := out["tuples"].([]any); len(tuples) != 2 {
		t.Errorf("second page = %v", out)
	}
	out = a.ok("/v1/tenants/t1/data/attributes/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "doc", "ids": []string{"1"}}, "attributes": []string{"price", "size", "tags"}}})
	got := map[string]any{}
	for _, x := range out["attributes"].([]any) {
		m := x.(map[string]any)
		got[m["attribute"].(string)] = m["value"]
	}
	want := map[string]any{
		"price": map[string]any{"@type": "type.googleapis.com/base.v1.DoubleValue", "data": 12.5},
		"size":  map[string]any{"@type": "type.googleapis.com/base.v1.IntegerValue", "data": 3.0},
		"tags":  map[string]any{"@type": "type.googleapis.com/base.v1.StringArrayValue", "data": []any{"red", "blue"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attributes/read = %v, want %v", got, want)
	}
	out = a.ok("/v1/tenants/t1/data/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "folder"}}, "attribute_filter": map[string]any{"entity": map[string]any{"type": "doc", "ids": []string{"3"}}}})
	if len(out["tuples"].([]any)) != 1 || len(out["attributes"].([]any)) != 1 {
		t.Errorf("data/read = %v", out)
	}

	a.ok("/v1/tenants/t1/data/delete", map[string]any{
		"tuple_filter":     map[string]any{"entity": map[string]any{"type": "team", "ids": []string{"eng"}}, "relation": "member"},
		"attribute_filter": map[string]any{"entity": map[string]any{"type": "doc", "ids": []string{"3"}}, "attributes": []string{"is_public"}},
	})
	if got := a.check("t1", "doc:1", "view", "user:bob", nil); got != denied {
		t.Errorf("bob after his team membership was deleted: %s", got)
	}
	if got := a.check("t1", "doc:3", "view", "user:anyone", nil); got != denied {
		t.Errorf("doc:3 after is_public was deleted: %s", got)
	}
	if got := a.check("t1", "doc:1", "view", "user:alice", nil); got != allowed {
		t.Errorf("alice, untouched by the delete: %s", got)
	}
}

func TestSchemaReadAndVersions(t *testing.T) {
	a := newAPI(t, nil)
	v1 := a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": "entity user {}\nentity doc { relation owner @user permission view = owner }"})["schema_version"]
	a.ok("/v1/tenants/t1/data/write", map[string]any{"tuples": []any{tuple("doc:1", "owner", "user:alice")}})
	a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": "entity user {}\nentity doc { relation owner @user attribute is_public boolean permission view = is_public }"})
	if got := a.check("t1", "doc:1", "view", "user:alice", nil); got != denied {
		t.Errorf("latest schema: %s", got)
	}
	if got := a.check("t1", "doc:1", "view", "user:alice", map[string]any{"metadata": map[string]any{"schema_version": v1}}); got != allowed {
		t.Errorf("schema_version %v: %s", v1, got)
	}
	out := a.ok("/v1/tenants/t1/schemas/read", map[string]any{"metadata": map[string]any{"schema_version": v1}})
	doc := out["schema"].(map[string]any)["entity_definitions"].(map[string]any)["doc"].(map[string]any)
	if len(doc["attributes"].(map[string]any)) != 0 || doc["permissions"].(map[string]any)["view"] == nil {
		t.Errorf("schemas/read v1 = %v", doc)
	}
	out = a.ok("/v1/tenants/t1/schemas/read", map[string]any{})
	doc = out["schema"].(map[string]any)["entity_definitions"].(map[string]any)["doc"].(map[string]any)
	want := map[string]any{"is_public": map[string]any{"name": "is_public", "type": "ATTRIBUTE_TYPE_BOOLEAN"}}
	if !reflect.DeepEqual(doc["attributes"], want) {
		t.Errorf("schemas/read latest attributes = %v", doc["attributes"])
	}
	leaf := doc["permissions"].(map[string]any)["view"].(map[string]any)["child"].(map[string]any)["leaf"].(map[string]any)
	if leaf["computed_attribute"] == nil {
		t.Errorf("view's child = %v", leaf)
	}
}

func TestRuleSchemaRead(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	out := a.ok("/v1/tenants/t1/schemas/read", nil)
	rules := out["schema"].(map[string]any)["rule_definitions"].(map[string]any)
	want := map[string]any{"name": "within_budget", "arguments": map[string]any{"price": "ATTRIBUTE_TYPE_DOUBLE"}, "expression": "price <= context.data.budget"}
	if !reflect.DeepEqual(rules["within_budget"], want) {
		t.Errorf("rule_definitions = %v", rules)
	}
	doc := out["schema"].(map[string]any)["entity_definitions"].(map[string]any)["doc"].(map[string]any)
	if _, synthetic := doc["relations"].(map[string]any)["rule_within_budget_1"]; synthetic {
		t.Error("rule call carrier shown as a relation")
	}
	call := doc["permissions"].(map[string]any)["cheap"].(map[string]any)["child"].(map[string]any)["leaf"].(map[string]any)["call"]
	if call == nil || call.(map[string]any)["rule_name"] != "within_budget" {
		t.Errorf("cheap's child = %v", doc["permissions"])
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	out := a.ok("/v1/tenants/create", map[string]any{"id": "t2", "name": "second"})
	if tn := out["tenant"].(map[string]any); tn["id"] != "t2" || tn["name"] != "second" || tn["created_at"] == "" {
		t.Errorf("create = %v", out)
	}
	a.fails(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "t2"}, http.StatusConflict, codes.AlreadyExists, "ERROR_CODE_UNIQUE_CONSTRAINT")
	a.fails(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "bad id!"}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
	// t2 has no schema and none of t1's data.
	a.fails(http.MethodPost, "/v1/tenants/t2/permissions/check", map[string]any{"entity": ref("doc:1"), "permission": "view", "subject": ref("user:alice")},
		http.StatusNotFound, codes.NotFound, "ERROR_CODE_SCHEMA_NOT_FOUND")
	a.ok("/v1/tenants/t2/schemas/write", map[string]any{"schema": docSchema})
	if got := a.check("t2", "doc:1", "view", "user:alice", nil); got != denied {
		t.Errorf("t1's data visible in t2: %s", got)
	}
	a.ok("/v1/tenants/t2/data/write", map[string]any{"tuples": []any{tuple("doc:7", "owner", "user:zed")}})
	if got := a.check("t1", "doc:7", "view", "user:zed", nil); got != denied {
		t.Errorf("t2's data visible in t1: %s", got)
	}
	if got := a.check("t2", "doc:7", "view", "user:zed", nil); got != allowed {
		t.Errorf("t2's own data: %s", got)
	}
	out = a.ok("/v1/tenants/list", map[string]any{"page_size": 10})
	var ids []string
	for _, x := range out["tenants"].([]any) {
		ids = append(ids, x.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "t1,t2" {
		t.Errorf("list = %v", ids)
	}
	if code, out := a.do(http.MethodDelete, "/v1/tenants/t2", nil); code != http.StatusOK || out["tenant"].(map[string]any)["id"] != "t2" {
		t.Errorf("delete = %d %v", code, out)
	}
	a.fails(http.MethodPost, "/v1/tenants/t2/permissions/check", map[string]any{"entity": ref("doc:7"), "permission": "view", "subject": ref("user:zed")},
		http.StatusNotFound, codes.NotFound, "ERROR_CODE_TENANT_NOT_FOUND")
	a.fails(http.MethodDelete, "/v1/tenants/t2", nil, http.StatusNotFound, codes.NotFound, "ERROR_CODE_TENANT_NOT_FOUND")
	a.fails(http.MethodDelete, "/v1/tenants/t1", nil, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
}

func TestErrorShapes(t *testing.T) {
	a := newAPI(t, nil)
	p := "/v1/tenants/t1/"
	chk := func(entity, perm, subject string) map[string]any {
		return map[string]any{"entity": ref(entity), "permission": perm, "subject": ref(subject)}
	}
	a.fails(http.MethodPost, p+"permissions/check", chk("doc:1", "view", "user:a"), http.StatusNotFound, codes.NotFound, "ERROR_CODE_SCHEMA_NOT_FOUND")
	out := a.fails(http.MethodPost, p+"schemas/write", map[string]any{"schema": "entity user {}\nentity doc { relation owner @nobody }"},
		http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_SCHEMA_COMPILE")
	if d := out["details"].([]any)[0].(map[string]any)["metadata"].(map[string]any)["detail"]; !strings.Contains(d.(string), "2:30: entity `nobody` not found") {
		t.Errorf("schema error detail = %v", d)
	}
	a.fails(http.MethodPost, p+"schemas/write", map[string]any{"schema": " "}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_SCHEMA_PARSE")
	seedDocs(t, a, "t1")
	a.fails(http.MethodPost, p+"permissions/check", "{not json", http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_INVALID_ARGUMENT")
	bad := chk("doc:1", "view", "user:a")
	bad["metadata"] = map[string]any{"snap_token": "garbage"}
	a.fails(http.MethodPost, p+"permissions/check", bad, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_INVALID_ARGUMENT")
	bad["metadata"] = map[string]any{"schema_version": "garbage"}
	a.fails(http.MethodPost, p+"permissions/check", bad, http.StatusNotFound, codes.NotFound, "ERROR_CODE_SCHEMA_NOT_FOUND")
	ctxTuples := chk("doc:1", "view", "user:a")
	ctxTuples["context"] = map[string]any{"tuples": []any{tuple("doc:1", "owner", "team:eng")}}
	a.fails(http.MethodPost, p+"permissions/check", ctxTuples, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
	a.fails(http.MethodPost, p+"data/write", map[string]any{"tuples": []any{tuple("doc:1", "owner", "team:eng")}},
		http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
	a.fails(http.MethodPost, p+"data/write", map[string]any{"tuples": []any{tuple("doc:1", "is_public", "user:eng")}},
		http.StatusNotFound, codes.NotFound, "ERROR_CODE_RELATION_DEFINITION_NOT_FOUND") // Permify finds relations only
	a.fails(http.MethodPost, p+"data/write", map[string]any{"tuples": []any{tuple("doc:1", "view", "user:eng")}},
		http.StatusNotFound, codes.NotFound, "ERROR_CODE_RELATION_DEFINITION_NOT_FOUND") // Permify finds relations only
	a.fails(http.MethodPost, p+"data/write", map[string]any{"attributes": []any{attr("doc:1", "nope", true)}},
		http.StatusNotFound, codes.NotFound, "ERROR_CODE_ATTRIBUTE_DEFINITION_NOT_FOUND")
	for _, v := range []any{"yes", map[string]any{"@type": "type.googleapis.com/base.v1.StringValue", "data": "x"}, map[string]any{"integer": 1}, nil} {
		a.fails(http.MethodPost, p+"data/write", map[string]any{"attributes": []any{attr("doc:1", "is_public", v)}},
			http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_ATTRIBUTE_TYPE_MISMATCH")
	}
	a.fails(http.MethodPost, p+"data/write", map[string]any{"attributes": []any{attr("doc:1", "size", 1.5)}},
		http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_ATTRIBUTE_TYPE_MISMATCH")
	a.fails(http.MethodPost, p+"data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "doc"}}, "continuous_token": "!!"},
		http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_INVALID_CONTINUOUS_TOKEN")
	a.fails(http.MethodPost, p+"data/relationships/read", map[string]any{}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
	a.fails(http.MethodPost, p+"data/delete", map[string]any{"tuple_filter": map[string]any{"relation": "owner"}}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")
	a.fails(http.MethodPost, p+"nope", nil, http.StatusNotFound, codes.NotFound, "ERROR_CODE_NOT_FOUND")
	a.fails(http.MethodGet, p+"permissions/check", nil, http.StatusNotFound, codes.NotFound, "ERROR_CODE_NOT_FOUND")
	a.fails(http.MethodPost, "/v1/tenants/ghost/permissions/check", chk("doc:1", "view", "user:a"), http.StatusNotFound, codes.NotFound, "ERROR_CODE_TENANT_NOT_FOUND")
}

func TestBatchLimitAndAuthorize(t *testing.T) {
	a := newAPI(t, func(c *Config) {
		c.MaxBatch = 2
		c.Authorize = func(r *http.Request) error {
			if r.Header.Get("X-Deny") != "" {
				return NewError(codes.Unauthenticated, "ERROR_CODE_UNAUTHENTICATED", "no")
			}
			return nil
		}
	})
	a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": docSchema})
	a.ok("/v1/tenants/t1/data/write", map[string]any{"tuples": []any{tuple("doc:1", "owner", "user:a")}, "attributes": []any{attr("doc:1", "size", 1)}})
	a.fails(http.MethodPost, "/v1/tenants/t1/data/write", map[string]any{"tuples": []any{tuple("doc:1", "owner", "user:a"), tuple("doc:1", "owner", "user:b")}, "attributes": []any{attr("doc:1", "size", 1)}},
		http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_MAX_DATA_PER_WRITE_EXCEEDED")
	items := []any{}
	for range 3 {
		items = append(items, map[string]any{"entity": ref("doc:1"), "permission": "view", "subject": ref("user:a")})
	}
	a.fails(http.MethodPost, "/v1/tenants/t1/permissions/bulk-check", map[string]any{"items": items}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_VALIDATION")

	req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/tenants/list", nil)
	req.Header.Set("X-Deny", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("denied request answered %d", resp.StatusCode)
	}
}

func TestNamingRulesPerTenant(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.SharedDefault = true })
	short := "entity u {}\nentity d { relation o @u attribute p boolean permission v = o or p }"
	out := a.fails(http.MethodPost, "/v1/tenants/t1/schemas/write", map[string]any{"schema": short}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_SCHEMA_COMPILE")
	if d := out["details"].([]any)[0].(map[string]any)["metadata"].(map[string]any)["detail"].(string); !strings.Contains(d, "1:8: invalid entity name `u`") {
		t.Errorf("t1, shared with the SpiceDB API, should refuse short names: %s", d)
	}
	a.ok("/v1/tenants/create", map[string]any{"id": "t2"})
	a.ok("/v1/tenants/t2/schemas/write", map[string]any{"schema": short})
	a.ok("/v1/tenants/t2/data/write", map[string]any{"tuples": []any{tuple("d:1", "o", "u:a")}, "attributes": []any{attr("d:2", "p", true)}})
	for _, c := range []struct{ entity, subject, want string }{{"d:1", "u:a", allowed}, {"d:2", "u:b", allowed}, {"d:1", "u:b", denied}} {
		if got := a.check("t2", c.entity, "v", c.subject, nil); got != c.want {
			t.Errorf("t2 %s#v@%s = %s, want %s", c.entity, c.subject, got, c.want)
		}
	}
	out = a.ok("/v1/tenants/t2/schemas/read", nil)
	if _, ok := out["schema"].(map[string]any)["entity_definitions"].(map[string]any)["d"]; !ok {
		t.Errorf("schemas/read = %v", out)
	}
}

// TestContextualTuplesAndAttributes: a request's contextual tuples and attributes
// count for it alone, as if written, in checks, bulk checks, both lookups, subject
// permissions and expand; nothing is written and other requests do not see them.
func TestContextualTuplesAndAttributes(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	p := "/v1/tenants/t1/"
	withTuple := map[string]any{"context": map[string]any{"tuples": []any{tuple("doc:9", "owner", "user:zed")}}}
	withPublic := map[string]any{"context": map[string]any{"attributes": []any{attr("doc:4", "is_public", boolValue(true))}}}
	for _, c := range []struct {
		entity, subject string
		extra           map[string]any
		want            string
	}{
		{"doc:9", "user:zed", withTuple, allowed},
		{"doc:9", "user:zed", nil, denied},
		{"doc:4", "user:anyone", withPublic, allowed},
		{"doc:4", "user:anyone", nil, denied},
		// A contextual attribute feeds the rule calls that read it, as a write would.
		{"doc:1", "user:alice", map[string]any{"context": map[string]any{
			"attributes": []any{attr("doc:1", "price", map[string]any{"@type": "type.googleapis.com/base.v1.DoubleValue", "data": 1.0})},
			"data":       map[string]any{"budget": 5},
		}}, allowed},
	} {
		perm := "view"
		if c.entity == "doc:1" {
			perm = "cheap"
		}
		if got := a.check("t1", c.entity, perm, c.subject, c.extra); got != c.want {
			t.Errorf("check %s#%s@%s with %v: %s, want %s", c.entity, perm, c.subject, c.extra, got, c.want)
		}
	}
	if got := a.check("t1", "doc:1", "cheap", "user:alice", map[string]any{"context": map[string]any{"data": map[string]any{"budget": 5}}}); got != denied {
		t.Errorf("the stored price (12.5) is over the budget: %s", got)
	}

	out := a.ok(p+"permissions/bulk-check", map[string]any{"metadata": map[string]any{"depth": 20}, "items": []any{
		map[string]any{"entity": ref("doc:9"), "permission": "view", "subject": ref("user:zed"), "context": withTuple["context"]},
		map[string]any{"entity": ref("doc:9"), "permission": "view", "subject": ref("user:zed")},
	}})
	if results, _ := out["results"].([]any); len(results) != 2 || results[0].(map[string]any)["can"] != allowed || results[1].(map[string]any)["can"] != denied {
		t.Errorf("bulk check with contextual tuples on one item: %v", out)
	}

	lookup := map[string]any{"metadata": map[string]any{"depth": 20}, "entity_type": "doc", "permission": "view", "subject": ref("user:zed"), "context": withTuple["context"]}
	// doc:3 is public: everyone sees it, with or without the contextual tuple.
	if ids, _ := a.ok(p+"permissions/lookup-entity", lookup)["entity_ids"].([]any); len(ids) != 2 || ids[0] != "3" || ids[1] != "9" {
		t.Errorf("lookup-entity with a contextual tuple: %v, want [3 9]", ids)
	}
	delete(lookup, "context")
	if ids, _ := a.ok(p+"permissions/lookup-entity", lookup)["entity_ids"].([]any); len(ids) != 1 || ids[0] != "3" {
		t.Errorf("lookup-entity without it: %v, want [3]", ids)
	}
	lookup = map[string]any{"metadata": map[string]any{"depth": 20}, "entity": ref("doc:9"), "permission": "view", "subject_reference": map[string]any{"type": "user"}, "context": withTuple["context"]}
	if ids, _ := a.ok(p+"permissions/lookup-subject", lookup)["subject_ids"].([]any); len(ids) != 1 || ids[0] != "zed" {
		t.Errorf("lookup-subject with a contextual tuple: %v", ids)
	}
	sp := map[string]any{"metadata": map[string]any{"depth": 20}, "entity": ref("doc:9"), "subject": ref("user:zed"), "context": withTuple["context"]}
	if res, _ := a.ok(p+"permissions/subject-permission", sp)["results"].(map[string]any); res["view"] != allowed || res["owner"] != allowed {
		t.Errorf("subject-permission with a contextual tuple: %v", res)
	}
	if got := a.check("t1", "doc:9", "view", "user:zed", nil); got != denied {
		t.Errorf("a contextual tuple was written: %s", got)
	}
}

// TestCheckCount: a check reports the subproblems it evaluated as check_count.
func TestCheckCount(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	out := a.ok("/v1/tenants/t1/permissions/check", map[string]any{"entity": ref("doc:2"), "permission": "view", "subject": ref("user:carol"), "metadata": map[string]any{"depth": 20}})
	meta, _ := out["metadata"].(map[string]any)
	if n, _ := meta["check_count"].(float64); out["can"] != allowed || n < 2 {
		t.Errorf("check through a parent folder: %v, want allowed with check_count of at least 2", out)
	}
}

// TestLookupSubjectExpandsWildcards: as in Permify, a grant to every subject (a
// public attribute) is answered with the subjects of the requested type that the
// tenant's relationships name, less those an exclusion removes; "*" is never an id.
func TestLookupSubjectExpandsWildcards(t *testing.T) {
	a := newAPI(t, nil)
	a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": `entity user {}
entity team { relation member @user }
entity doc {
    relation owner @user
    relation banned @user
    attribute is_public boolean
    permission read = owner or is_public
    permission view = is_public not banned
}`})
	a.ok("/v1/tenants/t1/data/write", map[string]any{
		"tuples": []any{
			tuple("doc:2", "owner", "user:alice"),
			tuple("doc:1", "banned", "user:mallory"),
			tuple("team:eng", "member", "user:bob"),
		},
		"attributes": []any{attr("doc:1", "is_public", boolValue(true))},
	})
	for _, c := range []struct {
		doc, perm string
		subject   map[string]any
		want      []any
	}{
		{"doc:1", "read", map[string]any{"type": "user"}, []any{"alice", "bob", "mallory"}},
		{"doc:1", "view", map[string]any{"type": "user"}, []any{"alice", "bob"}},
		{"doc:2", "read", map[string]any{"type": "user"}, []any{"alice"}},
		{"doc:1", "read", map[string]any{"type": "team", "relation": "member"}, []any{}},
	} {
		out := a.ok("/v1/tenants/t1/permissions/lookup-subject", map[string]any{"entity": ref(c.doc), "permission": c.perm, "subject_reference": c.subject})
		if !reflect.DeepEqual(out["subject_ids"], c.want) {
			t.Errorf("lookup-subject %s#%s %v = %v, want %v", c.doc, c.perm, c.subject, out["subject_ids"], c.want)
		}
	}
	out := a.ok("/v1/tenants/t1/permissions/lookup-subject", map[string]any{"entity": ref("doc:1"), "permission": "read", "subject_reference": map[string]any{"type": "user"}, "page_size": 2})
	if !reflect.DeepEqual(out["subject_ids"], []any{"alice", "bob"}) || out["continuous_token"] == "" {
		t.Fatalf("lookup-subject page 1 = %v", out)
	}
	out = a.ok("/v1/tenants/t1/permissions/lookup-subject", map[string]any{"entity": ref("doc:1"), "permission": "read", "subject_reference": map[string]any{"type": "user"}, "page_size": 2, "continuous_token": out["continuous_token"]})
	if !reflect.DeepEqual(out["subject_ids"], []any{"mallory"}) || out["continuous_token"] != "" {
		t.Errorf("lookup-subject page 2 = %v", out)
	}
}

// TestUnknownNamesAnswerPermifysCodes: an entity type, permission or relation the
// schema does not define, on every endpoint, answers as Permify's server does. Permify
// looks an entity up by name among the stored schema's definitions (and a name that is
// neither relation, permission nor attribute up as a rule), so an unknown entity type
// or permission is ERROR_CODE_SCHEMA_NOT_FOUND; a tuple's unknown relation is
// ERROR_CODE_RELATION_DEFINITION_NOT_FOUND and an unknown attribute
// ERROR_CODE_ATTRIBUTE_DEFINITION_NOT_FOUND, all NOT_FOUND (404). Reads and deletes
// by filter consult no schema: an unknown type matches nothing.
func TestUnknownNamesAnswerPermifysCodes(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	const schemaNotFound = "ERROR_CODE_SCHEMA_NOT_FOUND"
	subj := map[string]any{"type": "user"}
	for _, c := range []struct {
		name, path string
		body       map[string]any
		reason     string // "" : answered 200
	}{
		{"check, unknown entity type", "permissions/check", map[string]any{"entity": ref("nope:1"), "permission": "view", "subject": ref("user:a")}, schemaNotFound},
		{"check, unknown permission", "permissions/check", map[string]any{"entity": ref("doc:1"), "permission": "nope", "subject": ref("user:a")}, schemaNotFound},
		{"lookup-entity, unknown entity type", "permissions/lookup-entity", map[string]any{"entity_type": "nope", "permission": "view", "subject": ref("user:a")}, schemaNotFound},
		{"lookup-entity, unknown permission", "permissions/lookup-entity", map[string]any{"entity_type": "doc", "permission": "nope", "subject": ref("user:a")}, schemaNotFound},
		{"lookup-entity-stream, unknown entity type", "permissions/lookup-entity-stream", map[string]any{"entity_type": "nope", "permission": "view", "subject": ref("user:a")}, schemaNotFound},
		{"lookup-entity-stream, unknown permission", "permissions/lookup-entity-stream", map[string]any{"entity_type": "doc", "permission": "nope", "subject": ref("user:a")}, schemaNotFound},
		{"lookup-subject, unknown entity type", "permissions/lookup-subject", map[string]any{"entity": ref("nope:1"), "permission": "view", "subject_reference": subj}, schemaNotFound},
		{"lookup-subject, unknown permission", "permissions/lookup-subject", map[string]any{"entity": ref("doc:1"), "permission": "nope", "subject_reference": subj}, schemaNotFound},
		{"subject-permission, unknown entity type", "permissions/subject-permission", map[string]any{"entity": ref("nope:1"), "subject": ref("user:a")}, schemaNotFound},
		{"expand, unknown entity type", "permissions/expand", map[string]any{"entity": ref("nope:1"), "permission": "view"}, schemaNotFound},
		{"expand, unknown permission", "permissions/expand", map[string]any{"entity": ref("doc:1"), "permission": "nope"}, schemaNotFound},
		{"data/write, tuple of an unknown entity type", "data/write", map[string]any{"tuples": []any{tuple("nope:1", "owner", "user:a")}}, schemaNotFound},
		{"data/write, tuple of an unknown relation", "data/write", map[string]any{"tuples": []any{tuple("doc:1", "nope", "user:a")}}, "ERROR_CODE_RELATION_DEFINITION_NOT_FOUND"},
		{"data/write, attribute of an unknown entity type", "data/write", map[string]any{"attributes": []any{attr("nope:1", "is_public", boolValue(true))}}, schemaNotFound},
		{"data/write, unknown attribute", "data/write", map[string]any{"attributes": []any{attr("doc:1", "nope", boolValue(true))}}, "ERROR_CODE_ATTRIBUTE_DEFINITION_NOT_FOUND"},
		{"data/delete, unknown entity type", "data/delete", map[string]any{"tuple_filter": map[string]any{"entity": map[string]any{"type": "nope"}}}, ""},
		{"relationships/read, unknown entity type", "data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "nope"}}}, ""},
		{"attributes/read, unknown entity type", "data/attributes/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "nope"}}}, ""},
	} {
		status, out := a.do(http.MethodPost, "/v1/tenants/t1/"+c.path, c.body)
		if strings.HasSuffix(c.path, "-stream") {
			// A stream that fails before its first result sends the error as its one
			// object, {"error": ...}.
			out, _ = out["error"].(map[string]any)
		}
		switch {
		case c.reason == "" && status != http.StatusOK:
			t.Errorf("%s: status %d %v, want 200", c.name, status, out)
		case c.reason != "" && (status != http.StatusNotFound || out["code"] != float64(codes.NotFound) || out["message"] != c.reason):
			t.Errorf("%s: status %d %v, want 404 code %d %s", c.name, status, out, codes.NotFound, c.reason)
		}
	}
}
