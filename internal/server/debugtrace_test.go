package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

const traceTestSchema = `caveat ipok(ip string, allowed string) {
	ip == allowed
}

definition user {}

definition group {
	relation member: user | group#member
}

definition folder {
	relation viewer: user | group#member
	relation parent: folder
	permission view = viewer + parent->view
}

definition doc {
	relation owner: user
	relation reader: user | group#member | user with ipok
	relation banned: user
	relation folder: folder
	permission read = (reader + owner + folder->view) - banned
	permission edit = owner & reader
}`

func traceTestServer(t *testing.T, cacheBytes int64) *testServer {
	t.Helper()
	ts := start(t, func(c *Config) { c.DispatchCacheMaxBytes = cacheBytes })
	ts.writeSchema(t, traceTestSchema)
	ts.write(t,
		relationship("group", "eng", "member", "user", "amy", ""),
		relationship("group", "all", "member", "group", "eng", "member"),
		relationship("folder", "f1", "viewer", "group", "all", "member"),
		relationship("folder", "f2", "parent", "folder", "f1", ""),
		relationship("doc", "d1", "folder", "folder", "f2", ""),
		caveated(relationship("doc", "d1", "reader", "user", "bob", ""), "ipok", nil),
		relationship("doc", "d1", "owner", "user", "dan", ""),
		relationship("doc", "d2", "owner", "user", "dan", ""),
		relationship("doc", "d2", "reader", "user", "dan", ""),
	)
	return ts
}

// renderDebugTrace writes one line per step (resource, permission, its type, result,
// resolution and caveat) and checks what every step must hold: the request's subject,
// a duration and a trace operation id.
func renderDebugTrace(t *testing.T, b *strings.Builder, subject *v1.SubjectReference, tr *v1.CheckDebugTrace, indent string) {
	t.Helper()
	if !proto.Equal(tr.GetSubject(), subject) {
		t.Errorf("step %s:%s %s: subject %v, want %v", tr.GetResource().GetObjectType(), tr.GetResource().GetObjectId(), tr.GetPermission(), tr.GetSubject(), subject)
	}
	if tr.GetDuration() == nil || tr.GetTraceOperationId() == "" {
		t.Errorf("step %s %s: duration %v, trace operation id %q", tr.GetResource(), tr.GetPermission(), tr.GetDuration(), tr.GetTraceOperationId())
	}
	fmt.Fprintf(b, "%s%s:%s %s %s %s", indent, tr.GetResource().GetObjectType(), tr.GetResource().GetObjectId(), tr.GetPermission(),
		strings.TrimPrefix(tr.GetPermissionType().String(), "PERMISSION_TYPE_"), strings.TrimPrefix(tr.GetResult().String(), "PERMISSIONSHIP_"))
	if r, ok := tr.GetResolution().(*v1.CheckDebugTrace_WasCachedResult); ok {
		fmt.Fprintf(b, " cached=%v", r.WasCachedResult)
	}
	if c := tr.GetCaveatEvaluationInfo(); c != nil {
		ctxJSON, _ := json.Marshal(c.GetContext().AsMap()) // protojson varies its spacing
		fmt.Fprintf(b, " caveat %s %q %s context=%s missing=%v", c.GetCaveatName(), c.GetExpression(),
			strings.TrimPrefix(c.GetResult().String(), "RESULT_"), ctxJSON, c.GetPartialCaveatInfo().GetMissingRequiredContext())
	}
	b.WriteByte('\n')
	for _, c := range tr.GetSubProblems().GetTraces() {
		renderDebugTrace(t, b, subject, c, indent+"  ")
	}
}

// TestCheckPermissionDebugTrace: with_tracing returns SpiceDB's trace tree (the trees
// below are what SpiceDB 1.56 returns for the same schema, data and checks) and the
// schema used; without it there is none.
func TestCheckPermissionDebugTrace(t *testing.T) {
	ts := traceTestServer(t, -1)
	for _, tc := range []struct {
		name     string
		resource *v1.ObjectReference
		perm     string
		subject  *v1.SubjectReference
		context  map[string]any
		want     string
	}{
		{"arrows and subject sets", obj("doc", "d1"), "read", sub("user", "amy", ""), nil, `
doc:d1 read PERMISSION HAS_PERMISSION
  doc:d1 reader RELATION NO_PERMISSION cached=false
  doc:d1 owner RELATION NO_PERMISSION cached=false
  folder:f2 view PERMISSION HAS_PERMISSION
    folder:f2 viewer RELATION NO_PERMISSION cached=false
    folder:f1 view PERMISSION HAS_PERMISSION
      folder:f1 viewer RELATION HAS_PERMISSION
        group:all member RELATION HAS_PERMISSION
          group:eng member RELATION HAS_PERMISSION cached=false
  doc:d1 banned RELATION NO_PERMISSION cached=false
`},
		{"subject set subject", obj("folder", "f1"), "viewer", sub("group", "eng", "member"), nil, `
folder:f1 viewer RELATION HAS_PERMISSION
  group:all member RELATION HAS_PERMISSION cached=false
`},
		{"caveat missing context", obj("doc", "d1"), "edit", sub("user", "bob", ""), map[string]any{"ip": "1"}, `
doc:d1 edit PERMISSION NO_PERMISSION
  doc:d1 owner RELATION NO_PERMISSION cached=false
`},
		{"caveat missing context, through a permission", obj("doc", "d1"), "read", sub("user", "bob", ""), map[string]any{"ip": "1"}, `
doc:d1 read PERMISSION CONDITIONAL_PERMISSION caveat ipok "ip == allowed" MISSING_SOME_CONTEXT context={"ip":"1"} missing=[allowed]
  doc:d1 reader RELATION CONDITIONAL_PERMISSION cached=false caveat ipok "ip == allowed" MISSING_SOME_CONTEXT context={"ip":"1"} missing=[allowed]
  doc:d1 owner RELATION NO_PERMISSION cached=false
  folder:f2 view PERMISSION NO_PERMISSION
    folder:f2 viewer RELATION NO_PERMISSION cached=false
    folder:f1 view PERMISSION NO_PERMISSION
      folder:f1 viewer RELATION NO_PERMISSION
        group:all member RELATION NO_PERMISSION
          group:eng member RELATION NO_PERMISSION cached=false
  doc:d1 banned RELATION NO_PERMISSION cached=false
`},
		{"caveat true", obj("doc", "d1"), "reader", sub("user", "bob", ""), map[string]any{"ip": "1", "allowed": "1", "unused": true}, `
doc:d1 reader RELATION CONDITIONAL_PERMISSION cached=false caveat ipok "ip == allowed" TRUE context={"allowed":"1","ip":"1"} missing=[]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &v1.CheckPermissionRequest{
				Consistency: fullyConsistent(), Resource: tc.resource, Permission: tc.perm, Subject: tc.subject, WithTracing: true,
			}
			if tc.context != nil {
				req.Context = mustStruct(t, tc.context)
			}
			resp, err := ts.perms.CheckPermission(ctxT(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetDebugTrace().GetSchemaUsed(); !strings.Contains(got, "permission read = ") || strings.HasSuffix(got, "\n") {
				t.Errorf("schema_used %q: want the schema without a trailing newline", got)
			}
			var b strings.Builder
			renderDebugTrace(t, &b, tc.subject, resp.GetDebugTrace().GetCheck(), "")
			if got := b.String(); got != tc.want[1:] {
				t.Errorf("trace\n%s\nwant\n%s", got, tc.want[1:])
			}
			req.WithTracing = false
			if resp, err := ts.perms.CheckPermission(ctxT(t), req); err != nil || resp.GetDebugTrace() != nil {
				t.Errorf("without with_tracing: %v, debug trace %v; want none", err, resp.GetDebugTrace())
			}
		})
	}
}

// TestCheckPermissionDebugTraceCached: with the dispatch cache, a traced check
// answered before says it came from the cache.
func TestCheckPermissionDebugTraceCached(t *testing.T) {
	ts := traceTestServer(t, 0)
	req := &v1.CheckPermissionRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d1"), Permission: "read", Subject: sub("user", "amy", ""), WithTracing: true}
	first, err := ts.perms.CheckPermission(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetDebugTrace().GetCheck().GetWasCachedResult() {
		t.Fatal("the first check was answered from the cache")
	}
	req.Consistency = &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: first.GetCheckedAt()}}
	second, err := ts.perms.CheckPermission(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderDebugTrace(t, &b, req.GetSubject(), second.GetDebugTrace().GetCheck(), "")
	if want := "doc:d1 read PERMISSION HAS_PERMISSION cached=true\n"; b.String() != want {
		t.Errorf("trace of a cached check\n%s\nwant\n%s", b.String(), want)
	}
}

// TestCheckBulkPermissionsDebugTrace: each item's trace is a step for the item over
// the step it was evaluated in, shared (with one trace operation id) by the items that
// differ only in their resource; an item that fails has no trace.
func TestCheckBulkPermissionsDebugTrace(t *testing.T) {
	ts := traceTestServer(t, -1)
	item := func(id, perm string, subject *v1.SubjectReference) *v1.CheckBulkPermissionsRequestItem {
		return &v1.CheckBulkPermissionsRequestItem{Resource: obj("doc", id), Permission: perm, Subject: subject}
	}
	dan := sub("user", "dan", "")
	resp, err := ts.perms.CheckBulkPermissions(ctxT(t), &v1.CheckBulkPermissionsRequest{
		Consistency: fullyConsistent(), WithTracing: true,
		Items: []*v1.CheckBulkPermissionsRequestItem{item("d1", "edit", dan), item("d2", "edit", dan), item("d1", "nope", dan)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`
doc:d1 edit PERMISSION NO_PERMISSION
  doc:d1,d2 edit PERMISSION HAS_PERMISSION
    doc:d1,d2 owner RELATION HAS_PERMISSION cached=false
    doc:d1,d2 reader RELATION HAS_PERMISSION cached=false
`, `
doc:d2 edit PERMISSION HAS_PERMISSION
  doc:d1,d2 edit PERMISSION HAS_PERMISSION
    doc:d1,d2 owner RELATION HAS_PERMISSION cached=false
    doc:d1,d2 reader RELATION HAS_PERMISSION cached=false
`}
	pairs := resp.GetPairs()
	for i, w := range want {
		var b strings.Builder
		renderDebugTrace(t, &b, dan, pairs[i].GetItem().GetDebugTrace().GetCheck(), "")
		if b.String() != w[1:] {
			t.Errorf("item %d: trace\n%s\nwant\n%s", i, b.String(), w[1:])
		}
	}
	shared := func(i int) string {
		return pairs[i].GetItem().GetDebugTrace().GetCheck().GetSubProblems().GetTraces()[0].GetTraceOperationId()
	}
	if shared(0) != shared(1) {
		t.Errorf("the shared step has trace operation ids %q and %q; want one", shared(0), shared(1))
	}
	if pairs[2].GetError() == nil {
		t.Errorf("item for an unknown permission: %v; want an error", pairs[2])
	}
}

// TestCheckPermissionDebugHeader: the request header older clients ask for a trace
// with gets debug_trace too, as on SpiceDB.
func TestCheckPermissionDebugHeader(t *testing.T) {
	ts := traceTestServer(t, -1)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), string(requestmeta.RequestDebugInformation), "true")
	resp, err := ts.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("doc", "d1"), Permission: "owner", Subject: sub("user", "dan", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderDebugTrace(t, &b, sub("user", "dan", ""), resp.GetDebugTrace().GetCheck(), "")
	if want := "doc:d1 owner RELATION HAS_PERMISSION cached=false\n"; b.String() != want {
		t.Errorf("trace\n%s\nwant\n%s", b.String(), want)
	}
}
