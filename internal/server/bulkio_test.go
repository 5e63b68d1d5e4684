package server

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

const bulkSchema = "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}"

func bulkRels(from, to int) []*v1.Relationship {
	var out []*v1.Relationship
	for i := from; i < to; i++ {
		out = append(out, relationship("doc", fmt.Sprintf("d%03d", i), "viewer", "user", "u"+fmt.Sprint(i%7), ""))
	}
	return out
}

func (ts *testServer) importRels(t *testing.T, batches ...[]*v1.Relationship) (uint64, error) {
	t.Helper()
	stream, err := ts.perms.ImportBulkRelationships(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := stream.Send(&v1.ImportBulkRelationshipsRequest{Relationships: b}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	return resp.GetNumLoaded(), err
}

// exportAll reads an export to the end, returning the relationships and the cursor
// after each batch.
func (ts *testServer) exportAll(t *testing.T, req *v1.ExportBulkRelationshipsRequest) ([]string, []*v1.Cursor) {
	t.Helper()
	stream, err := ts.perms.ExportBulkRelationships(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	var cursors []*v1.Cursor
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return rels, cursors
		}
		if err != nil {
			t.Fatalf("ExportBulkRelationships: %v", err)
		}
		for _, r := range resp.Relationships {
			rels = append(rels, rel.String(relv1.FromRelationship(r)))
		}
		cursors = append(cursors, resp.AfterResultCursor)
	}
}

func TestImportExport(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, bulkSchema)
	n, err := ts.importRels(t, bulkRels(0, 30), bulkRels(30, 45))
	if err != nil || n != 45 {
		t.Fatalf("import: %d, %v", n, err)
	}

	all, _ := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{Consistency: fullyConsistent()})
	if len(all) != 45 || !slices.IsSorted(all) {
		t.Fatalf("export gave %d relationships (sorted %v)", len(all), slices.IsSorted(all))
	}
	for _, limit := range []uint32{1, 2, 7} {
		got, cursors := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{Consistency: fullyConsistent(), OptionalLimit: limit})
		if !slices.Equal(got, all) || len(cursors) != (45+int(limit)-1)/int(limit) {
			t.Errorf("limit %d: %d relationships in %d batches", limit, len(got), len(cursors))
		}
	}

	// A cursor resumes at its own revision, after its batch.
	_, cursors := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{Consistency: fullyConsistent(), OptionalLimit: 10})
	ts.write(t, relationship("doc", "d000", "viewer", "user", "late", ""))
	rest, _ := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{OptionalLimit: 10, OptionalCursor: cursors[1]})
	if !slices.Equal(rest, all[20:]) {
		t.Errorf("resumed export: %v, want %v", rest, all[20:])
	}

	filtered, _ := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{
		Consistency:                fullyConsistent(),
		OptionalRelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc", OptionalResourceId: "d001"},
	})
	if want := []string{"doc:d001#viewer@user:u1"}; !slices.Equal(filtered, want) {
		t.Errorf("filtered export %v, want %v", filtered, want)
	}
}

func TestImportFailsWhole(t *testing.T) {
	for _, st := range conformanceStores {
		t.Run(st.name, func(t *testing.T) { testImportFailsWhole(t, func(c *Config) { st.setup(t, c) }) })
	}
}

func testImportFailsWhole(t *testing.T, setup func(*Config)) {
	ts := start(t, setup)
	ts.writeSchema(t, bulkSchema)
	ts.write(t, relationship("doc", "d010", "viewer", "user", "u3", ""))
	_, err := ts.importRels(t, bulkRels(0, 10), bulkRels(10, 20))
	wantCode(t, err, codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	_, err = ts.importRels(t, bulkRels(20, 30), []*v1.Relationship{relationship("doc", "x", "viewer", "doc", "y", "")})
	if err == nil {
		t.Fatal("import of a relationship the schema does not allow succeeded")
	}
	got, _ := ts.exportAll(t, &v1.ExportBulkRelationshipsRequest{Consistency: fullyConsistent()})
	if want := []string{"doc:d010#viewer@user:u3"}; !slices.Equal(got, want) {
		t.Errorf("after failed imports the store holds %v, want %v", got, want)
	}
}

func TestExperimentalAliases(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, bulkSchema)
	exp := v1.NewExperimentalServiceClient(ts.conn)
	stream, err := exp.BulkImportRelationships(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&v1.BulkImportRelationshipsRequest{Relationships: bulkRels(0, 5)}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.NumLoaded != 5 {
		t.Fatalf("BulkImportRelationships: %v, %v", resp, err)
	}
	export, err := exp.BulkExportRelationships(ctxT(t), &v1.BulkExportRelationshipsRequest{Consistency: fullyConsistent(), OptionalLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for {
		page, err := export.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || page.AfterResultCursor == nil {
			t.Fatalf("BulkExportRelationships: %v, %v", page, err)
		}
		total += len(page.Relationships)
	}
	if total != 5 {
		t.Errorf("exported %d, want 5", total)
	}
	check, err := exp.BulkCheckPermission(ctxT(t), &v1.BulkCheckPermissionRequest{Consistency: fullyConsistent(), Items: []*v1.BulkCheckPermissionRequestItem{
		{Resource: obj("doc", "d001"), Permission: "view", Subject: sub("user", "u1", "")},
		{Resource: obj("doc", "d001"), Permission: "view", Subject: sub("user", "u2", "")},
		{Resource: obj("doc", "d001"), Permission: "nope", Subject: sub("user", "u2", "")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(check.Pairs) != 3 || check.CheckedAt == nil ||
		check.Pairs[0].GetItem().GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION ||
		check.Pairs[1].GetItem().GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION ||
		check.Pairs[2].GetError() == nil || check.Pairs[0].Request.Permission != "view" {
		t.Errorf("BulkCheckPermission: %v", check)
	}
}

func TestRelationshipCounters(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = -1 })
	ts.writeSchema(t, bulkSchema)
	exp := v1.NewExperimentalServiceClient(ts.conn)
	filter := &v1.RelationshipFilter{ResourceType: "doc", OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "user", OptionalSubjectId: "u1"}}
	if _, err := exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "u1docs", RelationshipFilter: filter}); err != nil {
		t.Fatal(err)
	}
	_, err := exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "u1docs", RelationshipFilter: filter})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_ALREADY_REGISTERED)
	_, err = exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "bad", RelationshipFilter: &v1.RelationshipFilter{ResourceType: "nope"}})
	if err == nil {
		t.Error("a counter over an unknown type was registered")
	}
	if _, err := ts.importRels(t, bulkRels(0, 30)); err != nil {
		t.Fatal(err)
	}
	resp, err := exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "u1docs"})
	if err != nil || resp.GetReadCounterValue().GetRelationshipCount() != 5 || resp.GetReadCounterValue().GetReadAt() == nil {
		t.Errorf("count: %v, %v (want 5: d001 d008 d015 d022 d029)", resp, err)
	}
	if _, err := exp.ExperimentalUnregisterRelationshipCounter(ctxT(t), &v1.ExperimentalUnregisterRelationshipCounterRequest{Name: "u1docs"}); err != nil {
		t.Fatal(err)
	}
	_, err = exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "u1docs"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED)
}
