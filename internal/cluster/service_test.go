package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/engine"
)

// TestReceivedErrorsCountOnlyFailures: a dispatch its caller abandons (a hedge the
// caller's local answer won, a cancelled client) is no error of this node's; a wrong
// key, a damaged request and a failed evaluation are.
func TestReceivedErrorsCountOnlyFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	failing := errors.New("store unavailable")
	s := &service{key: "Bearer k", m: newMetrics(reg), h: func(_ context.Context, sp *engine.Subproblem) (*engine.Answers, error) {
		if sp.ResourceType == "broken" {
			return nil, failing
		}
		return &engine.Answers{States: make([]engine.AnswerState, len(sp.ResourceIDs))}, nil
	}}
	dispatch := func(ctx context.Context, key, resourceType string) error {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+key))
		req := encodeSubproblem(&engine.Subproblem{ResourceType: resourceType, Relation: "view", ResourceIDs: []string{"a"}})
		_, err := s.check(nil, ctx, func(v any) error { *v.(*frame) = req; return nil }, nil)
		return err
	}
	errs := func() float64 { return counter(t, reg, "latch_cluster_dispatch_received_errors_total") }

	if err := dispatch(context.Background(), "k", "doc"); err != nil || errs() != 0 {
		t.Fatalf("an answered dispatch: error %v, %v counted as errors", err, errs())
	}
	s.delay = time.Minute // the caller gives up while the answer is delayed
	abandoned, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dispatch(abandoned, "k", "doc"); err == nil || errs() != 0 {
		t.Fatalf("a dispatch its caller cancelled: error %v, %v counted as errors; want an error, none counted", err, errs())
	}
	s.delay = 0
	for i, c := range []struct{ key, resourceType string }{{"wrong", "doc"}, {"k", "broken"}} {
		if err := dispatch(context.Background(), c.key, c.resourceType); err == nil || errs() != float64(i+1) {
			t.Fatalf("dispatch %+v: error %v, %v counted; want it failed and counted", c, err, errs())
		}
	}
	if got := counter(t, reg, "latch_cluster_dispatch_received_total"); got != 4 {
		t.Errorf("%v dispatches counted as received, want 4", got)
	}
}
