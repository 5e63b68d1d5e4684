package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	"github.com/authzed/authzed-go/pkg/responsemeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// counts returns the dispatched and cached operation counts of a trailer, or -1 for
// one that is absent.
func counts(t *testing.T, md metadata.MD) (dispatched, cached int) {
	t.Helper()
	parse := func(key string) int {
		v := md.Get(key)
		if len(v) == 0 {
			return -1
		}
		n, err := strconv.Atoi(v[0])
		if err != nil {
			t.Fatalf("%s: %q is not a number", key, v[0])
		}
		return n
	}
	return parse(string(responsemeta.DispatchedOperationsCount)), parse(string(responsemeta.CachedOperationsCount))
}

// Every call returns the client's x-request-id (or a new one) in its trailer, and, as
// SpiceDB, nothing in its header, with SpiceDB's dispatched and cached operation
// counts. A check's follow the engine's work: an evaluated check dispatches one
// operation per subproblem, and the same check again is answered from the cache.
// Other calls count one dispatch when they succeed (WriteSchema one per definition
// and caveat), and a call refused before its work counts none.
func TestResponseMetadataGRPC(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("group", "eng", "member", "user", "amy", ""),
		relationship("document", "readme", "viewer", "group", "eng", "member"))
	check := &v1.CheckPermissionRequest{Consistency: fullyConsistent(), Resource: obj("document", "readme"), Permission: "view", Subject: sub("user", "amy", "")}
	call := func(id string) (header, trailer metadata.MD) {
		ctx := ctxT(t)
		if id != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", id)
		}
		resp, err := ts.perms.CheckPermission(ctx, check, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil || resp.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
			t.Fatalf("check: %v %v", resp, err)
		}
		return header, trailer
	}

	header, trailer := call("req-1")
	if tr := trailer.Get("x-request-id"); len(header.Get("x-request-id")) != 0 || len(tr) != 1 || tr[0] != "req-1" {
		t.Errorf("header %v, trailer x-request-id %q: want the client's req-1 in the trailer only", header, tr)
	}
	// view → viewer → group:eng#member: three subproblems, none cached yet.
	if d, c := counts(t, trailer); d != 3 || c != 0 {
		t.Errorf("first check: dispatched %d, cached %d; want 3 and 0", d, c)
	}
	_, trailer = call("")
	id := trailer.Get("x-request-id")
	if len(id) != 1 || id[0] == "" || id[0] == "req-1" {
		t.Errorf("generated x-request-id %q", id)
	}
	if d, c := counts(t, trailer); d != 0 || c != 1 {
		t.Errorf("repeated check: dispatched %d, cached %d; want 0 and 1", d, c)
	}
	_, trailer = call("")
	if again := trailer.Get("x-request-id"); len(again) != 1 || again[0] == id[0] {
		t.Errorf("two calls without an id were both given %q", id[0])
	}

	var bulkTrailer metadata.MD
	_, err := ts.perms.CheckBulkPermissions(ctxT(t), &v1.CheckBulkPermissionsRequest{Consistency: fullyConsistent(), Items: []*v1.CheckBulkPermissionsRequestItem{
		{Resource: obj("document", "readme"), Permission: "edit", Subject: sub("user", "amy", "")},
		{Resource: obj("document", "other"), Permission: "edit", Subject: sub("user", "amy", "")},
	}}, grpc.Trailer(&bulkTrailer))
	if err != nil {
		t.Fatal(err)
	}
	// edit → owner, for both documents at once.
	if d, c := counts(t, bulkTrailer); d != 2 || c != 0 {
		t.Errorf("bulk check: dispatched %d, cached %d; want 2 and 0", d, c)
	}

	// Other calls carry the request id and their counts, streams included.
	// A client that asks for the server's version (zed version does) gets it too.
	var schemaHeader, schemaTrailer metadata.MD
	versionCtx := metadata.AppendToOutgoingContext(ctxT(t), string(requestmeta.RequestServerVersion), "1")
	if _, err := ts.schema.ReadSchema(versionCtx, &v1.ReadSchemaRequest{}, grpc.Header(&schemaHeader), grpc.Trailer(&schemaTrailer)); err != nil {
		t.Fatal(err)
	}
	if v := schemaTrailer.Get(string(responsemeta.ServerVersion)); len(schemaHeader.Get(string(responsemeta.ServerVersion))) != 0 || len(v) != 1 || v[0] != serverVersion {
		t.Errorf("header %v, trailer's server version %q: want %q in the trailer only", schemaHeader, v, serverVersion)
	}
	if v := trailer.Get(string(responsemeta.ServerVersion)); len(v) != 0 {
		t.Errorf("server version %q sent unasked", v)
	}
	if d, c := counts(t, schemaTrailer); len(schemaTrailer.Get("x-request-id")) != 1 || d != 1 || c != 0 {
		t.Errorf("ReadSchema trailer %v: want a request id, 1 dispatched and 0 cached", schemaTrailer)
	}
	var writeTrailer metadata.MD
	if _, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: docSchema}, grpc.Trailer(&writeTrailer)); err != nil {
		t.Fatal(err)
	}
	if d, c := counts(t, writeTrailer); d != strings.Count(docSchema, "definition ")+strings.Count(docSchema, "caveat ") || c != 0 {
		t.Errorf("WriteSchema counts %d and %d: want one dispatch per definition and caveat", d, c)
	}
	var failedTrailer metadata.MD
	if _, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{Resource: obj("nope", "x"), Permission: "view", Subject: sub("user", "amy", "")}, grpc.Trailer(&failedTrailer)); err == nil {
		t.Fatal("a check of an undefined type succeeded")
	}
	if d, c := counts(t, failedTrailer); d != 0 || c != 0 {
		t.Errorf("refused check counts %d and %d: want 0 and 0", d, c)
	}
	stream, err := ts.perms.ReadRelationships(metadata.AppendToOutgoingContext(ctxT(t), "x-request-id", "req-2"),
		&v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "group"}})
	if err != nil {
		t.Fatal(err)
	}
	streamHeader, err := stream.Header()
	if err != nil || len(streamHeader.Get("x-request-id")) != 0 {
		t.Errorf("ReadRelationships header %v (%v): want no request id there", streamHeader, err)
	}
	for _, err := stream.Recv(); err == nil; _, err = stream.Recv() {
	}
	if tr := stream.Trailer().Get("x-request-id"); len(tr) != 1 || tr[0] != "req-2" {
		t.Errorf("ReadRelationships trailer x-request-id %q, want req-2", tr)
	}
	if d, c := counts(t, stream.Trailer()); d != 1 || c != 0 {
		t.Errorf("ReadRelationships counts %d and %d: want 1 and 0", d, c)
	}
}

// The gateway returns X-Request-Id, the client's or a new one, and only under that
// name (not also as Grpc-Metadata-X-Request-Id), as SpiceDB's gateway does.
func TestResponseMetadataHTTP(t *testing.T) {
	ts := start(t, nil)
	defer http.DefaultClient.CloseIdleConnections()
	do := func(id string) http.Header {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ts.httpAddr+"/v1/schema/read", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header
	}
	if h := do("http-1"); strings.Join(h.Values("X-Request-Id"), ",") != "http-1" || h.Get("Grpc-Metadata-X-Request-Id") != "" {
		t.Errorf("headers %v: want X-Request-Id http-1, once", h)
	}
	a, b := do("").Get("X-Request-Id"), do("").Get("X-Request-Id")
	if a == "" || b == "" || a == b {
		t.Errorf("generated request ids %q and %q: want two different ones", a, b)
	}
}
