package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

const fgaModel = `model
  schema 1.1
type user
type group
  relations
    define member: [user, group#member]
type folder
  relations
    define viewer: [user, user:*]
type document
  relations
    define parent: [folder]
    define owner: [user]
    define editor: [user, group#member, user with in_office]
    define viewer: [user] or editor or owner or viewer from parent
    define blocked: [user]
    define can_read: viewer but not blocked
condition in_office(ip: ipaddress, office: ipaddress) {
  ip == office
}
`

func fgaClient(ts *testServer) openfgav1.OpenFGAServiceClient {
	return openfgav1.NewOpenFGAServiceClient(ts.conn)
}

// fgaCode is the OpenFGA error code of a call's error.
func fgaCode(t *testing.T, err error, want int32) {
	t.Helper()
	if st, _ := status.FromError(err); err == nil || int32(st.Code()) != want {
		t.Fatalf("error %v, want OpenFGA code %d", err, want)
	}
}

func writeFGAModel(t *testing.T, c openfgav1.OpenFGAServiceClient, storeID, dsl string) string {
	t.Helper()
	m, problems := fga.ParseDSL(dsl)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	resp, err := c.WriteAuthorizationModel(ctxT(t), &openfgav1.WriteAuthorizationModelRequest{
		StoreId: storeID, SchemaVersion: m.GetSchemaVersion(), TypeDefinitions: m.GetTypeDefinitions(), Conditions: m.GetConditions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetAuthorizationModelId()
}

func tk(object, relation, user string) *openfgav1.TupleKey {
	return &openfgav1.TupleKey{Object: object, Relation: relation, User: user}
}

func fgaCheck(t *testing.T, c openfgav1.OpenFGAServiceClient, req *openfgav1.CheckRequest) bool {
	t.Helper()
	resp, err := c.Check(ctxT(t), req)
	if err != nil {
		t.Fatalf("check %v: %v", req.GetTupleKey(), err)
	}
	return resp.GetAllowed()
}

func checkReq(storeID, object, relation, user string) *openfgav1.CheckRequest {
	return &openfgav1.CheckRequest{StoreId: storeID, TupleKey: &openfgav1.CheckRequestTupleKey{Object: object, Relation: relation, User: user}}
}

// TestOpenFGAAPI drives OpenFGA's API through its gRPC client on each backend, and
// on pebble again after a restart.
func TestOpenFGAAPI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, b := range []struct {
		name    string
		mutate  func(t *testing.T) func(*Config)
		restart bool
	}{
		{"memory", func(*testing.T) func(*Config) { return nil }, false},
		{"pebble", func(*testing.T) func(*Config) {
			return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", dir }
		}, true},
		{"postgres", func(t *testing.T) func(*Config) {
			uri := pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
			return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "postgres", uri }
		}, true},
	} {
		t.Run(b.name, func(t *testing.T) {
			mutate := b.mutate(t)
			ts := start(t, mutate)
			storeID, modelID := exerciseFGA(t, fgaClient(ts))
			if !b.restart {
				return
			}
			ts.stop(t)
			ts = start(t, mutate)
			c := fgaClient(ts)
			got, err := c.GetStore(ctxT(t), &openfgav1.GetStoreRequest{StoreId: storeID})
			if err != nil || got.GetName() != "renamed" {
				t.Fatalf("after a restart, GetStore: %v %v", got, err)
			}
			m, err := c.ReadAuthorizationModel(ctxT(t), &openfgav1.ReadAuthorizationModelRequest{StoreId: storeID, Id: modelID})
			if err != nil || m.GetAuthorizationModel().GetId() != modelID {
				t.Fatalf("after a restart, ReadAuthorizationModel: %v %v", m, err)
			}
			if !fgaCheck(t, c, checkReq(storeID, "document:1", "viewer", "user:anne")) {
				t.Error("after a restart, anne no longer views document:1")
			}
		})
	}
}

// exerciseFGA runs the API's calls on a fresh server; it returns a store and model
// that outlive it.
func exerciseFGA(t *testing.T, c openfgav1.OpenFGAServiceClient) (string, string) {
	ctx := ctxT(t)
	var ids []string
	for _, name := range []string{"store-a", "store-b", "store-c"} {
		resp, err := c.CreateStore(ctx, &openfgav1.CreateStoreRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetId())
	}
	page, err := c.ListStores(ctx, &openfgav1.ListStoresRequest{PageSize: wrapperspb.Int32(2)})
	if err != nil || len(page.GetStores()) != 2 || page.GetContinuationToken() == "" {
		t.Fatalf("ListStores page 1: %v %v", page, err)
	}
	rest, err := c.ListStores(ctx, &openfgav1.ListStoresRequest{PageSize: wrapperspb.Int32(2), ContinuationToken: page.GetContinuationToken()})
	if err != nil || len(rest.GetStores()) != 1 || rest.GetContinuationToken() != "" || rest.GetStores()[0].GetId() != ids[2] {
		t.Fatalf("ListStores page 2: %v %v", rest, err)
	}
	if _, err := c.DeleteStore(ctx, &openfgav1.DeleteStoreRequest{StoreId: ids[2]}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStore(ctx, &openfgav1.GetStoreRequest{StoreId: ids[2]})
	fgaCode(t, err, int32(openfgav1.NotFoundErrorCode_store_id_not_found))
	if _, err := c.UpdateStore(ctx, &openfgav1.UpdateStoreRequest{StoreId: ids[0], Name: "renamed"}); err != nil {
		t.Fatal(err)
	}
	storeID := ids[0]

	_, err = c.Check(ctx, checkReq(storeID, "document:1", "viewer", "user:anne"))
	fgaCode(t, err, int32(openfgav1.ErrorCode_latest_authorization_model_not_found))
	first := writeFGAModel(t, c, storeID, "model\n  schema 1.1\ntype user\n")
	modelID := writeFGAModel(t, c, storeID, fgaModel)
	models, err := c.ReadAuthorizationModels(ctx, &openfgav1.ReadAuthorizationModelsRequest{StoreId: storeID, PageSize: wrapperspb.Int32(1)})
	if err != nil || len(models.GetAuthorizationModels()) != 1 || models.GetAuthorizationModels()[0].GetId() != modelID {
		t.Fatalf("ReadAuthorizationModels is not newest first: %v %v", models, err)
	}
	older, err := c.ReadAuthorizationModels(ctx, &openfgav1.ReadAuthorizationModelsRequest{StoreId: storeID, PageSize: wrapperspb.Int32(1), ContinuationToken: models.GetContinuationToken()})
	if err != nil || len(older.GetAuthorizationModels()) != 1 || older.GetAuthorizationModels()[0].GetId() != first {
		t.Fatalf("ReadAuthorizationModels page 2: %v %v", older, err)
	}
	bad, _ := fga.ParseDSL("model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [team]\n    define editor: [user] or nothing\n")
	_, err = c.WriteAuthorizationModel(ctx, &openfgav1.WriteAuthorizationModelRequest{StoreId: storeID, SchemaVersion: "1.1", TypeDefinitions: bad.GetTypeDefinitions()})
	fgaCode(t, err, int32(openfgav1.ErrorCode_invalid_authorization_model))
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "team") || !strings.Contains(msg, "nothing") {
		t.Errorf("an invalid model's message does not name both of its problems: %s", msg)
	}

	exerciseFGAWrites(t, c, storeID)
	exerciseFGAQueries(t, c, storeID, first)
	return storeID, modelID
}

func exerciseFGAWrites(t *testing.T, c openfgav1.OpenFGAServiceClient, storeID string) {
	ctx := ctxT(t)
	write := func(writes []*openfgav1.TupleKey, deletes []*openfgav1.TupleKeyWithoutCondition, onDup, onMissing string) error {
		req := &openfgav1.WriteRequest{StoreId: storeID}
		if writes != nil {
			req.Writes = &openfgav1.WriteRequestWrites{TupleKeys: writes, OnDuplicate: onDup}
		}
		if deletes != nil {
			req.Deletes = &openfgav1.WriteRequestDeletes{TupleKeys: deletes, OnMissing: onMissing}
		}
		_, err := c.Write(ctx, req)
		return err
	}
	cond, _ := structpb.NewStruct(map[string]any{"office": "10.0.0.1"})
	good := []*openfgav1.TupleKey{
		tk("document:1", "viewer", "user:anne"),
		tk("document:1", "parent", "folder:f"),
		tk("folder:f", "viewer", "user:*"),
		tk("group:eng", "member", "user:bob"),
		tk("document:2", "editor", "group:eng#member"),
		{Object: "document:3", Relation: "editor", User: "user:carl", Condition: &openfgav1.RelationshipCondition{Name: "in_office", Context: cond}},
		tk("document:1", "blocked", "user:dan"),
	}
	// A bad tuple among good ones changes nothing.
	err := write(append(slices.Clone(good), tk("document:1", "viewer", "team:x")), nil, "", "")
	fgaCode(t, err, int32(openfgav1.ErrorCode_invalid_tuple))
	if n := len(readFGA(t, c, storeID, nil)); n != 0 {
		t.Fatalf("a refused write left %d tuples", n)
	}
	if err := write(good, nil, "", ""); err != nil {
		t.Fatal(err)
	}
	err = write([]*openfgav1.TupleKey{tk("document:9", "viewer", "user:x"), good[0]}, nil, "", "")
	fgaCode(t, err, int32(openfgav1.ErrorCode_write_failed_due_to_invalid_input))
	if err := write([]*openfgav1.TupleKey{tk("document:9", "viewer", "user:x"), good[0]}, nil, "ignore", ""); err != nil {
		t.Fatalf("on_duplicate ignore: %v", err)
	}
	missing := []*openfgav1.TupleKeyWithoutCondition{{Object: "document:9", Relation: "viewer", User: "user:x"}, {Object: "document:9", Relation: "viewer", User: "user:nobody"}}
	err = write(nil, missing, "", "")
	fgaCode(t, err, int32(openfgav1.ErrorCode_write_failed_due_to_invalid_input))
	if n := len(readFGA(t, c, storeID, &openfgav1.ReadRequestTupleKey{Object: "document:9"})); n != 1 {
		t.Fatalf("a refused delete changed document:9's tuples: %d left", n)
	}
	if err := write(nil, missing, "", "ignore"); err != nil {
		t.Fatalf("on_missing ignore: %v", err)
	}
	err = write([]*openfgav1.TupleKey{tk("document:8", "viewer", "user:x"), tk("document:8", "viewer", "user:x")}, nil, "", "")
	fgaCode(t, err, int32(openfgav1.ErrorCode_cannot_allow_duplicate_tuples_in_one_request))
	many := make([]*openfgav1.TupleKey, 101)
	for i := range many {
		many[i] = tk("document:many", "viewer", "user:u"+strings.Repeat("x", i))
	}
	fgaCode(t, write(many, nil, "", ""), int32(openfgav1.ErrorCode_exceeded_entity_limit))

	all := readFGA(t, c, storeID, nil)
	if len(all) != len(good) {
		t.Fatalf("Read of every tuple: %d, want %d", len(all), len(good))
	}
	var paged []*openfgav1.Tuple
	token := ""
	for range 10 {
		resp, err := c.Read(ctx, &openfgav1.ReadRequest{StoreId: storeID, PageSize: wrapperspb.Int32(3), ContinuationToken: token})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, resp.GetTuples()...)
		if token = resp.GetContinuationToken(); token == "" {
			break
		}
	}
	if len(paged) != len(good) {
		t.Fatalf("Read in pages of 3: %d tuples, want %d", len(paged), len(good))
	}
	if got := readFGA(t, c, storeID, &openfgav1.ReadRequestTupleKey{Object: "document:", User: "user:anne"}); len(got) != 1 || got[0].GetKey().GetObject() != "document:1" {
		t.Fatalf("Read by type and user: %v", got)
	}
	_, err = c.Read(ctx, &openfgav1.ReadRequest{StoreId: storeID, ContinuationToken: "garbage"})
	fgaCode(t, err, int32(openfgav1.ErrorCode_invalid_continuation_token))

	changes, err := c.ReadChanges(ctx, &openfgav1.ReadChangesRequest{StoreId: storeID, Type: "document", PageSize: wrapperspb.Int32(100)})
	if err != nil {
		t.Fatal(err)
	}
	var writes, deletes int
	for _, ch := range changes.GetChanges() {
		if !strings.HasPrefix(ch.GetTupleKey().GetObject(), "document:") || ch.GetTimestamp() == nil {
			t.Fatalf("ReadChanges of type document: %v", ch)
		}
		if ch.GetOperation() == openfgav1.TupleOperation_TUPLE_OPERATION_DELETE {
			deletes++
		} else {
			writes++
		}
	}
	if writes != 6 || deletes != 1 {
		t.Fatalf("ReadChanges: %d writes and %d deletes of documents, want 6 and 1: %v", writes, deletes, changes)
	}
	next, err := c.ReadChanges(ctx, &openfgav1.ReadChangesRequest{StoreId: storeID, Type: "document", ContinuationToken: changes.GetContinuationToken()})
	if err != nil || len(next.GetChanges()) != 0 {
		t.Fatalf("ReadChanges after the last change: %v %v", next, err)
	}
	_, err = c.ReadChanges(ctx, &openfgav1.ReadChangesRequest{StoreId: storeID, Type: "folder", ContinuationToken: changes.GetContinuationToken()})
	fgaCode(t, err, int32(openfgav1.ErrorCode_query_string_type_continuation_token_mismatch))
}

func readFGA(t *testing.T, c openfgav1.OpenFGAServiceClient, storeID string, key *openfgav1.ReadRequestTupleKey) []*openfgav1.Tuple {
	t.Helper()
	resp, err := c.Read(ctxT(t), &openfgav1.ReadRequest{StoreId: storeID, TupleKey: key, PageSize: wrapperspb.Int32(100)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTuples()
}

func exerciseFGAQueries(t *testing.T, c openfgav1.OpenFGAServiceClient, storeID, firstModel string) {
	ctx := ctxT(t)
	for _, want := range []struct {
		object, relation, user string
		allowed                bool
	}{
		{"document:1", "viewer", "user:anne", true},
		{"document:1", "viewer", "user:zed", true}, // user:* on folder:f, document:1's parent
		{"document:1", "can_read", "user:dan", false},
		{"document:1", "can_read", "user:anne", true},
		{"document:2", "editor", "user:bob", true},
		{"document:2", "viewer", "user:anne", false},
	} {
		if got := fgaCheck(t, c, checkReq(storeID, want.object, want.relation, want.user)); got != want.allowed {
			t.Errorf("check %s#%s@%s = %v, want %v", want.object, want.relation, want.user, got, want.allowed)
		}
	}
	// A contextual tuple counts for its request alone.
	req := checkReq(storeID, "document:2", "viewer", "user:eve")
	req.ContextualTuples = &openfgav1.ContextualTupleKeys{TupleKeys: []*openfgav1.TupleKey{tk("group:eng", "member", "user:eve")}}
	if !fgaCheck(t, c, req) || fgaCheck(t, c, checkReq(storeID, "document:2", "viewer", "user:eve")) {
		t.Error("a contextual tuple did not count for its check alone")
	}
	// Conditions: the context decides, and a missing parameter is an error.
	in, _ := structpb.NewStruct(map[string]any{"ip": "10.0.0.1"})
	out, _ := structpb.NewStruct(map[string]any{"ip": "10.0.0.2"})
	req = checkReq(storeID, "document:3", "editor", "user:carl")
	req.Context = in
	if !fgaCheck(t, c, req) {
		t.Error("carl in the office is not an editor")
	}
	req.Context = out
	if fgaCheck(t, c, req) {
		t.Error("carl out of the office is an editor")
	}
	_, err := c.Check(ctx, checkReq(storeID, "document:3", "editor", "user:carl"))
	fgaCode(t, err, int32(openfgav1.ErrorCode_validation_error))
	// A pinned model: the first has no document type.
	req = checkReq(storeID, "document:1", "viewer", "user:anne")
	req.AuthorizationModelId = firstModel
	_, err = c.Check(ctx, req)
	fgaCode(t, err, int32(openfgav1.ErrorCode_validation_error))
	req.AuthorizationModelId = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
	_, err = c.Check(ctx, req)
	fgaCode(t, err, int32(openfgav1.ErrorCode_authorization_model_not_found))
	req = checkReq(storeID, "document:1", "viewer", "user:anne")
	req.Consistency = openfgav1.ConsistencyPreference_HIGHER_CONSISTENCY
	if !fgaCheck(t, c, req) {
		t.Error("HIGHER_CONSISTENCY check")
	}

	batch, err := c.BatchCheck(ctx, &openfgav1.BatchCheckRequest{StoreId: storeID, Checks: []*openfgav1.BatchCheckItem{
		{TupleKey: &openfgav1.CheckRequestTupleKey{Object: "document:1", Relation: "viewer", User: "user:anne"}, CorrelationId: "a"},
		{TupleKey: &openfgav1.CheckRequestTupleKey{Object: "document:2", Relation: "viewer", User: "user:anne"}, CorrelationId: "b"},
		{TupleKey: &openfgav1.CheckRequestTupleKey{Object: "document:1", Relation: "nope", User: "user:anne"}, CorrelationId: "c"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := batch.GetResult()
	if !r["a"].GetAllowed() || r["b"].GetAllowed() || r["b"].GetError() != nil || r["c"].GetError().GetInputError() == 0 {
		t.Errorf("BatchCheck: %v", r)
	}

	objs, err := c.ListObjects(ctx, &openfgav1.ListObjectsRequest{StoreId: storeID, Type: "document", Relation: "viewer", User: "user:bob"})
	got := slices.Sorted(slices.Values(objs.GetObjects()))
	if err != nil || !slices.Equal(got, []string{"document:1", "document:2"}) { // document:1 through folder:f's user:*
		t.Errorf("ListObjects: %v %v", objs, err)
	}
	stream, err := c.StreamedListObjects(ctx, &openfgav1.StreamedListObjectsRequest{StoreId: storeID, Type: "document", Relation: "viewer", User: "user:anne"})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		streamed = append(streamed, m.GetObject())
	}
	if !slices.Equal(streamed, []string{"document:1"}) {
		t.Errorf("StreamedListObjects: %v", streamed)
	}

	for _, want := range []struct {
		filter *openfgav1.UserTypeFilter
		user   string
	}{
		{&openfgav1.UserTypeFilter{Type: "user"}, "user:bob"},
		{&openfgav1.UserTypeFilter{Type: "group", Relation: "member"}, "group:eng#member"},
	} {
		users, err := c.ListUsers(ctx, &openfgav1.ListUsersRequest{
			StoreId: storeID, Object: &openfgav1.Object{Type: "document", Id: "2"}, Relation: "viewer",
			UserFilters: []*openfgav1.UserTypeFilter{want.filter},
		})
		if err != nil || len(users.GetUsers()) != 1 || fgaUser(users.GetUsers()[0]) != want.user {
			t.Errorf("ListUsers of %v: %v %v", want.filter, users, err)
		}
	}
	tree, err := c.Expand(ctx, &openfgav1.ExpandRequest{StoreId: storeID, TupleKey: &openfgav1.ExpandRequestTupleKey{Object: "document:1", Relation: "viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	union := tree.GetTree().GetRoot().GetUnion().GetNodes()
	if len(union) != 4 || !slices.Equal(union[0].GetLeaf().GetUsers().GetUsers(), []string{"user:anne"}) ||
		union[1].GetLeaf().GetComputed().GetUserset() != "document:1#editor" ||
		union[3].GetLeaf().GetTupleToUserset().GetComputed()[0].GetUserset() != "folder:f#viewer" {
		t.Errorf("Expand: %v", tree)
	}

	_, err = c.WriteAssertions(ctx, &openfgav1.WriteAssertionsRequest{StoreId: storeID, AuthorizationModelId: firstModel, Assertions: []*openfgav1.Assertion{
		{TupleKey: &openfgav1.AssertionTupleKey{Object: "user:a", Relation: "nope", User: "user:b"}},
	}})
	fgaCode(t, err, int32(openfgav1.ErrorCode_validation_error))
	models, _ := c.ReadAuthorizationModels(ctx, &openfgav1.ReadAuthorizationModelsRequest{StoreId: storeID})
	latest := models.GetAuthorizationModels()[0].GetId()
	assertion := &openfgav1.Assertion{TupleKey: &openfgav1.AssertionTupleKey{Object: "document:1", Relation: "viewer", User: "user:anne"}, Expectation: true}
	if _, err := c.WriteAssertions(ctx, &openfgav1.WriteAssertionsRequest{StoreId: storeID, AuthorizationModelId: latest, Assertions: []*openfgav1.Assertion{assertion}}); err != nil {
		t.Fatal(err)
	}
	read, err := c.ReadAssertions(ctx, &openfgav1.ReadAssertionsRequest{StoreId: storeID, AuthorizationModelId: latest})
	if err != nil || len(read.GetAssertions()) != 1 || !read.GetAssertions()[0].GetExpectation() {
		t.Errorf("ReadAssertions: %v %v", read, err)
	}
}

// fgaHTTP sends an OpenFGA HTTP request and decodes its JSON answer.
func fgaHTTP(t *testing.T, ts *testServer, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
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
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: %q is not JSON", method, path, data)
	}
	return resp.StatusCode, out
}

// TestOpenFGAHTTP drives OpenFGA's HTTP API as its SDKs do: JSON with proto field
// names, OpenFGA's error bodies and statuses, the key as a bearer token.
func TestOpenFGAHTTP(t *testing.T) {
	ts := start(t, nil)
	code, out := fgaHTTP(t, ts, "", http.MethodPost, "/stores", map[string]any{"name": "store-s"})
	if code != http.StatusUnauthorized || out["code"] != "bearer_token_missing" {
		t.Errorf("without a key: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores", map[string]any{"name": "store-s"})
	if code != http.StatusCreated || out["id"] == nil || out["created_at"] == nil {
		t.Fatalf("POST /stores: %d %v", code, out)
	}
	id := out["id"].(string)
	code, out = fgaHTTP(t, ts, testKey, http.MethodGet, "/stores/"+id, nil)
	if code != http.StatusOK || out["name"] != "store-s" {
		t.Errorf("GET /stores/{id}: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodGet, "/stores/01JZZZZZZZZZZZZZZZZZZZZZZZ", nil)
	if code != http.StatusNotFound || out["code"] != "store_id_not_found" {
		t.Errorf("GET of an unknown store: %d %v", code, out)
	}
	model, _ := fga.ParseDSL(fgaModel)
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores/"+id+"/authorization-models", modelJSON(t, model))
	if code != http.StatusCreated || out["authorization_model_id"] == nil {
		t.Fatalf("POST authorization-models: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores/"+id+"/write", map[string]any{
		"writes": map[string]any{"tuple_keys": []any{map[string]any{"object": "document:1", "relation": "viewer", "user": "user:anne"}}},
	})
	if code != http.StatusOK {
		t.Fatalf("POST write: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores/"+id+"/check", map[string]any{
		"tuple_key": map[string]any{"object": "document:1", "relation": "viewer", "user": "user:anne"},
	})
	if code != http.StatusOK || out["allowed"] != true {
		t.Errorf("POST check: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores/"+id+"/check", map[string]any{
		"tuple_key": map[string]any{"object": "document:1", "relation": "nope", "user": "user:anne"},
	})
	if code != http.StatusBadRequest || out["code"] != "validation_error" || out["message"] == "" {
		t.Errorf("POST check of an unknown relation: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodPost, "/stores/"+id+"/list-objects", map[string]any{
		"type": "document", "relation": "viewer", "user": "user:anne",
	})
	if code != http.StatusOK || len(out["objects"].([]any)) != 1 {
		t.Errorf("POST list-objects: %d %v", code, out)
	}
	code, out = fgaHTTP(t, ts, testKey, http.MethodGet, "/stores/"+id+"/nothing-here", nil)
	if code != http.StatusNotFound || out["code"] != "undefined_endpoint" {
		t.Errorf("an unknown path: %d %v", code, out)
	}
	// SpiceDB's gateway still answers beside it.
	if _, out := fgaHTTP(t, ts, testKey, http.MethodPost, "/v1/schema/read", map[string]any{}); out["code"] != float64(codes.NotFound) {
		t.Errorf("the SpiceDB gateway's /v1/schema/read without a schema: %v", out)
	}
}

// modelJSON is a model as WriteAuthorizationModel's JSON body.
func modelJSON(t *testing.T, m *openfgav1.AuthorizationModel) map[string]any {
	t.Helper()
	raw, err := protojson.Marshal(&openfgav1.WriteAuthorizationModelRequest{SchemaVersion: m.GetSchemaVersion(), TypeDefinitions: m.GetTypeDefinitions(), Conditions: m.GetConditions()})
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// TestOpenFGADisabled: with the API off, neither listener serves it.
func TestOpenFGADisabled(t *testing.T) {
	ts := start(t, func(c *Config) { c.OpenFGA.Disabled = true })
	_, err := fgaClient(ts).ListStores(ctxT(t), &openfgav1.ListStoresRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("gRPC ListStores with the API off: %v", err)
	}
	if code, _ := fgaHTTP(t, ts, testKey, http.MethodGet, "/stores", nil); code != http.StatusNotFound {
		t.Errorf("GET /stores with the API off: %d", code)
	}
}

// fgaUser spells a ListUsers answer as a tuple's user.
func fgaUser(u *openfgav1.User) string {
	switch {
	case u.GetObject() != nil:
		return u.GetObject().GetType() + ":" + u.GetObject().GetId()
	case u.GetUserset() != nil:
		return u.GetUserset().GetType() + ":" + u.GetUserset().GetId() + "#" + u.GetUserset().GetRelation()
	}
	return u.GetWildcard().GetType() + ":*"
}
