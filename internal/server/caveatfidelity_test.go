package server

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// issue30Schema is issue 30's: anne is in g1 under a caveat and in g2 without one.
const issue30Schema = `caveat ts_less_than(ts timestamp) {
	ts < timestamp("2023-10-11T10:00:00.000Z")
}

caveat flag(f bool) {
	f
}

definition user {}

definition group {
	relation member: user with ts_less_than | user | user with flag
}

definition folder {
	relation viewer: user | group#member
	relation blocked: group#member
	permission both = viewer & blocked
	permission open = viewer - blocked
}`

// writeIssue30 writes issue30Schema and its data through api: folder:a is viewed by
// g1 (caveated) and g2 (not); folder:b by g1 and blocked by g3 (flag); folder:c by g3
// and blocked by g1.
func writeIssue30(t *testing.T, api authzAPI) {
	t.Helper()
	if _, err := api.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: issue30Schema}); err != nil {
		t.Fatalf("%s: WriteSchema: %v", api.name, err)
	}
	rels := []*v1.Relationship{
		caveated(relationship("group", "g1", "member", "user", "anne", ""), "ts_less_than", nil),
		relationship("group", "g2", "member", "user", "anne", ""),
		caveated(relationship("group", "g3", "member", "user", "anne", ""), "flag", nil),
		relationship("folder", "a", "viewer", "group", "g1", "member"),
		relationship("folder", "a", "viewer", "group", "g2", "member"),
		relationship("folder", "b", "viewer", "group", "g1", "member"),
		relationship("folder", "b", "blocked", "group", "g3", "member"),
		relationship("folder", "c", "viewer", "group", "g3", "member"),
		relationship("folder", "c", "blocked", "group", "g1", "member"),
	}
	if _, err := api.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: touch(rels...)}); err != nil {
		t.Fatalf("%s: WriteRelationships: %v", api.name, err)
	}
}

// checkWith asks api whether user:anne has perm on folder:id under the caveat context
// ctx (JSON-shaped), and renders the answer: the permissionship, or the error's code.
func checkWith(t *testing.T, api authzAPI, id, perm string, ctx map[string]any) string {
	t.Helper()
	resp, err := api.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("folder", id), Permission: perm, Subject: sub("user", "anne", ""), Context: mustStruct(t, ctx),
	})
	if err != nil {
		return status.Code(err).String()
	}
	return strings.TrimPrefix(resp.GetPermissionship().String(), "PERMISSIONSHIP_")
}

// badTS is issue 30's malformed timestamp: no seconds.
const badTS = "2023-10-11T11:00.000Z"

// TestCaveatErrorInAnUndecidingBranch: a caveat that fails to evaluate fails a check
// only where its value could change the answer (issue 30, item 1), through authzed-go
// and zed. SpiceDB is asked too, and must agree where it is right: its answers depend
// on the order in which it evaluates caveats (docs/ARCHITECTURE.md), and in two of
// these cases it fails where one operand decides.
func TestCaveatErrorInAnUndecidingBranch(t *testing.T) {
	ls := start(t, nil)
	latch := authzAPI{name: "latch", schema: ls.schema, perms: ls.perms}
	writeIssue30(t, latch)
	spicedb := startSpiceDB(t)
	writeIssue30(t, spicedb)
	for _, tc := range []struct {
		id, perm string
		ctx      map[string]any
		want     string
		spicedb  bool // SpiceDB 1.56 answers the same
	}{
		// The issue's case: g2 grants without a caveat.
		{"a", "viewer", map[string]any{"ts": badTS}, "HAS_PERMISSION", true},
		// Only g1 could grant: the error decides.
		{"b", "viewer", map[string]any{"ts": badTS}, "InvalidArgument", true},
		// An intersection denied by its other operand (g3's flag is false).
		{"b", "both", map[string]any{"ts": badTS, "f": false}, "NO_PERMISSION", false},
		// An exclusion whose base is denied, and one whose subtracted side grants.
		{"c", "open", map[string]any{"ts": badTS, "f": false}, "NO_PERMISSION", true},
		{"b", "open", map[string]any{"ts": "2023-10-11T09:00:00Z", "f": "yes"}, "InvalidArgument", true},
		{"c", "open", map[string]any{"ts": "2023-10-11T09:00:00Z", "f": "yes"}, "NO_PERMISSION", false},
		// An error outranks a missing parameter: neither decides.
		{"c", "open", map[string]any{"ts": badTS}, "InvalidArgument", true},
	} {
		if got := checkWith(t, latch, tc.id, tc.perm, tc.ctx); got != tc.want {
			t.Errorf("folder:%s#%s@user:anne ctx %v: %s, want %s", tc.id, tc.perm, tc.ctx, got, tc.want)
		}
		if got := checkWith(t, spicedb, tc.id, tc.perm, tc.ctx); tc.spicedb && got != tc.want {
			t.Errorf("SpiceDB: folder:%s#%s@user:anne ctx %v: %s, want %s", tc.id, tc.perm, tc.ctx, got, tc.want)
		}
	}
	_, err := ls.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("folder", "b"), Permission: "viewer", Subject: sub("user", "anne", ""),
		Context: mustStruct(t, map[string]any{"ts": badTS}),
	})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR)

	// A bulk check answers a and fails b alone.
	item := func(id string) *v1.CheckBulkPermissionsRequestItem {
		return &v1.CheckBulkPermissionsRequestItem{
			Resource: obj("folder", id), Permission: "viewer", Subject: sub("user", "anne", ""),
			Context: mustStruct(t, map[string]any{"ts": badTS}),
		}
	}
	bulk, err := ls.perms.CheckBulkPermissions(ctxT(t), &v1.CheckBulkPermissionsRequest{
		Consistency: fullyConsistent(), Items: []*v1.CheckBulkPermissionsRequestItem{item("a"), item("b")},
	})
	if err != nil || len(bulk.GetPairs()) != 2 ||
		bulk.GetPairs()[0].GetItem().GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION ||
		codes.Code(bulk.GetPairs()[1].GetError().GetCode()) != codes.InvalidArgument {
		t.Errorf("CheckBulkPermissions folder:a, folder:b: %v, %v; want HAS_PERMISSION, then InvalidArgument", bulk.GetPairs(), err)
	}

	// LookupResources lists a, and fails on b, whose check fails; LookupSubjects of
	// folder:a finds anne.
	stream, err := ls.perms.LookupResources(ctxT(t), &v1.LookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: "folder", Permission: "viewer", Subject: sub("user", "anne", ""),
		Context: mustStruct(t, map[string]any{"ts": badTS}),
	})
	var found []string
	for err == nil {
		var resp *v1.LookupResourcesResponse
		if resp, err = stream.Recv(); err == nil {
			found = append(found, resp.GetResourceObjectId())
		}
	}
	if !slices.Equal(found, []string{"a"}) || status.Code(err) != codes.InvalidArgument {
		t.Errorf("LookupResources folder#viewer for anne: %v then %v, want [a] then InvalidArgument", found, err)
	}
	subjects, err := drain(ls.perms.LookupSubjects(ctxT(t), &v1.LookupSubjectsRequest{
		Consistency: fullyConsistent(), Resource: obj("folder", "a"), Permission: "viewer", SubjectObjectType: "user",
		Context: mustStruct(t, map[string]any{"ts": badTS}),
	}))
	if err != nil || len(subjects) != 1 || subjects[0].GetSubject().GetSubjectObjectId() != "anne" ||
		subjects[0].GetSubject().GetPermissionship() != v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_HAS_PERMISSION {
		t.Errorf("LookupSubjects folder:a#viewer: %v, %v; want anne, granted", subjects, err)
	}

	z := newZed(t, ls)
	z.expect(t, "true\n", "permission", "check", "folder:a", "viewer", "user:anne", "--caveat-context", `{"ts":"`+badTS+`"}`, "--consistency-full")
	if _, stderr, err := z.exec("permission", "check", "folder:b", "viewer", "user:anne", "--caveat-context", `{"ts":"`+badTS+`"}`, "--consistency-full"); err == nil || !strings.Contains(stderr, "ts_less_than") {
		t.Errorf("zed check folder:b: %v, stderr %q; want a failure naming the caveat", err, stderr)
	}
}

// TestCaveatParameterChangesAsSpiceDB: a schema that removes or retypes a parameter of
// a caveat it keeps is refused, with or without relationships stored, with SpiceDB's
// code, reason, message and metadata (issue 30, item 2); adding a parameter or
// dropping an unused caveat is accepted. Each write is made of latch and of SpiceDB
// and their statuses compared; SpiceDB's absence skips only that comparison.
func TestCaveatParameterChangesAsSpiceDB(t *testing.T) {
	const (
		base = `caveat some_caveat(somelist list<int>) {
	somelist.size() > 0
}

definition user {}

definition doc {
	relation viewer: user with some_caveat
}`
		removed = `caveat some_caveat(somemap map<any>) {
	somemap.size() > 0
}

definition user {}

definition doc {
	relation viewer: user with some_caveat
}`
		retyped = `caveat some_caveat(somelist list<string>) {
	somelist.size() > 0
}

definition user {}

definition doc {
	relation viewer: user with some_caveat
}`
		added = `caveat some_caveat(somelist list<int>, least int) {
	somelist.size() > least
}

definition user {}

definition doc {
	relation viewer: user with some_caveat
}`
		noCaveat = `definition user {}

definition doc {
	relation viewer: user
}`
	)
	ls := start(t, nil)
	apis := []authzAPI{{name: "latch", schema: ls.schema, perms: ls.perms}}
	if _, err := os.Stat(spicedbPath); err == nil {
		apis = append(apis, startSpiceDB(t))
	}
	write := func(api authzAPI, text string) error {
		_, err := api.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: text})
		return err
	}
	steps := []struct {
		schema string
		want   string // "" accepted, else the message
		meta   map[string]string
	}{
		{base, "", nil},
		// With nothing stored.
		{
			removed, "cannot remove parameter `somelist` on caveat `some_caveat`",
			map[string]string{"caveat_name": "some_caveat", "parameter_name": "somelist", "operation": "remove_parameter"},
		},
		{
			retyped, "cannot change the type of parameter `somelist` on caveat `some_caveat`",
			map[string]string{"caveat_name": "some_caveat", "parameter_name": "somelist", "operation": "change_parameter_type"},
		},
		{added, "", nil},
		{
			base, "cannot remove parameter `least` on caveat `some_caveat`",
			map[string]string{"caveat_name": "some_caveat", "parameter_name": "least", "operation": "remove_parameter"},
		},
		{noCaveat, "", nil},
		{base, "", nil},
		// With a caveated relationship stored, whose check holds.
		{"write", "", nil},
		{
			removed, "cannot remove parameter `somelist` on caveat `some_caveat`",
			map[string]string{"caveat_name": "some_caveat", "parameter_name": "somelist", "operation": "remove_parameter"},
		},
		{
			retyped, "cannot change the type of parameter `somelist` on caveat `some_caveat`",
			map[string]string{"caveat_name": "some_caveat", "parameter_name": "somelist", "operation": "change_parameter_type"},
		},
	}
	for _, step := range steps {
		for _, api := range apis {
			if step.schema == "write" {
				ctx := mustStruct(t, map[string]any{"somelist": []any{1.0}})
				r := caveated(relationship("doc", "d", "viewer", "user", "anne", ""), "some_caveat", ctx)
				if _, err := api.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: touch(r)}); err != nil {
					t.Fatalf("%s: WriteRelationships: %v", api.name, err)
				}
				continue
			}
			err := write(api, step.schema)
			if step.want == "" {
				if err != nil {
					t.Fatalf("%s: schema refused: %v\n%s", api.name, err, step.schema)
				}
				continue
			}
			st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR)
			if st.Message() != step.want {
				t.Errorf("%s: message %q, want %q", api.name, st.Message(), step.want)
			}
			if meta := errorMetadata(st); !maps.Equal(meta, step.meta) {
				t.Errorf("%s: metadata %v, want %v", api.name, meta, step.meta)
			}
		}
	}
	resp, err := ls.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "viewer", Subject: sub("user", "anne", ""),
	})
	if err != nil || resp.GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Errorf("check after the refused writes: %v, %v; want HAS_PERMISSION", resp.GetPermissionship(), err)
	}

	// zed shows the message.
	z := newZed(t, ls)
	path := filepath.Join(t.TempDir(), "removed.zed")
	if err := os.WriteFile(path, []byte(removed), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := z.exec("schema", "write", path); err == nil || !strings.Contains(stderr, "cannot remove parameter `somelist` on caveat `some_caveat`") {
		t.Errorf("zed schema write: %v, stderr %q", err, stderr)
	}
}

// errorMetadata returns the metadata of st's ErrorInfo.
func errorMetadata(st *status.Status) map[string]string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()
		}
	}
	return nil
}
