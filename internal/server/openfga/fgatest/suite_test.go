package fgatest

import (
	"flag"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	addr = flag.String("fga.addr", "", "run the conformance suite against the OpenFGA gRPC API at this address too (host:port, plaintext)")
	key  = flag.String("fga.key", "", "with -fga.addr: the preshared key to send as a bearer token")
)

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
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *key != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(*key)))
	}
	conn, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var counts Counts
	t.Run("suite", func(t *testing.T) { Run(t, openfgav1.NewOpenFGAServiceClient(conn), &counts, suites...) })
	t.Logf("%s: %s", *addr, &counts)
}

// TestConformanceLatch runs OpenFGA's suite against latch's OpenFGA API over gRPC, on
// the memory store and on pebble (the default, durable).
func TestConformanceLatch(t *testing.T) {
	suites := LoadConformance(t)
	for _, engine := range []string{"memory", "pebble"} {
		t.Run(engine, func(t *testing.T) {
			uri := ""
			if engine == "pebble" {
				uri = t.TempDir()
			}
			latch := startLatchOn(t, engine, uri)
			var counts Counts
			t.Run("suite", func(t *testing.T) { Run(t, latch.Client, &counts, suites...) })
			t.Logf("latch on %s: %s", engine, &counts)
		})
	}
}
