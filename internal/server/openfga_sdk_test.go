package server

import (
	"encoding/json"
	"slices"
	"testing"

	fgasdk "github.com/openfga/go-sdk"
	"github.com/openfga/go-sdk/client"
	"github.com/openfga/go-sdk/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latch-authz/latch/internal/fga"
)

// TestOpenFGAGoSDK drives the HTTP API with OpenFGA's Go SDK, unchanged but for the
// address and key: a store, a model, tuples with a condition, checks, list
// objects, read and read changes.
func TestOpenFGAGoSDK(t *testing.T) {
	ts := start(t, nil)
	ctx := ctxT(t)
	c, err := client.NewSdkClient(&client.ClientConfiguration{
		ApiUrl:      "http://" + ts.httpAddr,
		Credentials: &credentials.Credentials{Method: credentials.CredentialsMethodApiToken, Config: &credentials.Config{ApiToken: testKey}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := c.CreateStore(ctx).Body(client.ClientCreateStoreRequest{Name: "sdk-store"}).Execute()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetStoreId(store.GetId()); err != nil {
		t.Fatal(err)
	}
	m, _ := fga.ParseDSL(fgaModel)
	raw, _ := protojson.Marshal(m)
	var body fgasdk.WriteAuthorizationModelRequest
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	model, err := c.WriteAuthorizationModel(ctx).Body(body).Execute()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAuthorizationModelId(model.GetAuthorizationModelId()); err != nil {
		t.Fatal(err)
	}
	cond := fgasdk.NewRelationshipCondition("in_office")
	cond.SetContext(map[string]any{"office": "10.0.0.1"})
	_, err = c.Write(ctx).Body(client.ClientWriteRequest{Writes: []client.ClientTupleKey{
		{User: "user:anne", Relation: "viewer", Object: "document:1"},
		{User: "user:carl", Relation: "editor", Object: "document:3", Condition: cond},
	}}).Execute()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"ip": "10.0.0.1"}
	for _, want := range []struct {
		req     client.ClientCheckRequest
		allowed bool
	}{
		{client.ClientCheckRequest{User: "user:anne", Relation: "viewer", Object: "document:1"}, true},
		{client.ClientCheckRequest{User: "user:bob", Relation: "viewer", Object: "document:1"}, false},
		{client.ClientCheckRequest{User: "user:carl", Relation: "editor", Object: "document:3", Context: &in}, true},
		{client.ClientCheckRequest{
			User: "user:bob", Relation: "viewer", Object: "document:2",
			ContextualTuples: []client.ClientContextualTupleKey{{User: "user:bob", Relation: "owner", Object: "document:2"}},
		}, true},
	} {
		resp, err := c.Check(ctx).Body(want.req).Execute()
		if err != nil || resp.GetAllowed() != want.allowed {
			t.Errorf("check %+v: %v %v", want.req, resp, err)
		}
	}
	objs, err := c.ListObjects(ctx).Body(client.ClientListObjectsRequest{User: "user:anne", Relation: "viewer", Type: "document"}).Execute()
	if err != nil || !slices.Equal(objs.GetObjects(), []string{"document:1"}) {
		t.Errorf("ListObjects: %v %v", objs, err)
	}
	read, err := c.Read(ctx).Body(client.ClientReadRequest{}).Execute()
	if err != nil || len(read.GetTuples()) != 2 {
		t.Errorf("Read: %v %v", read, err)
	}
	changes, err := c.ReadChanges(ctx).Body(client.ClientReadChangesRequest{Type: "document"}).Execute()
	if err != nil || len(changes.GetChanges()) != 2 || changes.GetContinuationToken() == "" {
		t.Errorf("ReadChanges: %v %v", changes, err)
	}
	_, err = c.Check(ctx).Body(client.ClientCheckRequest{User: "user:anne", Relation: "nope", Object: "document:1"}).Execute()
	if ve, ok := err.(fgasdk.FgaApiValidationError); !ok || ve.ResponseCode() != fgasdk.ERRORCODE_VALIDATION_ERROR {
		t.Errorf("a check of an unknown relation: %T %v", err, err)
	}
}
