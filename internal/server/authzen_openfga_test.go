package server

import (
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latch-authz/latch/internal/fga"
)

// todoModel is the AuthZEN interop "todo" application as an OpenFGA model: roles on
// the application, and ownership of a todo as a tuple whose condition compares the
// owner's email with the resource's ownerID property (resource_ownerID in the
// condition context, as AuthZEN's properties reach it).
const todoModel = `model
  schema 1.1

type user
  relations
    define can_read_user: [user:*]

type app
  relations
    define viewer: [user]
    define editor: [user]
    define admin: [user]
    define evil_genius: [user]

type todo
  relations
    define app: [app]
    define owner: [user with is_owner]
    define can_read_todos: viewer from app or editor from app or admin from app
    define can_create_todo: editor from app or admin from app
    define can_update_todo: evil_genius from app or (editor from app and owner)
    define can_delete_todo: admin from app or (editor from app and owner)

condition is_owner(resource_ownerID: string, email: string) {
  resource_ownerID == email
}
`

// todoUser is one person of the interop scenario: the subject id the PEP sends, the
// email that names them as a resource and an owner, their roles, and the scenario's
// expected decisions for its eight requests (see todoRequests).
type todoUser struct {
	id, email string
	roles     []string
	expected  [8]bool
}

// todoUsers are the AuthZEN interop todo scenario's people and decisions
// (authzen-todo-backend/test/decisions-1.0-implementers-draft.json in the OpenID
// AuthZEN repository): Rick is admin and evil genius, Morty and Summer editors, Beth
// and Jerry viewers.
var todoUsers = []todoUser{
	{"CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "rick@the-citadel.com", []string{"admin", "evil_genius"}, [8]bool{true, true, true, true, true, true, true, true}},
	{"CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "morty@the-citadel.com", []string{"editor"}, [8]bool{true, true, true, true, false, true, false, true}},
	{"CiRmZDI2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "summer@the-smiths.com", []string{"editor"}, [8]bool{true, true, true, true, false, true, false, true}},
	{"CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "beth@the-smiths.com", []string{"viewer"}, [8]bool{true, true, true, false, false, false, false, false}},
	{"CiRmZDQ2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "jerry@the-smiths.com", []string{"viewer"}, [8]bool{true, true, true, false, false, false, false, false}},
}

const todoID = "7240d0db-8ff0-41ec-98b2-34a096273b9f"

// todoRequests are the scenario's eight requests for u, in its order: read Beth, read
// themself, read the todos, create a todo, update and delete Rick's todo and their own.
func todoRequests(u todoUser) []map[string]any {
	todo := func(owner string) map[string]any {
		return map[string]any{"type": "todo", "id": todoID, "properties": map[string]any{"ownerID": owner}}
	}
	subject := map[string]any{"type": "user", "id": u.id}
	req := func(action string, resource map[string]any) map[string]any {
		return map[string]any{"subject": subject, "action": act(action), "resource": resource}
	}
	return []map[string]any{
		req("can_read_user", map[string]any{"type": "user", "id": "beth@the-smiths.com"}),
		req("can_read_user", map[string]any{"type": "user", "id": u.email}),
		req("can_read_todos", map[string]any{"type": "todo", "id": "todo-1"}),
		req("can_create_todo", map[string]any{"type": "todo", "id": "todo-1"}),
		req("can_update_todo", todo("rick@the-citadel.com")),
		req("can_update_todo", todo(u.email)),
		req("can_delete_todo", todo("rick@the-citadel.com")),
		req("can_delete_todo", todo(u.email)),
	}
}

// todoStore creates an OpenFGA store through OpenFGA's HTTP API with the todo model and
// the scenario's tuples, and returns its id.
func todoStore(t *testing.T, ts *testServer) string {
	t.Helper()
	code, out := authzenPost(t, ts, "/stores", map[string]any{"name": "todo"})
	if code != http.StatusCreated {
		t.Fatalf("creating a store: %d %v", code, out)
	}
	id := out["id"].(string)
	model, problems := fga.ParseDSL(todoModel)
	if len(problems) > 0 {
		t.Fatalf("the todo model: %v", problems)
	}
	raw, err := protojson.Marshal(model)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := authzenPost(t, ts, "/stores/"+id+"/authorization-models", string(raw)); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("writing the model: %d %v", code, out)
	}
	tuple := func(user, relation, object string) map[string]any {
		return map[string]any{"user": user, "relation": relation, "object": object}
	}
	tuples := []any{tuple("app:todo", "app", "todo:todo-1"), tuple("app:todo", "app", "todo:"+todoID)}
	for _, u := range todoUsers {
		tuples = append(tuples, tuple("user:*", "can_read_user", "user:"+u.email))
		for _, role := range u.roles {
			tuples = append(tuples, tuple("user:"+u.id, role, "app:todo"))
		}
		owner := tuple("user:"+u.id, "owner", "todo:"+todoID)
		owner["condition"] = map[string]any{"name": "is_owner", "context": map[string]any{"email": u.email}}
		tuples = append(tuples, owner)
	}
	if code, out := authzenPost(t, ts, "/stores/"+id+"/write", map[string]any{"writes": map[string]any{"tuple_keys": tuples}}); code != http.StatusOK {
		t.Fatalf("writing the tuples: %d %v", code, out)
	}
	return id
}

// TestAuthZENInteropTodoOnOpenFGAStores runs the AuthZEN interop todo scenario's
// decisions through /stores/{store_id}/access/v1/evaluation on an OpenFGA store, and
// again as one access evaluations request per person, on memory and pebble; then the
// per-store searches and OpenFGA's rules (its ids, a missing condition parameter
// failing the evaluation, an unknown store 404).
func TestAuthZENInteropTodoOnOpenFGAStores(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			ts := start(t, func(c *Config) {
				if backend == "pebble" {
					c.DatastoreEngine, c.DatastoreURI = "pebble", filepath.Join(t.TempDir(), "data")
				}
			})
			id := todoStore(t, ts)
			base := "/stores/" + id + "/access/v1/"
			for _, u := range todoUsers {
				reqs := todoRequests(u)
				var items []any
				for i, req := range reqs {
					code, out := authzenPost(t, ts, base+"evaluation", req)
					if code != http.StatusOK || out["decision"] != u.expected[i] {
						t.Errorf("%s, request %d (%v): %d %v, want decision %v", u.email, i, req, code, out, u.expected[i])
					}
					items = append(items, map[string]any{"action": req["action"], "resource": req["resource"]})
				}
				batch := map[string]any{"subject": map[string]any{"type": "user", "id": u.id}, "evaluations": items}
				code, out := authzenPost(t, ts, base+"evaluations", batch)
				if got := decisions(out); code != http.StatusOK || !reflect.DeepEqual(got, u.expected[:]) {
					t.Errorf("%s as one evaluations request: %d %v, want %v", u.email, code, got, u.expected)
				}
			}
			testAuthZENOpenFGARules(t, ts, id)
		})
	}
}

func testAuthZENOpenFGARules(t *testing.T, ts *testServer, id string) {
	base := "/stores/" + id + "/access/v1/"
	morty := map[string]any{"type": "user", "id": todoUsers[1].id}
	// Morty's actions on his todo (every OpenFGA relation is an action; the model's
	// relations are in name order), who reads the todos, and the todos Morty reads.
	actions := map[string]any{"subject": morty, "resource": map[string]any{"type": "todo", "id": todoID, "properties": map[string]any{"ownerID": "morty@the-citadel.com"}}}
	if names, _ := searchAll(t, ts, base+"search/action", actions, 0); !reflect.DeepEqual(names, []string{"can_create_todo", "can_delete_todo", "can_read_todos", "can_update_todo", "owner"}) {
		t.Errorf("Morty's actions on his todo: %v", names)
	}
	readers := map[string]any{"subject": map[string]any{"type": "user"}, "action": act("can_read_todos"), "resource": map[string]any{"type": "todo", "id": "todo-1"}}
	var want []string
	for _, u := range todoUsers {
		want = append(want, u.id)
	}
	if ids, _ := searchAll(t, ts, base+"search/subject", readers, 2); !reflect.DeepEqual(ids, sortedCopy(want)) {
		t.Errorf("who reads the todos, 2 a page: %v", ids)
	}
	todos := map[string]any{"subject": morty, "action": act("can_read_todos"), "resource": map[string]any{"type": "todo"}, "page": map[string]any{"limit": 1}}
	if code, out := authzenPost(t, ts, base+"search/resource", todos); code != http.StatusOK || out["page"].(map[string]any)["total"] != float64(2) {
		t.Errorf("the todos Morty reads (ListObjects' whole answer, so a total): %d %v", code, out)
	}
	if ids, _ := searchAll(t, ts, base+"search/resource", todos, 1); !reflect.DeepEqual(ids, []string{todoID, "todo-1"}) {
		t.Errorf("the todos Morty reads, 1 a page: %v", ids)
	}
	wildcard := map[string]any{"subject": map[string]any{"type": "user"}, "action": act("can_read_user"), "resource": map[string]any{"type": "user", "id": "beth@the-smiths.com"}}
	if ids, _ := searchAll(t, ts, base+"search/subject", wildcard, 0); !reflect.DeepEqual(ids, []string{"*"}) {
		t.Errorf("who reads Beth: %v", ids)
	}
	// OpenFGA's rules: a condition missing a parameter fails the evaluation.
	noOwner := map[string]any{"subject": morty, "action": act("can_update_todo"), "resource": map[string]any{"type": "todo", "id": todoID}}
	if code, out := authzenPost(t, ts, base+"evaluation", noOwner); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "resource_ownerID") {
		t.Errorf("without the ownerID property: %d %v", code, out)
	}
	if code, out := authzenPost(t, ts, "/stores/01ARZ3NDEKTSV4RRFFQ69G5FAV/access/v1/evaluation", todoRequests(todoUsers[0])[0]); code != http.StatusNotFound {
		t.Errorf("an unknown store: %d %v", code, out)
	}
	if code, out := authzenPost(t, ts, base+"evaluation", map[string]any{"subject": map[string]any{"type": "user", "id": "a b"}, "action": act("can_read_user"), "resource": map[string]any{"type": "user", "id": "x"}}); code != http.StatusBadRequest || !strings.Contains(out["text"].(string), "subject.id") {
		t.Errorf("an id with a space: %d %v", code, out)
	}
	for _, path := range []string{"/.well-known/authzen-configuration/" + id, "/.well-known/authzen-configuration/stores/" + id} {
		code, out := authzenDo(t, ts, testKey, http.MethodGet, path, nil)
		pdp := "http://" + ts.httpAddr + "/stores/" + id
		if code != http.StatusOK || out["policy_decision_point"] != pdp || out["access_evaluation_endpoint"] != pdp+"/access/v1/evaluation" {
			t.Errorf("the store's metadata at %s: %d %v, want PDP %s", path, code, out, pdp)
		}
	}
	if code, out := authzenDo(t, ts, "", http.MethodGet, "/.well-known/authzen-configuration/"+id, nil); code != http.StatusUnauthorized {
		t.Errorf("a store's metadata without a key: %d %v", code, out)
	}
	if code, out := authzenDo(t, ts, testKey, http.MethodGet, "/.well-known/authzen-configuration/01ARZ3NDEKTSV4RRFFQ69G5FAV", nil); code != http.StatusNotFound {
		t.Errorf("an unknown store's metadata: %d %v", code, out)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

// TestAuthZENOpenFGACycles: on an OpenFGA store, searches resolve a cycle in the data
// as OpenFGA's ListObjects and ListUsers do, where the engine's lookups stop at the
// depth limit.
func TestAuthZENOpenFGACycles(t *testing.T) {
	ts := start(t, nil)
	code, out := authzenPost(t, ts, "/stores", map[string]any{"name": "cycles"})
	if code != http.StatusCreated {
		t.Fatalf("creating a store: %d %v", code, out)
	}
	id := out["id"].(string)
	model, problems := fga.ParseDSL("model\n  schema 1.1\ntype user\ntype group\n  relations\n    define member: [user, group#member]\n")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	raw, _ := protojson.Marshal(model)
	if code, out := authzenPost(t, ts, "/stores/"+id+"/authorization-models", string(raw)); code != http.StatusCreated {
		t.Fatalf("writing the model: %d %v", code, out)
	}
	tuples := []any{
		map[string]any{"user": "user:ann", "relation": "member", "object": "group:a"},
		map[string]any{"user": "group:a#member", "relation": "member", "object": "group:b"},
		map[string]any{"user": "group:b#member", "relation": "member", "object": "group:a"},
	}
	if code, out := authzenPost(t, ts, "/stores/"+id+"/write", map[string]any{"writes": map[string]any{"tuple_keys": tuples}}); code != http.StatusOK {
		t.Fatalf("writing the tuples: %d %v", code, out)
	}
	base := "/stores/" + id + "/access/v1/"
	groups := map[string]any{"subject": map[string]any{"type": "user", "id": "ann"}, "action": act("member"), "resource": map[string]any{"type": "group"}}
	if ids, _ := searchAll(t, ts, base+"search/resource", groups, 1); !reflect.DeepEqual(ids, []string{"a", "b"}) {
		t.Errorf("ann's groups: %v", ids)
	}
	members := map[string]any{"subject": map[string]any{"type": "user"}, "action": act("member"), "resource": map[string]any{"type": "group", "id": "b"}}
	if ids, _ := searchAll(t, ts, base+"search/subject", members, 1); !reflect.DeepEqual(ids, []string{"ann"}) {
		t.Errorf("group b's members: %v", ids)
	}
	check := map[string]any{"subject": map[string]any{"type": "user", "id": "ann"}, "action": act("member"), "resource": map[string]any{"type": "group", "id": "b"}}
	if code, out := authzenPost(t, ts, base+"evaluation", check); code != http.StatusOK || out["decision"] != true {
		t.Errorf("ann in group b: %d %v", code, out)
	}
}
