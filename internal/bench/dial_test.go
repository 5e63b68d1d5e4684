package bench

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"go.uber.org/goleak"
)

// countingServer answers checks as the empty server does and counts them.
type countingServer struct {
	emptyServer
	calls *atomic.Int64
}

func (s countingServer) CheckPermission(ctx context.Context, r *v1.CheckPermissionRequest) (*v1.CheckPermissionResponse, error) {
	s.calls.Add(1)
	return s.emptyServer.CheckPermission(ctx, r)
}

func TestRunSpreadsCallsEquallyOverEndpoints(t *testing.T) {
	defer goleak.VerifyNone(t)
	const nodes = 3
	var (
		eps   []Endpoint
		addrs []string
		calls [nodes]atomic.Int64
	)
	for i := range nodes {
		e, stop, err := serveLoopback(countingServer{calls: &calls[i]})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		eps, addrs = append(eps, e), append(addrs, e.Addr)
	}
	// 4 connections over 3 endpoints round up to 6, two to each.
	conns, err := DialEach(eps, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(conns)
	if len(conns) != 6 || conns[0].Target() != addrs[0] || conns[4].Target() != addrs[1] {
		t.Fatalf("DialEach(3 endpoints, 4) gave %d connections, first to %s, fifth to %s; want 6, interleaved from %s",
			len(conns), conns[0].Target(), conns[4].Target(), addrs[0])
	}
	w, err := ParseWorkload([]byte(checkOnly))
	if err != nil {
		t.Fatal(err)
	}
	w.Phases[0].Duration /= 5
	res, err := Run(context.Background(), w, Options{Conns: Conns(conns), Endpoints: addrs})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Endpoints, addrs) {
		t.Errorf("result records endpoints %v, want %v", res.Endpoints, addrs)
	}
	// Each worker takes the connections strictly in turn, so over the 16 workers no
	// endpoint is more than 16 calls off an equal share.
	var total int64
	for i := range calls {
		total += calls[i].Load()
	}
	inFlight := int64(w.Phases[0].Load.InFlight)
	if answered := res.Phases[0].Total.Count; answered == 0 || answered > total {
		t.Fatalf("result counts %d answers, the servers %d calls", answered, total)
	}
	for i := range calls {
		if n := calls[i].Load(); n == 0 || 3*n < total-3*inFlight || 3*n > total+3*inFlight {
			t.Errorf("endpoint %d answered %d of %d calls; want a third, within %d", i, n, total, inFlight)
		}
	}
}
