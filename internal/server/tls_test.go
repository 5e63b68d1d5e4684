package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latch-authz/latch/internal/tlsconfig/tlstest"
)

// TestTLSEndToEnd serves the gRPC API and the HTTP gateway over TLS with certificates
// issued in the test: a client trusting the CA checks over both, the gateway reaches
// the API over TLS, a plaintext client is refused, and a rotated certificate is served
// without a restart.
func TestTLSEndToEnd(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	grpcCert, grpcKey := filepath.Join(dir, "grpc.pem"), filepath.Join(dir, "grpc.key")
	httpCert, httpKey := filepath.Join(dir, "http.pem"), filepath.Join(dir, "http.key")
	ca.Issue(t, grpcCert, grpcKey)
	ca.Issue(t, httpCert, httpKey)
	cfg := Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", MetricsAddr: "-", PresharedKeys: []string{testKey},
		DatastoreEngine: "memory", ShutdownGrace: 2 * time.Second,
		GRPCTLSCertPath: grpcCert, GRPCTLSKeyPath: grpcKey, HTTPTLSCertPath: httpCert, HTTPTLSKeyPath: httpKey,
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	grpcAddr, httpAddr := srv.Addrs()
	clientTLS := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)), grpc.WithPerRPCCredentials(bearer(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := &testServer{perms: v1.NewPermissionsServiceClient(conn), schema: v1.NewSchemaServiceClient(conn)}
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "viewer", "user", "alice", ""))
	resp, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "alice", ""))
	if err != nil || resp.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("check over TLS: %v %v", resp, err)
	}

	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	defer httpClient.CloseIdleConnections()
	body := `{"consistency":{"fullyConsistent":true},"resource":{"objectType":"document","objectId":"readme"},"permission":"view","subject":{"object":{"objectType":"user","objectId":"alice"}}}`
	req, _ := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/v1/permissions/check", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	hresp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("check over HTTPS: %v", err)
	}
	b, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK || !strings.Contains(string(b), "PERMISSIONSHIP_HAS_PERMISSION") {
		t.Fatalf("check over HTTPS: %s %s", hresp.Status, b)
	}

	plain, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := (&testServer{perms: v1.NewPermissionsServiceClient(plain)}).check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "alice", "")); err == nil {
		t.Fatal("a plaintext client was served by the TLS listener")
	}

	rotated := ca.Issue(t, grpcCert, grpcKey)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := tls.Dial("tcp", grpcAddr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		served := c.ConnectionState().PeerCertificates[0].Raw
		_ = c.Close()
		if bytes.Equal(served, rotated) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The gateway's own connection trusts the rotated certificate too.
	req, _ = http.NewRequest(http.MethodPost, "https://"+httpAddr+"/v1/permissions/check", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	if hresp, err = httpClient.Do(req); err != nil || hresp.StatusCode != http.StatusOK {
		t.Fatalf("check over HTTPS after rotation: %v %v", hresp, err)
	}
	hresp.Body.Close()
}
