package server

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/rel"
)

// pageLimits are the page sizes every lookup is also read with; the pages must add up
// to exactly the unpaged answer.
var pageLimits = []uint32{1, 2, 7}

// lookupResults is one lookup's answer: ids in stream order with their permissionship
// ("has" or "conditional"); a wildcard lists its exclusions after a '-'.
type lookupResults []string

// checkLookupsAgree checks a definite assertion against LookupResources and
// LookupSubjects: a granted resource (subject) is listed, a denied one is not.
func (ts *testServer) checkLookupsAgree(t *testing.T, assertion string, granted bool) {
	t.Helper()
	resource, permission, subject, checkCtx, err := rel.ParseCheck(assertion)
	if err != nil {
		t.Fatalf("assertion %q: %v", assertion, err)
	}
	if subject.Object.ID == rel.Wildcard {
		return
	}
	var ctxStruct *structpb.Struct
	if len(checkCtx) > 0 {
		if ctxStruct, err = structpb.NewStruct(checkCtx); err != nil {
			t.Fatal(err)
		}
	}
	lr := &v1.LookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: resource.Type, Permission: permission,
		Subject: subjectToV1(subject), Context: ctxStruct,
	}
	resources := ts.lookupResourcesPaged(t, lr)
	if listed := slices.Contains(resources, resource.ID+" has"); listed != granted {
		t.Errorf("%s: LookupResources lists %v; granted=%v", assertion, resources, granted)
	}
	if !granted && slices.Contains(resources, resource.ID+" conditional") {
		t.Errorf("%s: LookupResources lists the denied resource as conditional", assertion)
	}
	ls := &v1.LookupSubjectsRequest{
		Consistency: fullyConsistent(), Resource: objectToV1(resource), Permission: permission,
		SubjectObjectType: subject.Object.Type, OptionalSubjectRelation: subject.Relation, Context: ctxStruct,
	}
	subjects := ts.lookupSubjectsPaged(t, ls)
	if found := subjectGranted(subjects, subject.Object.ID); found != granted {
		t.Errorf("%s: LookupSubjects lists %v; granted=%v", assertion, subjects, granted)
	}
}

// subjectGranted reports whether id is listed as a definite member, concretely or
// through a wildcard that does not exclude it.
func subjectGranted(subjects lookupResults, id string) bool {
	for _, s := range subjects {
		head, excluded, _ := strings.Cut(s, " -")
		if head == id+" has" {
			return true
		}
		if head == "* has" && !slices.Contains(strings.Fields(excluded), id) {
			return true
		}
	}
	return false
}

func (ts *testServer) lookupResourcesPaged(t *testing.T, req *v1.LookupResourcesRequest) lookupResults {
	t.Helper()
	all, _ := ts.lookupResourcesPage(t, req)
	for _, limit := range pageLimits {
		var paged lookupResults
		page := proto.Clone(req).(*v1.LookupResourcesRequest)
		page.OptionalLimit = limit
		for range 10_000 {
			got, last := ts.lookupResourcesPage(t, page)
			paged = append(paged, got...)
			if uint32(len(got)) < limit {
				break
			}
			page.OptionalCursor = last
		}
		if !slices.Equal(paged, all) {
			t.Errorf("LookupResources %s#%s@%v: pages of %d give %v, unpaged %v", req.ResourceObjectType, req.Permission, req.Subject, limit, paged, all)
		}
	}
	return all
}

func (ts *testServer) lookupResourcesPage(t *testing.T, req *v1.LookupResourcesRequest) (lookupResults, *v1.Cursor) {
	t.Helper()
	stream, err := ts.perms.LookupResources(ctxT(t), req)
	if err != nil {
		t.Fatalf("LookupResources: %v", err)
	}
	var out lookupResults
	var last *v1.Cursor
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, last
		}
		if err != nil {
			t.Fatalf("LookupResources: %v", err)
		}
		out = append(out, resp.ResourceObjectId+" "+permissionshipWord(resp.Permissionship))
		last = resp.AfterResultCursor
	}
}

func (ts *testServer) lookupSubjectsPaged(t *testing.T, req *v1.LookupSubjectsRequest) lookupResults {
	t.Helper()
	all, _, _ := ts.lookupSubjectsPage(t, req)
	for _, limit := range pageLimits {
		var paged lookupResults
		page := proto.Clone(req).(*v1.LookupSubjectsRequest)
		page.OptionalConcreteLimit = limit
		for range 10_000 {
			got, concrete, last := ts.lookupSubjectsPage(t, page)
			paged = append(paged, got...)
			if uint32(concrete) < limit {
				break
			}
			page.OptionalCursor = last
		}
		if !slices.Equal(paged, all) {
			t.Errorf("LookupSubjects %v#%s@%s: pages of %d give %v, unpaged %v", req.Resource, req.Permission, req.SubjectObjectType, limit, paged, all)
		}
	}
	return all
}

func (ts *testServer) lookupSubjectsPage(t *testing.T, req *v1.LookupSubjectsRequest) (lookupResults, int, *v1.Cursor) {
	t.Helper()
	stream, err := ts.perms.LookupSubjects(ctxT(t), req)
	if err != nil {
		t.Fatalf("LookupSubjects: %v", err)
	}
	var out lookupResults
	concrete := 0
	var last *v1.Cursor
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, concrete, last
		}
		if err != nil {
			t.Fatalf("LookupSubjects: %v", err)
		}
		s := resp.Subject.SubjectObjectId + " " + permissionshipWord(resp.Subject.Permissionship)
		if s != resp.SubjectObjectId+" "+permissionshipWord(resp.Permissionship) {
			t.Errorf("deprecated fields disagree with subject: %v", resp)
		}
		if resp.Subject.SubjectObjectId != rel.Wildcard {
			concrete++
		} else if len(resp.ExcludedSubjects) > 0 {
			s += " -"
			for _, ex := range resp.ExcludedSubjects {
				s += " " + ex.SubjectObjectId
			}
		}
		out = append(out, s)
		last = resp.AfterResultCursor
	}
}

func permissionshipWord(p v1.LookupPermissionship) string {
	if p == v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_CONDITIONAL_PERMISSION {
		return "conditional"
	}
	return "has"
}

func TestLookupCursorKeepsItsRevision(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}")
	for _, id := range []string{"d1", "d2", "d3"} {
		ts.write(t, relationship("doc", id, "viewer", "user", "ann", ""))
	}
	req := &v1.LookupResourcesRequest{Consistency: fullyConsistent(), ResourceObjectType: "doc", Permission: "view",
		Subject: sub("user", "ann", ""), OptionalLimit: 1}
	first, cursor := ts.lookupResourcesPage(t, req)
	if len(first) != 1 {
		t.Fatalf("first page %v", first)
	}
	ts.write(t, relationship("doc", "d0", "viewer", "user", "ann", ""))
	rest := &v1.LookupResourcesRequest{ResourceObjectType: "doc", Permission: "view", Subject: sub("user", "ann", ""), OptionalCursor: cursor}
	more, _ := ts.lookupResourcesPage(t, rest)
	got := append(first, more...)
	slices.Sort(got)
	if want := (lookupResults{"d1 has", "d2 has", "d3 has"}); !slices.Equal(got, want) {
		t.Errorf("pages across a write: %v, want %v (the cursor's revision)", got, want)
	}

	other := &v1.LookupResourcesRequest{ResourceObjectType: "doc", Permission: "view", Subject: sub("user", "bob", ""), OptionalCursor: cursor}
	stream, err := ts.perms.LookupResources(ctxT(t), other)
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	bad := &v1.LookupResourcesRequest{ResourceObjectType: "doc", Permission: "view", Subject: sub("user", "ann", ""), OptionalCursor: &v1.Cursor{Token: "!!"}}
	stream, err = ts.perms.LookupResources(ctxT(t), bad)
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
}

func TestExpandPermissionTree(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition group {\n\trelation member: user\n}\ndefinition doc {\n\trelation viewer: user | group#member\n\trelation banned: user\n\tpermission view = viewer - banned\n}")
	ts.write(t, relationship("doc", "d", "viewer", "user", "ann", ""), relationship("doc", "d", "viewer", "group", "eng", "member"),
		relationship("doc", "d", "banned", "user", "bob", ""))
	resp, err := ts.perms.ExpandPermissionTree(ctxT(t), &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "view"})
	if err != nil {
		t.Fatal(err)
	}
	root := resp.TreeRoot
	inter := root.GetIntermediate()
	if inter == nil || inter.Operation != v1.AlgebraicSubjectSet_OPERATION_EXCLUSION || len(inter.Children) != 2 ||
		root.ExpandedObject.ObjectId != "d" || root.ExpandedRelation != "view" {
		t.Fatalf("root %v", root)
	}
	viewers := inter.Children[0].GetLeaf()
	if viewers == nil || len(viewers.Subjects) != 2 || inter.Children[0].ExpandedRelation != "viewer" {
		t.Fatalf("viewer leaf %v", inter.Children[0])
	}
	var got []string
	for _, s := range viewers.Subjects {
		got = append(got, s.Object.ObjectType+":"+s.Object.ObjectId+"#"+s.OptionalRelation)
	}
	slices.Sort(got)
	if want := []string{"group:eng#member", "user:ann#"}; !slices.Equal(got, want) {
		t.Errorf("viewer subjects %v, want %v", got, want)
	}
	_, err = ts.perms.ExpandPermissionTree(ctxT(t), &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "nope"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
}
