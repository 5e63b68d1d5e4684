package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestMain runs a throwaway PostgreSQL server for the conformance tests on postgres and
// checks that no test leaks goroutines.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const testKey = "test-preshared-key"

// testServer is a server on 127.0.0.1 port 0 with clients that present testKey.
type testServer struct {
	srv      *Server
	conn     *grpc.ClientConn
	perms    v1.PermissionsServiceClient
	schema   v1.SchemaServiceClient
	grpcAddr string
	httpAddr string
	stopOnce sync.Once
	shutdown func()
}

// stop stops the server now rather than at cleanup (to restart on the same data).
func (ts *testServer) stop(t *testing.T) {
	t.Helper()
	ts.stopOnce.Do(ts.shutdown)
}

// start runs a server for the test and stops it (waiting for Serve) at cleanup.
func start(t *testing.T, mutate func(*Config)) *testServer {
	t.Helper()
	cfg := Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", PresharedKeys: []string{testKey}, ShutdownGrace: 2 * time.Second, DatastoreEngine: "memory"}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	ts := &testServer{srv: srv}
	ts.grpcAddr, ts.httpAddr = srv.Addrs()
	ts.conn = dial(t, ts.grpcAddr, testKey)
	ts.perms = v1.NewPermissionsServiceClient(ts.conn)
	ts.schema = v1.NewSchemaServiceClient(ts.conn)
	ts.shutdown = func() {
		_ = ts.conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context was cancelled")
		}
	}
	t.Cleanup(func() { ts.stopOnce.Do(ts.shutdown) })
	return ts
}

// bearer sends a preshared key on every call; the connection is plaintext loopback.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func dial(t *testing.T, addr, key string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if key != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(key)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails unless err is a status with code (and, when reason is not
// UNSPECIFIED, an ErrorInfo with that reason in the authzed.com domain).
func wantCode(t *testing.T, err error, code codes.Code, reason v1.ErrorReason) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("got error %v, want status %s", err, code)
	}
	if st.Code() != code {
		t.Fatalf("got code %s (%s), want %s", st.Code(), st.Message(), code)
	}
	if reason == v1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return st
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason.String() || info.GetDomain() != "authzed.com" {
				t.Fatalf("got ErrorInfo %s/%s, want %s/authzed.com (message %q)", info.GetReason(), info.GetDomain(), reason, st.Message())
			}
			return st
		}
	}
	t.Fatalf("status %s %q has no ErrorInfo, want reason %s", st.Code(), st.Message(), reason)
	return nil
}

func (ts *testServer) writeSchema(t *testing.T, text string) *v1.ZedToken {
	t.Helper()
	resp, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: text})
	if err != nil {
		t.Fatalf("WriteSchema: %v", err)
	}
	return resp.GetWrittenAt()
}

func obj(typ, id string) *v1.ObjectReference {
	return &v1.ObjectReference{ObjectType: typ, ObjectId: id}
}

func sub(typ, id, relation string) *v1.SubjectReference {
	return &v1.SubjectReference{Object: obj(typ, id), OptionalRelation: relation}
}

func relationship(resType, resID, relation, subType, subID, subRel string) *v1.Relationship {
	return &v1.Relationship{Resource: obj(resType, resID), Relation: relation, Subject: sub(subType, subID, subRel)}
}

func update(op v1.RelationshipUpdate_Operation, r *v1.Relationship) *v1.RelationshipUpdate {
	return &v1.RelationshipUpdate{Operation: op, Relationship: r}
}

func touch(rs ...*v1.Relationship) []*v1.RelationshipUpdate {
	out := make([]*v1.RelationshipUpdate, len(rs))
	for i, r := range rs {
		out[i] = update(v1.RelationshipUpdate_OPERATION_TOUCH, r)
	}
	return out
}

func (ts *testServer) write(t *testing.T, rs ...*v1.Relationship) *v1.ZedToken {
	t.Helper()
	resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: touch(rs...)})
	if err != nil {
		t.Fatalf("WriteRelationships: %v", err)
	}
	return resp.GetWrittenAt()
}

func fullyConsistent() *v1.Consistency {
	return &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}
}

func (ts *testServer) check(t *testing.T, c *v1.Consistency, res *v1.ObjectReference, perm string, s *v1.SubjectReference) (*v1.CheckPermissionResponse, error) {
	t.Helper()
	return ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{Consistency: c, Resource: res, Permission: perm, Subject: s})
}

// readAll drains a ReadRelationships stream.
func (ts *testServer) readAll(t *testing.T, req *v1.ReadRelationshipsRequest) ([]*v1.ReadRelationshipsResponse, error) {
	t.Helper()
	stream, err := ts.perms.ReadRelationships(ctxT(t), req)
	if err != nil {
		return nil, err
	}
	var out []*v1.ReadRelationshipsResponse
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp)
	}
}
