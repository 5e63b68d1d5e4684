package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// errorSchema has a caveat, a recursive group and a relation that allows wildcards.
const errorSchema = `caveat small(x int) {
  x < 10
}

definition user {}

definition group {
  relation member: user | group#member
}

definition doc {
  relation reader: user | user:* | user with small | group#member
  permission read = reader
}`

// errorCase is one error a client can provoke, with what SpiceDB v1.56 answers
// (provoked the same way against ../shared/bin/spicedb): the code, the ErrorInfo
// reason and exactly the ErrorInfo metadata keys — what client code branches on.
type errorCase struct {
	name   string
	call   func(context.Context, *testServer) error
	code   codes.Code
	reason v1.ErrorReason
	meta   []string
}

func writeSchemaCall(text string) func(context.Context, *testServer) error {
	return func(ctx context.Context, ts *testServer) error {
		_, err := ts.schema.WriteSchema(ctx, &v1.WriteSchemaRequest{Schema: text})
		return err
	}
}

func checkCall(res *v1.ObjectReference, perm string, s *v1.SubjectReference, caveatContext map[string]any) func(context.Context, *testServer) error {
	return func(ctx context.Context, ts *testServer) error {
		req := &v1.CheckPermissionRequest{Consistency: fullyConsistent(), Resource: res, Permission: perm, Subject: s}
		if caveatContext != nil {
			c, err := structpb.NewStruct(caveatContext)
			if err != nil {
				return err
			}
			req.Context = c
		}
		_, err := ts.perms.CheckPermission(ctx, req)
		return err
	}
}

func touchCall(r *v1.Relationship) func(context.Context, *testServer) error {
	return func(ctx context.Context, ts *testServer) error {
		_, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: touch(r)})
		return err
	}
}

var parseMetaKeys = []string{"start_line_number", "start_column_position", "end_line_number", "end_column_position", "source_code"}

func TestErrorCodesMatchSpiceDB(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, errorSchema)
	ts.write(t,
		relationship("group", "g1", "member", "group", "g2", "member"),
		relationship("group", "g2", "member", "group", "g1", "member"),
		caveated(relationship("doc", "capped", "reader", "user", "carol", ""), "small", nil),
	)
	for _, tc := range []errorCase{
		{
			"schema: undefined type", writeSchemaCall(errorSchema + "\ndefinition extra {\n  relation owner: usr\n}"),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"definition_name"},
		},
		{
			"schema: unknown relation in a permission", writeSchemaCall(errorSchema + "\ndefinition extra {\n  relation owner: user\n  permission edit = nope\n}"),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"definition_name", "relation_or_permission_name"},
		},
		{
			"schema: duplicate relation", writeSchemaCall(errorSchema + "\ndefinition extra {\n  relation owner: user\n  relation owner: user\n}"),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"definition_name", "relation_or_permission_name"},
		},
		{
			"schema: arrow over a permission", writeSchemaCall(errorSchema + "\ndefinition extra {\n  relation owner: doc\n  permission own = owner\n  permission edit = own->read\n}"),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"definition_name", "permission_name", "used_permission_name"},
		},
		{
			"schema: unused caveat parameter", writeSchemaCall("caveat unused_y(x int, y int) {\n  x > 1\n}\n" + errorSchema),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"caveat_name", "parameter_name"},
		},
		{
			"schema: syntax error", writeSchemaCall("definition user {}\ndefinition doc {\n  relation\n}"),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR, parseMetaKeys,
		},
		{
			"schema: duplicate definition", writeSchemaCall("definition user {}\ndefinition user {}"),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR, parseMetaKeys,
		},
		{
			"schema: removes a type in use", writeSchemaCall(strings.Replace(errorSchema, " | user with small", "", 1)),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"operation", "resource_type", "relation", "allowed_type", "relationship"},
		},
		{
			"schema: removes a definition in use", writeSchemaCall("caveat small(x int) {\n  x < 10\n}\n\ndefinition user {}\n\n" +
				"definition doc {\n  relation reader: user | user:* | user with small\n  permission read = reader\n}"),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			[]string{"operation", "resource_type", "relationship"},
		},
		{
			"write: unknown caveat", touchCall(caveated(relationship("doc", "d", "reader", "user", "u", ""), "nope", nil)),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE,
			[]string{"definition_name", "relation_name", "subject_type"},
		},
		{
			"write: unknown definition", touchCall(relationship("nodef", "d", "reader", "user", "u", "")),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION,
			[]string{"definition_name"},
		},
		{
			"write: to a permission", touchCall(relationship("doc", "d", "read", "user", "u", "")),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CANNOT_UPDATE_PERMISSION,
			[]string{"definition_name", "permission_name"},
		},
		{
			"write: create what exists", func(ctx context.Context, ts *testServer) error {
				_, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{
					update(v1.RelationshipUpdate_OPERATION_CREATE, relationship("group", "g1", "member", "group", "g2", "member")),
				}})
				return err
			}, codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP,
			[]string{"relationship", "resource_type", "resource_object_id", "resource_relation", "subject_type", "subject_object_id", "subject_relation"},
		},
		{
			"write: precondition", func(ctx context.Context, ts *testServer) error {
				_, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{
					Updates: touch(relationship("doc", "d", "reader", "user", "u", "")),
					OptionalPreconditions: []*v1.Precondition{{
						Operation: v1.Precondition_OPERATION_MUST_MATCH,
						Filter:    &v1.RelationshipFilter{ResourceType: "doc", OptionalResourceId: "zz"},
					}},
				})
				return err
			}, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE,
			[]string{"precondition_operation", "precondition_resource_type", "precondition_resource_id"},
		},
		{
			"delete: more than the limit", func(ctx context.Context, ts *testServer) error {
				_, err := ts.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "group"}, OptionalLimit: 1})
				return err
			},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE,
			[]string{"filter_resource_type", "limit"},
		},
		{
			"write: unknown subject relation", touchCall(relationship("doc", "d", "reader", "group", "g", "nope")),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION,
			[]string{"definition_name", "relation_or_permission_name"},
		},
		{
			"check: wildcard subject", checkCall(obj("doc", "d"), "read", sub("user", "*", ""), nil),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED,
			[]string{"field"},
		},
		{
			"check: unknown permission", checkCall(obj("doc", "d"), "nope", sub("user", "u", ""), nil),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION,
			[]string{"definition_name", "relation_or_permission_name"},
		},
		{
			"check: max depth", checkCall(obj("group", "g1"), "member", sub("user", "u", ""), nil),
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED, nil,
		},
		{
			"check: caveat parameter of the wrong type", checkCall(obj("doc", "capped"), "read", sub("user", "carol", ""), map[string]any{"x": "many"}),
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR,
			[]string{"caveat_name", "parameter_name"},
		},
		{"read: id and id prefix", func(ctx context.Context, ts *testServer) error {
			_, err := ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc", OptionalResourceId: "a", OptionalResourceIdPrefix: "b"}})
			return err
		}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_FILTER, []string{"filter"}},
		{"read: undecodable cursor", func(ctx context.Context, ts *testServer) error {
			_, err := ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc"}, OptionalCursor: &v1.Cursor{Token: "garbage"}})
			return err
		}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR, []string{"reason"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := wantCode(t, tc.call(ctxT(t), ts), tc.code, tc.reason)
			if tc.reason != v1.ErrorReason_ERROR_REASON_UNSPECIFIED {
				wantMetaKeys(t, st, tc.meta)
			}
		})
	}
}

func wantMetaKeys(t *testing.T, st *status.Status, want []string) {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			var got []string
			for k := range info.GetMetadata() {
				got = append(got, k)
			}
			slices.Sort(got)
			if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
				t.Errorf("ErrorInfo metadata keys %v, want %v (message %q)", got, w, st.Message())
			}
			return
		}
	}
	t.Errorf("no ErrorInfo in %q", st.Message())
}

// TestValidationErrorsAsSpiceDB: a request that breaks the protos' rules is
// "validation error: <field>: <reason>", with every violation in a buf.validate
// detail, over gRPC and over HTTP.
func TestValidationErrorsAsSpiceDB(t *testing.T) {
	ts := start(t, nil)
	_, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{Resource: obj("doc", "a b"), Permission: "read", Subject: sub("user", "u", "")})
	st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.HasPrefix(st.Message(), "validation error: resource.object_id: ") {
		t.Errorf("message %q, want it to start %q", st.Message(), "validation error: resource.object_id: ")
	}
	wantViolations(t, st, "resource.object_id")

	_, err = ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{Resource: obj("Doc", "a b"), Subject: sub("user", "u", "")})
	st = wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.HasPrefix(st.Message(), "validation errors:\n - resource.object_type: ") {
		t.Errorf("message %q, want every violation listed", st.Message())
	}
	wantViolations(t, st, "resource.object_type", "resource.object_id")

	code, body := ts.post(t, "/v1/permissions/check", testKey,
		`{"resource":{"objectType":"Doc","objectId":"a b"},"subject":{"object":{"objectType":"user","objectId":"u"}}}`)
	if code != http.StatusBadRequest || body["code"] != float64(codes.InvalidArgument) {
		t.Fatalf("HTTP: %d %v, want 400 with code 3", code, body)
	}
	details, _ := body["details"].([]any)
	if len(details) != 1 {
		t.Fatalf("HTTP details %v, want one buf.validate.Violations", body["details"])
	}
	d, _ := details[0].(map[string]any)
	if vs, _ := d["violations"].([]any); d["@type"] != "type.googleapis.com/buf.validate.Violations" || len(vs) != 2 {
		t.Errorf("HTTP detail %v, want buf.validate.Violations with both violations", d)
	}
}

func wantViolations(t *testing.T, st *status.Status, fields ...string) {
	t.Helper()
	for _, d := range st.Details() {
		if vs, ok := d.(*validate.Violations); ok {
			var got []string
			for _, v := range vs.GetViolations() {
				var path []string
				for _, e := range v.GetField().GetElements() {
					path = append(path, e.GetFieldName())
				}
				got = append(got, strings.Join(path, "."))
			}
			if !slices.Equal(got, fields) {
				t.Errorf("violations name fields %v, want %v", got, fields)
			}
			return
		}
	}
	t.Errorf("no buf.validate.Violations in %q", st.Message())
}

// TestHostileInputIsCheap: what a client sends comes back in an error only as a
// bounded prefix, and a request that does not decode is the client's error.
func TestHostileInputIsCheap(t *testing.T) {
	ts := start(t, nil)
	huge := strings.Repeat("a", 1<<20)
	_, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{Resource: obj("doc", huge), Permission: "read", Subject: sub("user", "u", "")})
	wantBounded(t, wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED))

	// A name the request rules do not bound: a type referred to in a schema.
	_, err = ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: "definition doc {\n  relation owner: x" + huge[:1<<19] + "\n}"})
	wantBounded(t, wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR))

	// The gateway quotes a JSON value it cannot decode.
	code, raw := ts.postRaw(t, "/v1/permissions/check", testKey, `{"consistency":{"fullyConsistent":"`+huge+`"}}`)
	if code != http.StatusBadRequest || len(raw) > 8<<10 {
		t.Errorf("gateway: status %d with a body of %d bytes, want 400 with a bounded message", code, len(raw))
	}

	// Field 2 (the resource; the filter of a read) holding field 1 (its type) with
	// bytes that are not UTF-8: proto3 refuses to decode the request.
	invalid := []byte{0x12, 0x04, 0x0a, 0x02, 0xff, 0xfe}
	err = ts.conn.Invoke(ctxT(t), "/authzed.api.v1.PermissionsService/CheckPermission", invalid, new([]byte), grpc.ForceCodecV2(rawCodec{}))
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	stream, err := ts.conn.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, "/authzed.api.v1.PermissionsService/ReadRelationships", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(invalid); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, stream.RecvMsg(new([]byte)), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
}

func wantBounded(t *testing.T, st *status.Status) {
	t.Helper()
	if n := len(st.Message()); n > 8<<10 {
		t.Errorf("message of %d bytes, want a bounded prefix", n)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			for k, v := range info.GetMetadata() {
				if len(v) > 2<<10 {
					t.Errorf("metadata %s of %d bytes, want a bounded prefix", k, len(v))
				}
			}
		}
	}
}

// rawCodec sends bytes as they are, to put a malformed message on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

// outageStore is a store whose server can be taken down: every call then fails as
// the SQL stores fail when PostgreSQL is unreachable.
type outageStore struct {
	store.Store
	down atomic.Bool
}

func (s *outageStore) fail() error {
	return fmt.Errorf("dial tcp 10.9.8.7:5432: connection refused: %w", store.ErrUnavailable)
}

func (s *outageStore) HeadRevision(ctx context.Context) (store.Revision, error) {
	if s.down.Load() {
		return 0, s.fail()
	}
	return s.Store.HeadRevision(ctx)
}

func (s *outageStore) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	if s.down.Load() {
		return nil, s.fail()
	}
	return s.Store.Reader(ctx, rev)
}

func (s *outageStore) Write(ctx context.Context, pre []store.Precondition, u []store.Update, v store.Validator) (store.Revision, error) {
	if s.down.Load() {
		return 0, s.fail()
	}
	return s.Store.Write(ctx, pre, u, v)
}

// TestOutageIsUnavailableEverywhere: a datastore outage is UNAVAILABLE (HTTP 503) on
// the SpiceDB API, its gateway and the Permify API, without the cause's detail.
func TestOutageIsUnavailableEverywhere(t *testing.T) {
	st := &outageStore{Store: memory.New(memory.Options{})}
	// The server does not close a store it was given; cleanups run last first, so
	// this one runs after the server has stopped.
	t.Cleanup(func() { _ = st.Close() })
	ts := start(t, func(c *Config) { c.Datastore, c.Logger = st, slog.New(slog.DiscardHandler) })
	ts.writeSchema(t, errorSchema)
	st.down.Store(true)

	_, err := ts.check(t, fullyConsistent(), obj("doc", "d"), "read", sub("user", "u", ""))
	wantUnavailable(t, wantCode(t, err, codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED).Message())
	_, err = ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: touch(relationship("doc", "d", "reader", "user", "u", ""))})
	wantCode(t, err, codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	code, body := ts.post(t, "/v1/permissions/check", testKey,
		`{"consistency":{"fullyConsistent":true},"resource":{"objectType":"doc","objectId":"d"},"permission":"read","subject":{"object":{"objectType":"user","objectId":"u"}}}`)
	if code != http.StatusServiceUnavailable || body["code"] != float64(codes.Unavailable) {
		t.Errorf("gateway: %d %v, want 503 UNAVAILABLE", code, body)
	}
	msg, _ := body["message"].(string)
	wantUnavailable(t, msg)

	code, body = permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", map[string]any{
		"metadata": map[string]any{"depth": 20},
		"entity":   map[string]any{"type": "doc", "id": "d"}, "permission": "read", "subject": map[string]any{"type": "user", "id": "u"},
	})
	if code != http.StatusServiceUnavailable || body["code"] != float64(codes.Unavailable) || body["message"] != "ERROR_CODE_DATASTORE" {
		t.Errorf("Permify API: %d %v, want 503 UNAVAILABLE ERROR_CODE_DATASTORE", code, body)
	}
}

func wantUnavailable(t *testing.T, msg string) {
	t.Helper()
	if strings.Contains(msg, "10.9.8.7") || !strings.Contains(msg, "unavailable") {
		t.Errorf("outage message %q: want it to say the datastore is unavailable, without the cause's detail", msg)
	}
}
