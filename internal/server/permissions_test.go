package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

const docSchema = `definition user {}

caveat under_limit(count int, limit int) {
	count < limit
}

definition group {
	relation member: user | group#member
}

definition document {
	relation owner: user
	relation viewer: user | user:* | group#member | user with under_limit
	permission view = viewer + owner
	permission edit = owner
}`

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func caveated(r *v1.Relationship, name string, ctx *structpb.Struct) *v1.Relationship {
	r.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: name, Context: ctx}
	return r
}

func TestSchemaReadWrite(t *testing.T) {
	ts := start(t, nil)
	_, err := ts.schema.ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
	wantCode(t, err, codes.NotFound, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	written := ts.writeSchema(t, docSchema)
	resp, err := ts.schema.ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
	if err != nil {
		t.Fatalf("ReadSchema: %v", err)
	}
	for _, want := range []string{"definition document", "permission view", "caveat under_limit"} {
		if !strings.Contains(resp.GetSchemaText(), want) {
			t.Errorf("ReadSchema text lacks %q:\n%s", want, resp.GetSchemaText())
		}
	}
	if resp.GetReadAt().GetToken() != written.GetToken() {
		t.Errorf("read_at %q, want the write's token %q", resp.GetReadAt().GetToken(), written.GetToken())
	}
	// The text ReadSchema returns is itself a valid schema.
	ts.writeSchema(t, resp.GetSchemaText())
}

func TestCheckPermission(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	ts.write(t,
		relationship("document", "readme", "owner", "user", "alice", ""),
		relationship("group", "eng", "member", "user", "bob", ""),
		relationship("document", "readme", "viewer", "group", "eng", "member"),
		caveated(relationship("document", "capped", "viewer", "user", "carol", ""), "under_limit", mustStruct(t, map[string]any{"limit": 10})),
	)
	for _, tc := range []struct {
		res, perm, subj string
		ctx             map[string]any
		want            v1.CheckPermissionResponse_Permissionship
		missing         []string
	}{
		{"readme", "view", "alice", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION, nil},
		{"readme", "edit", "alice", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION, nil},
		{"readme", "view", "bob", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION, nil},
		{"readme", "edit", "bob", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, nil},
		{"readme", "view", "mallory", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, nil},
		{"capped", "view", "carol", nil, v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION, []string{"count"}},
		{"capped", "view", "carol", map[string]any{"count": 3}, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION, nil},
		{"capped", "view", "carol", map[string]any{"count": 30}, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, nil},
	} {
		t.Run(fmt.Sprintf("%s#%s@%s/%v", tc.res, tc.perm, tc.subj, tc.ctx), func(t *testing.T) {
			req := &v1.CheckPermissionRequest{Consistency: fullyConsistent(), Resource: obj("document", tc.res), Permission: tc.perm, Subject: sub("user", tc.subj, "")}
			if tc.ctx != nil {
				req.Context = mustStruct(t, tc.ctx)
			}
			resp, err := ts.perms.CheckPermission(ctxT(t), req)
			if err != nil {
				t.Fatalf("CheckPermission: %v", err)
			}
			if resp.GetPermissionship() != tc.want {
				t.Fatalf("permissionship %s, want %s", resp.GetPermissionship(), tc.want)
			}
			if got := resp.GetPartialCaveatInfo().GetMissingRequiredContext(); !slices.Equal(got, tc.missing) {
				t.Errorf("missing context %v, want %v", got, tc.missing)
			}
			if resp.GetCheckedAt().GetToken() == "" {
				t.Error("response has no checked_at token")
			}
		})
	}
}

func TestCheckBulkPermissions(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "alice", ""))
	item := func(typ, perm, subj string) *v1.CheckBulkPermissionsRequestItem {
		return &v1.CheckBulkPermissionsRequestItem{Resource: obj(typ, "readme"), Permission: perm, Subject: sub("user", subj, "")}
	}
	resp, err := ts.perms.CheckBulkPermissions(ctxT(t), &v1.CheckBulkPermissionsRequest{
		Consistency: fullyConsistent(),
		Items: []*v1.CheckBulkPermissionsRequestItem{
			item("document", "view", "alice"),
			item("document", "view", "bob"),
			item("folder", "view", "alice"),
			item("document", "nosuch", "alice"),
		},
	})
	if err != nil {
		t.Fatalf("CheckBulkPermissions: %v", err)
	}
	if len(resp.GetPairs()) != 4 || resp.GetCheckedAt().GetToken() == "" {
		t.Fatalf("got %d pairs, token %q", len(resp.GetPairs()), resp.GetCheckedAt().GetToken())
	}
	if got := resp.GetPairs()[0].GetItem().GetPermissionship(); got != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Errorf("item 0: %s", got)
	}
	if got := resp.GetPairs()[1].GetItem().GetPermissionship(); got != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
		t.Errorf("item 1: %s", got)
	}
	for i := 2; i < 4; i++ {
		e := resp.GetPairs()[i].GetError()
		if e == nil || codes.Code(e.GetCode()) != codes.FailedPrecondition {
			t.Errorf("item %d: got %v, want a FAILED_PRECONDITION error", i, resp.GetPairs()[i])
		}
		if resp.GetPairs()[i].GetRequest().GetResource().GetObjectType() != []string{"", "", "folder", "document"}[i] {
			t.Errorf("item %d does not echo its request", i)
		}
	}
}

func TestCheckBulkTooMany(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxChecksPerBulk = 2 })
	ts.writeSchema(t, docSchema)
	it := &v1.CheckBulkPermissionsRequestItem{Resource: obj("document", "x"), Permission: "view", Subject: sub("user", "a", "")}
	_, err := ts.perms.CheckBulkPermissions(ctxT(t), &v1.CheckBulkPermissionsRequest{Items: []*v1.CheckBulkPermissionsRequestItem{it, it, it}})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_CHECKS_IN_REQUEST)
}

func TestZedTokenConsistency(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = -1 }) // every read sees the newest revision
	ts.writeSchema(t, docSchema)
	before := ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	resp, err := ts.perms.DeleteRelationships(ctxT(t), &v1.DeleteRelationshipsRequest{
		RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "readme"},
	})
	if err != nil {
		t.Fatalf("DeleteRelationships: %v", err)
	}
	after := resp.GetDeletedAt()
	atLeast := func(tok *v1.ZedToken) *v1.Consistency {
		return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: tok}}
	}
	exact := func(tok *v1.ZedToken) *v1.Consistency {
		return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: tok}}
	}
	for name, tc := range map[string]struct {
		c    *v1.Consistency
		want v1.CheckPermissionResponse_Permissionship
		tok  *v1.ZedToken
	}{
		"exact snapshot before the delete sees the write": {exact(before), v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION, before},
		"at least as fresh as the write sees the delete":  {atLeast(before), v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, after},
		"at least as fresh as the delete":                 {atLeast(after), v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, after},
		"minimize latency":                                {&v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, after},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := ts.check(t, tc.c, obj("document", "readme"), "view", sub("user", "zed", ""))
			if err != nil {
				t.Fatalf("CheckPermission: %v", err)
			}
			if resp.GetPermissionship() != tc.want {
				t.Errorf("permissionship %s, want %s", resp.GetPermissionship(), tc.want)
			}
			if resp.GetCheckedAt().GetToken() != tc.tok.GetToken() {
				t.Errorf("checked_at %q, want %q", resp.GetCheckedAt().GetToken(), tc.tok.GetToken())
			}
		})
	}
	_, err = ts.check(t, &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: "garbage"}}},
		obj("document", "readme"), "view", sub("user", "zed", ""))
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
}

func TestReadRelationshipsPaging(t *testing.T) {
	ts := start(t, func(c *Config) { c.ReadRelationshipsLimit = 10 })
	ts.writeSchema(t, docSchema)
	var rs []*v1.Relationship
	for i := range 25 {
		rs = append(rs, relationship("document", fmt.Sprintf("doc%02d", i), "viewer", "user", "u", ""))
	}
	rs = append(rs, relationship("group", "g", "member", "user", "u", ""))
	written := ts.write(t, rs...)
	filter := &v1.RelationshipFilter{ResourceType: "document"}

	all, err := ts.readAll(t, &v1.ReadRelationshipsRequest{Consistency: fullyConsistent(), RelationshipFilter: filter})
	if err != nil || len(all) != 25 {
		t.Fatalf("unlimited read: %d results, %v", len(all), err)
	}
	var got []string
	var cursor *v1.Cursor
	for page := 0; ; page++ {
		resp, err := ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: filter, OptionalLimit: 10, OptionalCursor: cursor})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, r := range resp {
			got = append(got, r.GetRelationship().GetResource().GetObjectId())
			if r.GetReadAt().GetToken() != written.GetToken() {
				t.Fatalf("page %d read at %q, want %q", page, r.GetReadAt().GetToken(), written.GetToken())
			}
		}
		if len(resp) < 10 {
			break
		}
		cursor = resp[len(resp)-1].GetAfterResultCursor()
	}
	if len(got) != 25 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 25 {
		t.Fatalf("paged read returned %d ids (sorted %v): %v", len(got), slices.IsSorted(got), got)
	}

	_, err = ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: filter, OptionalLimit: 11})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT)
	_, err = ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "group"}, OptionalCursor: all[3].GetAfterResultCursor()})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	_, err = ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: filter, OptionalCursor: &v1.Cursor{Token: "bm90IGEgY3Vyc29y"}})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	_, err = ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "folder"}})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)
	_, err = ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalRelation: "nosuch"}})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
}

func TestReadRelationshipsRoundTripsCaveatAndExpiration(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	want := caveated(relationship("document", "d", "viewer", "user", "carol", ""), "under_limit", mustStruct(t, map[string]any{"limit": 7}))
	ts.write(t, want)
	got, err := ts.readAll(t, &v1.ReadRelationshipsRequest{Consistency: fullyConsistent(), RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document"}})
	if err != nil || len(got) != 1 {
		t.Fatalf("read: %d, %v", len(got), err)
	}
	c := got[0].GetRelationship().GetOptionalCaveat()
	if c.GetCaveatName() != "under_limit" || c.GetContext().GetFields()["limit"].GetNumberValue() != 7 {
		t.Errorf("caveat read back as %v", c)
	}
}
