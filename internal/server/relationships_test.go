package server

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func (ts *testServer) count(t *testing.T, f *v1.RelationshipFilter) int {
	t.Helper()
	rs, err := ts.readAll(t, &v1.ReadRelationshipsRequest{Consistency: fullyConsistent(), RelationshipFilter: f})
	if err != nil {
		t.Fatalf("ReadRelationships: %v", err)
	}
	return len(rs)
}

func TestWriteErrors(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxUpdatesPerWrite = 3; c.MaxPreconditions = 1; c.MaxRelationshipContextBytes = 64 })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "alice", ""))
	create := func(r *v1.Relationship) *v1.RelationshipUpdate {
		return update(v1.RelationshipUpdate_OPERATION_CREATE, r)
	}
	doc := func(relation, subType, subID, subRel string) *v1.Relationship {
		return relationship("document", "readme", relation, subType, subID, subRel)
	}
	bigCtx, _ := structpb.NewStruct(map[string]any{"limit": 1, "padding": strings.Repeat("x", 100)})
	filter := &v1.RelationshipFilter{ResourceType: "document"}
	for _, tc := range []struct {
		name   string
		req    *v1.WriteRelationshipsRequest
		code   codes.Code
		reason v1.ErrorReason
	}{
		{
			"create existing", &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{create(doc("owner", "user", "alice", ""))}},
			codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP,
		},
		{
			"same relationship twice", &v1.WriteRelationshipsRequest{Updates: touch(doc("viewer", "user", "a", ""), doc("viewer", "user", "a", ""))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP,
		},
		{
			"too many updates", &v1.WriteRelationshipsRequest{Updates: touch(doc("viewer", "user", "a", ""), doc("viewer", "user", "b", ""), doc("viewer", "user", "c", ""), doc("viewer", "user", "d", ""))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_UPDATES_IN_REQUEST,
		},
		{
			"too many preconditions", &v1.WriteRelationshipsRequest{OptionalPreconditions: []*v1.Precondition{
				{Operation: v1.Precondition_OPERATION_MUST_MATCH, Filter: filter}, {Operation: v1.Precondition_OPERATION_MUST_MATCH, Filter: filter},
			}},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_PRECONDITIONS_IN_REQUEST,
		},
		{
			"failed precondition", &v1.WriteRelationshipsRequest{Updates: touch(doc("viewer", "user", "a", "")), OptionalPreconditions: []*v1.Precondition{
				{Operation: v1.Precondition_OPERATION_MUST_NOT_MATCH, Filter: filter},
			}},
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE,
		},
		{
			"unknown definition", &v1.WriteRelationshipsRequest{Updates: touch(relationship("folder", "f", "viewer", "user", "a", ""))},
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION,
		},
		{
			"unknown relation", &v1.WriteRelationshipsRequest{Updates: touch(doc("editor", "user", "a", ""))},
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION,
		},
		{
			"unknown subject type", &v1.WriteRelationshipsRequest{Updates: touch(doc("viewer", "team", "a", ""))},
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION,
		},
		{
			"unknown subject relation", &v1.WriteRelationshipsRequest{Updates: touch(doc("viewer", "group", "eng", "admin"))},
			codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION,
		},
		{
			"write to a permission", &v1.WriteRelationshipsRequest{Updates: touch(doc("view", "user", "a", ""))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CANNOT_UPDATE_PERMISSION,
		},
		{
			"subject type not allowed", &v1.WriteRelationshipsRequest{Updates: touch(doc("owner", "group", "eng", "member"))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE,
		},
		{
			"unknown caveat", &v1.WriteRelationshipsRequest{Updates: touch(caveated(doc("viewer", "user", "a", ""), "nosuch", nil))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE,
		},
		{
			"caveat parameter of the wrong type", &v1.WriteRelationshipsRequest{Updates: touch(caveated(doc("viewer", "user", "a", ""), "under_limit", mustStruct(t, map[string]any{"limit": "ten"})))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR,
		},
		{
			"caveat context too large", &v1.WriteRelationshipsRequest{Updates: touch(caveated(doc("viewer", "user", "a", ""), "under_limit", bigCtx))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_MAX_RELATIONSHIP_CONTEXT_SIZE,
		},
		{
			"malformed object id", &v1.WriteRelationshipsRequest{Updates: touch(relationship("document", "has space", "viewer", "user", "a", ""))},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED,
		},
		{
			"missing relationship", &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{{Operation: v1.RelationshipUpdate_OPERATION_TOUCH}}},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED,
		},
		{
			"empty precondition", &v1.WriteRelationshipsRequest{OptionalPreconditions: []*v1.Precondition{{Operation: v1.Precondition_OPERATION_MUST_MATCH, Filter: &v1.RelationshipFilter{}}}},
			codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.perms.WriteRelationships(ctxT(t), tc.req)
			wantCode(t, err, tc.code, tc.reason)
		})
	}
	if n := ts.count(t, filter); n != 1 {
		t.Errorf("after failed writes %d document relationships exist, want 1", n)
	}
}

func TestWriteCreateTouchDelete(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	r := relationship("document", "d", "viewer", "user", "a", "")
	for _, op := range []v1.RelationshipUpdate_Operation{v1.RelationshipUpdate_OPERATION_CREATE, v1.RelationshipUpdate_OPERATION_TOUCH} {
		if _, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(op, r)}}); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	expiring := relationship("document", "d", "viewer", "user", "b", "")
	expiring.OptionalExpiresAt = timestamppb.New(time.Now().Add(time.Hour))
	if _, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: touch(expiring)}); err == nil {
		t.Error("writing an expiring relationship to a relation without `with expiration` succeeded")
	}
	f := &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d"}
	if n := ts.count(t, f); n != 1 {
		t.Fatalf("%d relationships, want 1", n)
	}
	if _, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(v1.RelationshipUpdate_OPERATION_DELETE, r)}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n := ts.count(t, f); n != 0 {
		t.Fatalf("%d relationships after delete, want 0", n)
	}
}

func TestDeleteRelationships(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxDeleteLimit = 100 })
	ts.writeSchema(t, docSchema)
	var rs []*v1.Relationship
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		rs = append(rs, relationship("document", id, "viewer", "user", "u", ""))
	}
	ts.write(t, rs...)
	docs := &v1.RelationshipFilter{ResourceType: "document"}
	del := func(req *v1.DeleteRelationshipsRequest) (*v1.DeleteRelationshipsResponse, error) {
		return ts.perms.DeleteRelationships(ctxT(t), req)
	}

	_, err := del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalPreconditions: []*v1.Precondition{
		{Operation: v1.Precondition_OPERATION_MUST_MATCH, Filter: &v1.RelationshipFilter{ResourceType: "group"}},
	}})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE)
	_, err = del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalLimit: 2})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE)
	_, err = del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalLimit: 101})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT)
	_, err = del(&v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "folder"}})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)
	_, err = del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalLimit: 2, OptionalAllowPartialDeletions: true, OptionalCursor: &v1.Cursor{Token: "x"}})
	wantCode(t, err, codes.Unimplemented, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if n := ts.count(t, docs); n != 5 {
		t.Fatalf("failed deletes removed relationships: %d left, want 5", n)
	}

	resp, err := del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalLimit: 2, OptionalAllowPartialDeletions: true})
	if err != nil {
		t.Fatalf("partial delete: %v", err)
	}
	if resp.GetDeletionProgress() != v1.DeleteRelationshipsResponse_DELETION_PROGRESS_PARTIAL || resp.GetRelationshipsDeletedCount() != 2 {
		t.Errorf("partial delete: progress %s count %d", resp.GetDeletionProgress(), resp.GetRelationshipsDeletedCount())
	}
	resp, err = del(&v1.DeleteRelationshipsRequest{RelationshipFilter: docs, OptionalPreconditions: []*v1.Precondition{
		{Operation: v1.Precondition_OPERATION_MUST_MATCH, Filter: docs},
	}})
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if resp.GetDeletionProgress() != v1.DeleteRelationshipsResponse_DELETION_PROGRESS_COMPLETE || resp.GetRelationshipsDeletedCount() != 3 || resp.GetDeletedAt().GetToken() == "" {
		t.Errorf("delete: %v", resp)
	}
	if n := ts.count(t, docs); n != 0 {
		t.Fatalf("%d left after delete", n)
	}
}

func TestCheckErrors(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxDepth = 5 })
	check := func(res *v1.ObjectReference, perm string, s *v1.SubjectReference) error {
		_, err := ts.check(t, fullyConsistent(), res, perm, s)
		return err
	}
	// Before any schema: every definition is unknown.
	wantCode(t, check(obj("document", "d"), "view", sub("user", "a", "")), codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)

	ts.writeSchema(t, docSchema)
	var chain []*v1.Relationship
	for i := range 10 {
		chain = append(chain, relationship("group", groupID(i), "member", "group", groupID(i+1), "member"))
	}
	ts.write(t, chain...)
	ts.write(t, relationship("document", "deep", "viewer", "group", groupID(0), "member"))

	wantCode(t, check(obj("document", "d"), "nosuch", sub("user", "a", "")), codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
	wantCode(t, check(obj("Bad Type", "d"), "view", sub("user", "a", "")), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	wantCode(t, check(obj("document", "*"), "view", sub("user", "a", "")), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	wantCode(t, check(obj("document", "deep"), "view", sub("user", "nobody", "")), codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED)

	ts.write(t, caveated(relationship("document", "capped", "viewer", "user", "carol", ""), "under_limit", mustStruct(t, map[string]any{"limit": 10})))
	_, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("document", "capped"), Permission: "view", Subject: sub("user", "carol", ""),
		Context: mustStruct(t, map[string]any{"count": "many"}),
	})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR)
}

func groupID(i int) string { return "g" + string(rune('a'+i)) }

func TestWriteSchemaErrors(t *testing.T) {
	ts := start(t, nil)
	_, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: "definition user {}\ndefinition doc {\n  relation viewer user\n}"})
	st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR)
	if !strings.HasPrefix(st.Message(), "parse error in `schema`, line 3, column 19: ") {
		t.Errorf("schema error message lacks the position: %q", st.Message())
	}

	ts.writeSchema(t, docSchema)
	ts.write(t,
		relationship("document", "d", "owner", "user", "alice", ""),
		relationship("document", "d", "viewer", "user", "*", ""),
		caveated(relationship("document", "d", "viewer", "user", "carol", ""), "under_limit", nil),
	)
	for _, tc := range []struct{ name, schema, mention string }{
		{"relation removed", strings.NewReplacer("relation owner: user\n", "", "viewer + owner", "viewer", "edit = owner", "edit = viewer").Replace(docSchema), "owner"},
		{"definition removed", "definition user {}\ncaveat under_limit(count int, limit int) { count < limit }\ndefinition group { relation member: user | group#member }", "document"},
		{"wildcard removed", strings.Replace(docSchema, "user | user:* |", "user |", 1), "user:*"},
		{"caveat removed", strings.Replace(docSchema, " | user with under_limit", "", 1), "under_limit"},
		{"relation became a permission", strings.Replace(strings.Replace(docSchema, "relation owner: user", "permission owner = nil", 1), "permission edit = owner", "permission edit = viewer", 1), "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: tc.schema})
			st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR)
			if !strings.Contains(st.Message(), tc.mention) || !strings.Contains(st.Message(), "document:d#") {
				t.Errorf("message %q should name %q and an example relationship", st.Message(), tc.mention)
			}
		})
	}
	// Removing a relation nobody uses is fine.
	ts.writeSchema(t, strings.Replace(docSchema, "relation member: user | group#member", "relation member: user | group#member\n\trelation unused: user", 1))
	ts.writeSchema(t, docSchema)
}
