package server

import (
	"path/filepath"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
)

// TestRelationshipCountersSurviveRestart registers a counter on a pebble-backed
// server and restarts it on the same directory: the counter is still registered and
// counts, its name still taken; once unregistered, it stays gone across a restart.
func TestRelationshipCountersSurviveRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	config := func(c *Config) { c.DatastoreEngine, c.DatastoreURI, c.QuantizationWindow = "pebble", dir, -1 }
	ts := start(t, config)
	ts.writeSchema(t, bulkSchema)
	if _, err := ts.importRels(t, bulkRels(0, 30)); err != nil {
		t.Fatal(err)
	}
	filter := &v1.RelationshipFilter{ResourceType: "doc", OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "user", OptionalSubjectId: "u1"}}
	exp := v1.NewExperimentalServiceClient(ts.conn)
	if _, err := exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "u1docs", RelationshipFilter: filter}); err != nil {
		t.Fatal(err)
	}
	ts.stop(t)

	ts = start(t, config)
	exp = v1.NewExperimentalServiceClient(ts.conn)
	resp, err := exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "u1docs"})
	if err != nil || resp.GetReadCounterValue().GetRelationshipCount() != 5 {
		t.Fatalf("count after restart: %v, %v (want 5: d001 d008 d015 d022 d029)", resp, err)
	}
	_, err = exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "u1docs", RelationshipFilter: filter})
	wantCode(t, err, codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if _, err := exp.ExperimentalUnregisterRelationshipCounter(ctxT(t), &v1.ExperimentalUnregisterRelationshipCounterRequest{Name: "u1docs"}); err != nil {
		t.Fatal(err)
	}
	ts.stop(t)

	ts = start(t, config)
	exp = v1.NewExperimentalServiceClient(ts.conn)
	_, err = exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "u1docs"})
	wantCode(t, err, codes.NotFound, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
}
