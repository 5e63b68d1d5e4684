package server

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestAuth(t *testing.T) {
	ts := start(t, func(c *Config) { c.PresharedKeys = []string{"first-key", testKey} })
	for _, tc := range []struct {
		name string
		key  string
		code codes.Code
	}{
		{"no key", "", codes.Unauthenticated},
		{"wrong key", "not-the-key", codes.PermissionDenied},
		{"prefix of a key", testKey[:4], codes.PermissionDenied},
		{"second configured key", testKey, codes.NotFound}, // authenticated: ReadSchema before any schema
		{"first configured key", "first-key", codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, ts.grpcAddr, tc.key)
			defer conn.Close()
			_, err := v1.NewSchemaServiceClient(conn).ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
			wantCode(t, err, tc.code, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
			stream, err := v1.NewPermissionsServiceClient(conn).ReadRelationships(ctxT(t), &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "x"}})
			if err == nil {
				_, err = stream.Recv()
			}
			if tc.code != codes.NotFound {
				wantCode(t, err, tc.code, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
			}
		})
	}
	t.Run("not bearer", func(t *testing.T) {
		conn := dial(t, ts.grpcAddr, "")
		defer conn.Close()
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "authorization", "Basic "+testKey)
		_, err := v1.NewSchemaServiceClient(conn).ReadSchema(ctx, &v1.ReadSchemaRequest{})
		wantCode(t, err, codes.Unauthenticated, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	})
	t.Run("health needs no key", func(t *testing.T) {
		conn := dial(t, ts.grpcAddr, "")
		defer conn.Close()
		for _, svc := range []string{"", "authzed.api.v1.SchemaService", "authzed.api.v1.PermissionsService"} {
			resp, err := healthpb.NewHealthClient(conn).Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health %q: %v %v", svc, resp, err)
			}
		}
	})
}

func TestGeneratedKeyAndLoopback(t *testing.T) {
	ts := start(t, func(c *Config) { c.PresharedKeys = nil })
	key := ts.srv.GeneratedKey()
	if len(key) < 16 {
		t.Fatalf("generated key %q is too short", key)
	}
	conn := dial(t, ts.grpcAddr, key)
	defer conn.Close()
	_, err := v1.NewSchemaServiceClient(conn).ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
	wantCode(t, err, codes.NotFound, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		_, err := New(Config{GRPCAddr: addr, HTTPAddr: "-"})
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("New with grpc address %q and no key: %v, want a loopback error", addr, err)
		}
	}
	_, err = New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("New with a public http address and no key: %v", err)
	}
	_, err = New(Config{GRPCAddr: "127.0.0.1:0", DatastoreEngine: "postgres", PresharedKeys: []string{"k"}})
	if err == nil || !strings.Contains(err.Error(), `datastore engine "postgres" needs --datastore-conn-uri`) {
		t.Errorf("New with postgres and no URI: %v", err)
	}
}

func TestRequestTooLarge(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxRequestBytes = 2048 })
	_, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: "definition user {}\n// " + strings.Repeat("x", 4096)})
	st := wantCode(t, err, codes.ResourceExhausted, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "larger than max") {
		t.Errorf("message %q does not say the request was too large", st.Message())
	}
}

// A handler's panic becomes INTERNAL, frees the call's admission slot and still
// sends the call's trailer, which counts no work done.
func TestRecoverTurnsPanicIntoInternal(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	m := newMetrics(log)
	c := newCalls(log, m, openAuthenticator(), newAdmission(Config{}.WithDefaults(), m), DefaultStreamStallTimeout)
	unaryStream := &unaryTrailers{}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-request-id", "r1"))
	_, err := c.unary(grpc.NewContextWithServerTransportStream(ctx, unaryStream), nil, &grpc.UnaryServerInfo{FullMethod: v1.SchemaService_ReadSchema_FullMethodName}, func(context.Context, any) (any, error) {
		panic("boom")
	})
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary panic: %v, want INTERNAL", err)
	}
	stream := &streamTrailers{ctx: ctx}
	err = c.stream(nil, stream, &grpc.StreamServerInfo{FullMethod: v1.PermissionsService_ReadRelationships_FullMethodName}, func(any, grpc.ServerStream) error { panic("boom") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream panic: %v, want INTERNAL", err)
	}
	for name, tr := range map[string]metadata.MD{"unary": unaryStream.trailer, "stream": stream.trailer} {
		if id := tr.Get("x-request-id"); len(id) != 1 || id[0] != "r1" {
			t.Errorf("%s call's trailer %v: want its request id r1", name, tr)
		}
		if d, c := counts(t, tr); d != 0 || c != 0 {
			t.Errorf("%s call's trailer counts %d and %d: want 0 and 0", name, d, c)
		}
	}
	if n := len(c.route(v1.SchemaService_ReadSchema_FullMethodName).limiter.slots); n != 0 {
		t.Errorf("%d admission slots held after the panics", n)
	}
}

// unaryTrailers is a unary call's transport stream that keeps the trailer it is given.
type unaryTrailers struct{ trailer metadata.MD }

func (*unaryTrailers) Method() string               { return v1.SchemaService_ReadSchema_FullMethodName }
func (*unaryTrailers) SetHeader(metadata.MD) error  { return nil }
func (*unaryTrailers) SendHeader(metadata.MD) error { return nil }
func (u *unaryTrailers) SetTrailer(md metadata.MD) error {
	u.trailer = metadata.Join(u.trailer, md)
	return nil
}

// streamTrailers is a server stream that keeps the trailer it is given.
type streamTrailers struct {
	grpc.ServerStream
	ctx     context.Context
	trailer metadata.MD
}

func (s *streamTrailers) Context() context.Context  { return s.ctx }
func (s *streamTrailers) SetTrailer(md metadata.MD) { s.trailer = metadata.Join(s.trailer, md) }

// TestNoAuth: with NoAuth the SpiceDB API, its gateway and Permify's API answer
// clients that send no key, as Permify's load scripts do.
func TestNoAuth(t *testing.T) {
	ts := start(t, func(c *Config) { c.NoAuth, c.PresharedKeys = true, nil })
	if ts.srv.GeneratedKey() != "" {
		t.Error("a key was generated without authentication")
	}
	conn := dial(t, ts.grpcAddr, "")
	defer conn.Close()
	if _, err := v1.NewSchemaServiceClient(conn).WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: docSchema}); err != nil {
		t.Fatalf("gRPC without a key: %v", err)
	}
	if code, out := permifyPost(t, ts, "", "/v1/tenants/t1/schemas/read", map[string]any{}); code != http.StatusOK {
		t.Errorf("Permify API without a key: %d %v", code, out)
	}
}

// TestGeneratedKeyKeptWithTheData starts a pebble server without a key twice over one
// data directory: the second start uses the first one's key, kept in the directory
// (mode 0600), and a wrong key's error says where the server's key is.
func TestGeneratedKeyKeptWithTheData(t *testing.T) {
	dir := t.TempDir()
	noKey := func(c *Config) {
		c.PresharedKeys = nil
		c.DatastoreEngine, c.DatastoreURI = "pebble", dir
	}
	first := start(t, noKey)
	key, path := first.srv.GeneratedKey(), first.srv.GeneratedKeyPath()
	if key == "" || path != filepath.Join(dir, GeneratedKeyFile) {
		t.Fatalf("generated key %q kept in %q, want one kept in %s", key, path, filepath.Join(dir, GeneratedKeyFile))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want mode 0600", err, fi.Mode().Perm())
	}
	first.stop(t)

	second := start(t, noKey)
	if got := second.srv.GeneratedKey(); got != key {
		t.Fatalf("after a restart the generated key is %q, want the kept %q", got, key)
	}
	conn := dial(t, second.grpcAddr, key)
	defer conn.Close()
	if _, err := v1.NewSchemaServiceClient(conn).ReadSchema(ctxT(t), &v1.ReadSchemaRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("ReadSchema with the kept key: %v, want NotFound (authenticated, no schema)", err)
	}
	wrong := dial(t, second.grpcAddr, "an-old-key")
	defer wrong.Close()
	_, err := v1.NewSchemaServiceClient(wrong).ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
	st := wantCode(t, err, codes.PermissionDenied, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), path) {
		t.Errorf("a wrong key's error %q does not name the key file %s", st.Message(), path)
	}
}

// TestGeneratedKeyWithoutDataDirectory: a memory server's key lives for the run only.
func TestGeneratedKeyWithoutDataDirectory(t *testing.T) {
	ts := start(t, func(c *Config) { c.PresharedKeys = nil })
	if ts.srv.GeneratedKey() == "" || ts.srv.GeneratedKeyPath() != "" {
		t.Fatalf("memory server: key %q kept in %q, want a key kept nowhere", ts.srv.GeneratedKey(), ts.srv.GeneratedKeyPath())
	}
}
