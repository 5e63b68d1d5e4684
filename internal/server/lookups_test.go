package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// pageLimits are the page sizes every lookup is also read with; the pages must add up
// to exactly the unpaged answer (in id order, for LookupResources).
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
		Subject: relv1.Subject(subject), Context: ctxStruct,
	}
	resources := ts.lookupResourcesPaged(t, lr)
	if listed := slices.Contains(resources, resource.ID+" has"); listed != granted {
		t.Errorf("%s: LookupResources lists %v; granted=%v", assertion, resources, granted)
	}
	if !granted && slices.Contains(resources, resource.ID+" conditional") {
		t.Errorf("%s: LookupResources lists the denied resource as conditional", assertion)
	}
	ls := &v1.LookupSubjectsRequest{
		Consistency: fullyConsistent(), Resource: relv1.Object(resource), Permission: permission,
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

// lookupResourcesPaged returns the unpaged answer to req, once pages of each of
// pageLimits give the same resources (paged lookups come in id order, an unpaged one
// in the order results are proven), and so does the rest of the unpaged stream resumed
// from its first result's cursor.
func (ts *testServer) lookupResourcesPaged(t *testing.T, req *v1.LookupResourcesRequest) lookupResults {
	t.Helper()
	all, cursors := ts.lookupResourcesPage(t, req)
	want := slices.Sorted(slices.Values(all))
	for _, limit := range pageLimits {
		var paged lookupResults
		page := proto.Clone(req).(*v1.LookupResourcesRequest)
		page.OptionalLimit = limit
		for range 10_000 {
			got, pageCursors := ts.lookupResourcesPage(t, page)
			paged = append(paged, got...)
			if uint32(len(got)) < limit {
				break
			}
			page.OptionalCursor = pageCursors[len(pageCursors)-1]
		}
		if !slices.IsSorted(paged) || !slices.Equal(paged, want) {
			t.Errorf("LookupResources %s#%s@%v: pages of %d give %v, unpaged %v", req.ResourceObjectType, req.Permission, req.Subject, limit, paged, all)
		}
	}
	if len(all) > 1 {
		rest := proto.Clone(req).(*v1.LookupResourcesRequest)
		rest.OptionalCursor = cursors[0]
		if got, _ := ts.lookupResourcesPage(t, rest); !slices.Equal(got, all[1:]) {
			t.Errorf("LookupResources %s#%s@%v resumed after its first result: %v, want %v", req.ResourceObjectType, req.Permission, req.Subject, got, all[1:])
		}
	}
	return all
}

// lookupResourcesPage returns the results of one LookupResources call and the cursor
// after each.
func (ts *testServer) lookupResourcesPage(t *testing.T, req *v1.LookupResourcesRequest) (lookupResults, []*v1.Cursor) {
	t.Helper()
	stream, err := ts.perms.LookupResources(ctxT(t), req)
	if err != nil {
		t.Fatalf("LookupResources: %v", err)
	}
	var out lookupResults
	var cursors []*v1.Cursor
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, cursors
		}
		if err != nil {
			t.Fatalf("LookupResources: %v", err)
		}
		out = append(out, resp.ResourceObjectId+" "+permissionshipWord(resp.Permissionship))
		cursors = append(cursors, resp.AfterResultCursor)
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
	req := &v1.LookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: "doc", Permission: "view",
		Subject: sub("user", "ann", ""), OptionalLimit: 1,
	}
	first, cursors := ts.lookupResourcesPage(t, req)
	if len(first) != 1 {
		t.Fatalf("first page %v", first)
	}
	cursor := cursors[0]
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
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	bad := &v1.LookupResourcesRequest{ResourceObjectType: "doc", Permission: "view", Subject: sub("user", "ann", ""), OptionalCursor: &v1.Cursor{Token: "!!"}}
	stream, err = ts.perms.LookupResources(ctxT(t), bad)
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
}

// firstErr returns the error a server stream fails with before its first message.
func firstErr[T any](stream interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	_, err = stream.Recv()
	return err
}

func TestLookupSubjectsPagingWithWildcard(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition doc {\n\trelation viewer: user | user:*\n\trelation banned: user\n\tpermission view = viewer - banned\n}")
	ts.write(t, relationship("doc", "d", "viewer", "user", "c", ""), relationship("doc", "d", "viewer", "user", "a", ""),
		relationship("doc", "d", "viewer", "user", "b", ""), relationship("doc", "d", "viewer", "user", "*", ""),
		relationship("doc", "d", "banned", "user", "x", ""))
	req := &v1.LookupSubjectsRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "view", SubjectObjectType: "user"}
	want := lookupResults{"a has", "b has", "c has", "* has - x"}
	if got := ts.lookupSubjectsPaged(t, req); !slices.Equal(got, want) {
		t.Errorf("LookupSubjects = %v, want %v", got, want)
	}

	// Pages of one: the wildcard, outside the limit, comes with the last concrete subject.
	page := proto.Clone(req).(*v1.LookupSubjectsRequest)
	page.OptionalConcreteLimit = 1
	var pages []lookupResults
	for range 10 {
		got, concrete, last := ts.lookupSubjectsPage(t, page)
		pages = append(pages, got)
		if concrete < 1 {
			break
		}
		page.OptionalCursor = last
	}
	wantPages := []lookupResults{{"a has"}, {"b has"}, {"c has", "* has - x"}, nil}
	if !slices.EqualFunc(pages, wantPages, slices.Equal) {
		t.Errorf("pages of one: %v, want %v", pages, wantPages)
	}

	noWild := proto.Clone(req).(*v1.LookupSubjectsRequest)
	noWild.WildcardOption = v1.LookupSubjectsRequest_WILDCARD_OPTION_EXCLUDE_WILDCARDS
	if got, _, _ := ts.lookupSubjectsPage(t, noWild); !slices.Equal(got, want[:3]) {
		t.Errorf("EXCLUDE_WILDCARDS: %v, want %v", got, want[:3])
	}
}

func TestLookupSubjectsCursorKeepsItsRevision(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}")
	ts.write(t, relationship("doc", "d", "viewer", "user", "b", ""), relationship("doc", "d", "viewer", "user", "c", ""))
	req := &v1.LookupSubjectsRequest{
		Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "view",
		SubjectObjectType: "user", OptionalConcreteLimit: 1,
	}
	first, _, cursor := ts.lookupSubjectsPage(t, req)
	ts.write(t, relationship("doc", "d", "viewer", "user", "a", ""))
	req.OptionalCursor = cursor
	rest, _, _ := ts.lookupSubjectsPage(t, req)
	if got := append(first, rest...); !slices.Equal(got, lookupResults{"b has", "c has"}) {
		t.Errorf("pages across a write: %v, want [b c] (the cursor's revision)", got)
	}

	other := proto.Clone(req).(*v1.LookupSubjectsRequest)
	other.Resource = obj("doc", "e")
	wantCode(t, firstErr(ts.perms.LookupSubjects(ctxT(t), other)), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
	other.Resource, other.OptionalCursor = obj("doc", "d"), &v1.Cursor{Token: "AQ"}
	wantCode(t, firstErr(ts.perms.LookupSubjects(ctxT(t), other)), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)

	// A LookupResources cursor does not resume a LookupSubjects call.
	lr := &v1.LookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: "doc", Permission: "view",
		Subject: sub("user", "b", ""), OptionalLimit: 1,
	}
	_, lrCursors := ts.lookupResourcesPage(t, lr)
	other.OptionalCursor = lrCursors[0]
	wantCode(t, firstErr(ts.perms.LookupSubjects(ctxT(t), other)), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)
}

func TestLookupRequestValidation(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}")
	lr := func(typ, perm string, s *v1.SubjectReference, limit uint32) error {
		return firstErr(ts.perms.LookupResources(ctxT(t), &v1.LookupResourcesRequest{
			Consistency:        fullyConsistent(),
			ResourceObjectType: typ, Permission: perm, Subject: s, OptionalLimit: limit,
		}))
	}
	ls := func(typ, perm, subjType, subjRel string, limit uint32) error {
		return firstErr(ts.perms.LookupSubjects(ctxT(t), &v1.LookupSubjectsRequest{
			Consistency: fullyConsistent(),
			Resource:    obj(typ, "d"), Permission: perm, SubjectObjectType: subjType, OptionalSubjectRelation: subjRel, OptionalConcreteLimit: limit,
		}))
	}
	ann := sub("user", "ann", "")
	pre, inv := codes.FailedPrecondition, codes.InvalidArgument
	for _, c := range []struct {
		name   string
		err    error
		code   codes.Code
		reason v1.ErrorReason
	}{
		{"LR unknown type", lr("page", "view", ann, 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION},
		{"LR unknown permission", lr("doc", "edit", ann, 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION},
		{"LR unknown subject type", lr("doc", "view", sub("team", "x", ""), 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION},
		{"LR wildcard subject", lr("doc", "view", sub("user", "*", ""), 0), inv, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED},
		{"LR limit too large", lr("doc", "view", ann, maxLookupLimit+1), inv, v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT},
		{"LS unknown type", ls("page", "view", "user", "", 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION},
		{"LS unknown permission", ls("doc", "edit", "user", "", 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION},
		{"LS unknown subject relation", ls("doc", "view", "user", "member", 0), pre, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION},
		{"LS limit too large", ls("doc", "view", "user", "", maxLookupLimit+1), inv, v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT},
	} {
		t.Run(c.name, func(t *testing.T) { wantCode(t, c.err, c.code, c.reason) })
	}
	if err := lr("doc", "view", ann, maxLookupLimit); !errors.Is(err, io.EOF) {
		t.Errorf("LookupResources at the maximum limit: %v, want an empty stream", err)
	}
}

// TestLookupsOverGateway reads lookups and expand through the HTTP/JSON paths SpiceDB
// clients use: streams arrive as one {"result": ...} object per line.
func TestLookupsOverGateway(t *testing.T) {
	ts := start(t, nil)
	defer http.DefaultClient.CloseIdleConnections()
	ts.writeSchema(t, "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}")
	ts.write(t, relationship("doc", "d1", "viewer", "user", "ann", ""), relationship("doc", "d2", "viewer", "user", "ann", ""))
	lines := func(path, body string) []map[string]any {
		code, raw := ts.postRaw(t, path, testKey, body)
		if code != http.StatusOK {
			t.Fatalf("POST %s: status %d: %s", path, code, raw)
		}
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("POST %s: line %q: %v", path, line, err)
			}
			out = append(out, m)
		}
		return out
	}
	var ids []string
	for _, m := range lines("/v1/permissions/resources", `{"consistency":{"fullyConsistent":true},"resourceObjectType":"doc","permission":"view","subject":{"object":{"objectType":"user","objectId":"ann"}}}`) {
		res, _ := m["result"].(map[string]any)
		ids = append(ids, fmt.Sprint(res["resourceObjectId"], " ", res["permissionship"]))
	}
	if want := []string{"d1 LOOKUP_PERMISSIONSHIP_HAS_PERMISSION", "d2 LOOKUP_PERMISSIONSHIP_HAS_PERMISSION"}; !slices.Equal(ids, want) {
		t.Errorf("/v1/permissions/resources: %v, want %v", ids, want)
	}
	subjects := lines("/v1/permissions/subjects", `{"consistency":{"fullyConsistent":true},"resource":{"objectType":"doc","objectId":"d1"},"permission":"view","subjectObjectType":"user"}`)
	if len(subjects) != 1 || fmt.Sprint(subjects[0]["result"].(map[string]any)["subject"].(map[string]any)["subjectObjectId"]) != "ann" {
		t.Errorf("/v1/permissions/subjects: %v", subjects)
	}
	code, body := ts.post(t, "/v1/permissions/expand", testKey, `{"consistency":{"fullyConsistent":true},"resource":{"objectType":"doc","objectId":"d1"},"permission":"view"}`)
	root, _ := body["treeRoot"].(map[string]any)
	if code != http.StatusOK || root["expandedRelation"] != "view" || root["intermediate"] == nil {
		t.Errorf("/v1/permissions/expand: %d %v", code, body)
	}
}
