package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/store/memory"
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

// TestDispatchesInFlightAreBounded: a peer that sends many times the concurrency
// limit's dispatches at once on its connection has at most the limit evaluated at a
// time; the others wait their turn and are answered, none refused.
func TestDispatchesInFlightAreBounded(t *testing.T) {
	const limit, sent = 4, 16 * 4
	st := memory.New(memory.Options{})
	defer st.Close()
	var inFlight, most, started atomic.Int64
	full, release := make(chan struct{}), make(chan struct{})
	tc := startClusterWith(t, 1, st, func(_ int, cfg *Config, _ *ServiceOptions) { cfg.ConcurrencyLimit = limit })
	nd := tc.nodes[0]
	nd.g.Stop()
	nd.g = nd.c.NewServer(func(ctx context.Context, sp *engine.Subproblem) (*engine.Answers, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if started.Add(1) == limit {
			close(full)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &engine.Answers{States: make([]engine.AnswerState, len(sp.ResourceIDs)), Missing: make([][]string, len(sp.ResourceIDs))}, nil
	}, ServiceOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := nd.g
	go func() { _ = g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{key: "k"}), grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, sent)
	var wg sync.WaitGroup
	for i := range sent {
		wg.Go(func() {
			req, resp := encodeSubproblem(&engine.Subproblem{ResourceType: "doc", Relation: "view", ResourceIDs: []string{fmt.Sprint(i)}}), frame(nil)
			errs[i] = conn.Invoke(ctx, checkMethod, &req, &resp)
		})
	}
	// The limit's worth are held in flight; the rest must wait for them. The pause
	// gives any dispatch let in past the limit time to show itself: a correct node
	// passes whatever its speed.
	<-full
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("dispatches past the limit failed: %v", err)
	}
	if m := most.Load(); m > limit {
		t.Errorf("%d dispatches were evaluated at once, more than the limit of %d", m, limit)
	}
}
