package server

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_ALREADY_REGISTERED)
	if _, err := exp.ExperimentalUnregisterRelationshipCounter(ctxT(t), &v1.ExperimentalUnregisterRelationshipCounterRequest{Name: "u1docs"}); err != nil {
		t.Fatal(err)
	}
	ts.stop(t)

	ts = start(t, config)
	exp = v1.NewExperimentalServiceClient(ts.conn)
	_, err = exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "u1docs"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED)
}

// A count reads at the head, as SpiceDB's does: with a quantization window far longer
// than the test, a count right after writes includes them (issue 30, item 8). A name
// that is not registered answers SpiceDB's FAILED_PRECONDITION and reason.
func TestRelationshipCountIsCurrent(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = time.Hour })
	ts.writeSchema(t, "definition user {}\ndefinition doc { relation viewer: user }")
	exp := v1.NewExperimentalServiceClient(ts.conn)
	_, err := exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "docs"})
	st := wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED)
	if st.Message() != "counter with name `docs` not found" {
		t.Errorf("message %q", st.Message())
	}
	_, err = exp.ExperimentalUnregisterRelationshipCounter(ctxT(t), &v1.ExperimentalUnregisterRelationshipCounterRequest{Name: "docs"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED)
	_, err = exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc"}})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	if _, err := exp.ExperimentalRegisterRelationshipCounter(ctxT(t), &v1.ExperimentalRegisterRelationshipCounterRequest{Name: "docs", RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc"}}); err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, want := range []int{5, 13} {
		for ; written < want; written++ {
			ts.write(t, relationship("doc", fmt.Sprintf("d%d", written), "viewer", "user", "u", ""))
		}
		resp, err := exp.ExperimentalCountRelationships(ctxT(t), &v1.ExperimentalCountRelationshipsRequest{Name: "docs"})
		if err != nil || resp.GetReadCounterValue().GetRelationshipCount() != uint64(want) {
			t.Fatalf("count after %d writes: %v, %v", want, resp, err)
		}
	}
}
