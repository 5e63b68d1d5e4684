package fgatest

import (
	"context"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latch-authz/latch/internal/server"
)

// latchServer is latch serving OpenFGA's API on loopback, for one test.
type latchServer struct {
	GRPCAddr, HTTPAddr string
	Client             openfgav1.OpenFGAServiceClient
}

// testKey is the preshared key the servers of these tests want (latch always wants
// one), sent as OpenFGA's clients send an API token.
const testKey = "fgatest-key"

// startLatch runs latch on the memory store, and stops it when the test ends.
func startLatch(t testing.TB) *latchServer {
	t.Helper()
	return startLatchOn(t, "memory", "")
}

// startLatchOn runs latch on the store engine at uri (pebble's directory, a
// database's URI), and stops it when the test ends.
func startLatchOn(t testing.TB, engine, uri string) *latchServer {
	t.Helper()
	srv, err := server.New(server.Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", PresharedKeys: []string{testKey},
		ShutdownGrace: 2 * time.Second, DatastoreEngine: engine, DatastoreURI: uri,
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	grpcAddr, httpAddr := srv.Addrs()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("latch did not stop within 30s")
		}
	})
	return &latchServer{GRPCAddr: grpcAddr, HTTPAddr: httpAddr, Client: openfgav1.NewOpenFGAServiceClient(conn)}
}

// bearer sends a preshared key as OpenFGA's clients do.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
