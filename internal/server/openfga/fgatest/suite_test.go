package fgatest

import (
	"flag"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var addr = flag.String("fga.addr", "", "run the conformance suite against the OpenFGA gRPC API at this address too (host:port, plaintext)")

// TestConformanceOpenFGA runs OpenFGA's suite against the real OpenFGA: what validates
// the harness (every assertion passes there, so a failure against latch is latch's).
func TestConformanceOpenFGA(t *testing.T) {
	suites := LoadConformance(t)
	fga := StartOpenFGA(t)
	var counts Counts
	t.Run("suite", func(t *testing.T) { Run(t, fga.Client, &counts, suites...) })
	t.Logf("real OpenFGA: %s", &counts)
}

// TestConformanceAddr runs OpenFGA's suite against any server named by -fga.addr.
func TestConformanceAddr(t *testing.T) {
	if *addr == "" {
		t.Skip("no -fga.addr")
	}
	suites := LoadConformance(t)
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var counts Counts
	t.Run("suite", func(t *testing.T) { Run(t, openfgav1.NewOpenFGAServiceClient(conn), &counts, suites...) })
	t.Logf("%s: %s", *addr, &counts)
}

// TestConformanceLatch runs OpenFGA's suite against latch's OpenFGA API over gRPC.
func TestConformanceLatch(t *testing.T) {
	suites := LoadConformance(t)
	latch := startLatch(t)
	var counts Counts
	t.Run("suite", func(t *testing.T) { Run(t, latch.Client, &counts, suites...) })
	t.Logf("latch: %s", &counts)
}
