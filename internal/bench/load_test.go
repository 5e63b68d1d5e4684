package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

// importServer serves WriteSchema and, when bulk is set, ImportBulkRelationships;
// otherwise WriteRelationships. It remembers what it received.
type importServer struct {
	v1.UnimplementedPermissionsServiceServer
	v1.UnimplementedSchemaServiceServer
	bulk bool

	mu      sync.Mutex
	schema  string
	rels    []string // guarded by mu
	streams int      // non-empty import streams, guarded by mu
	writes  int      // guarded by mu
}

func (s *importServer) WriteSchema(_ context.Context, r *v1.WriteSchemaRequest) (*v1.WriteSchemaResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.schema = r.Schema
	return &v1.WriteSchemaResponse{}, nil
}

func (s *importServer) ImportBulkRelationships(st grpc.ClientStreamingServer[v1.ImportBulkRelationshipsRequest, v1.ImportBulkRelationshipsResponse]) error {
	if !s.bulk {
		return status.Error(codes.Unimplemented, "no bulk import here")
	}
	var n uint64
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		for _, r := range req.Relationships {
			s.rels = append(s.rels, wireString(r))
		}
		s.mu.Unlock()
		n += uint64(len(req.Relationships))
	}
	s.mu.Lock()
	if n > 0 {
		s.streams++
	}
	s.mu.Unlock()
	return st.SendAndClose(&v1.ImportBulkRelationshipsResponse{NumLoaded: n})
}

func (s *importServer) WriteRelationships(_ context.Context, r *v1.WriteRelationshipsRequest) (*v1.WriteRelationshipsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	for _, u := range r.Updates {
		if u.Operation != v1.RelationshipUpdate_OPERATION_TOUCH {
			return nil, status.Error(codes.InvalidArgument, "want TOUCH")
		}
		s.rels = append(s.rels, wireString(u.Relationship))
	}
	return &v1.WriteRelationshipsResponse{WrittenAt: &v1.ZedToken{Token: "t"}}, nil
}

func wireString(r *v1.Relationship) string { return rel.String(relv1.FromRelationship(r)) }

func serveImport(t *testing.T, s *importServer) Conn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	v1.RegisterPermissionsServiceServer(g, s)
	v1.RegisterSchemaServiceServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conns, err := Dial(Endpoint{Addr: lis.Addr().String()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseAll(conns) })
	return conns[0]
}

// caveated is the social data set with every third relationship caveated and every
// fifth expiring, which the generated code encodes.
type caveated struct{ dataset.Social }

func (c caveated) Generate(yield func(rel.Relationship) error) error {
	i := 0
	return c.Social.Generate(func(r rel.Relationship) error {
		if i++; i%3 == 0 {
			r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"n": float64(i)}}
		}
		if i%5 == 0 {
			at := time.Date(2030, 1, 1, 0, 0, i, 0, time.UTC)
			r.Expiration = &at
		}
		return yield(r)
	})
}

func TestLoadBulkAndFallback(t *testing.T) {
	for _, ds := range []dataset.Dataset{dataset.Social{Users: 500, Seed: 2}, caveated{dataset.Social{Users: 100, Seed: 3}}} {
		t.Run(fmt.Sprintf("%T", ds), func(t *testing.T) { testLoadBulkAndFallback(t, ds) })
	}
}

func testLoadBulkAndFallback(t *testing.T, ds dataset.Dataset) {
	var want []string
	if err := ds.Generate(func(r rel.Relationship) error { want = append(want, rel.String(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, bulk := range []bool{true, false} {
		s := &importServer{bulk: bulk}
		var progress strings.Builder
		st, err := Load(context.Background(), serveImport(t, s), ds, LoadOptions{Batch: 100, Chunk: 1000, Progress: &progress})
		if err != nil {
			t.Fatalf("bulk=%v: %v", bulk, err)
		}
		if s.schema != dataset.SocialSchema {
			t.Errorf("bulk=%v: the schema was not written first", bulk)
		}
		if strings.Join(s.rels, "\n") != strings.Join(want, "\n") || st.Relationships != int64(len(want)) {
			t.Errorf("bulk=%v: server got %d relationships (stats say %d), want the %d generated, in order", bulk, len(s.rels), st.Relationships, len(want))
		}
		wantMethod := map[bool]string{true: LoadBulk, false: LoadWrite}[bulk]
		if st.Method != wantMethod || !strings.Contains(progress.String(), "relationships/s") {
			t.Errorf("bulk=%v: method %s, progress %q", bulk, st.Method, progress.String())
		}
		if bulk && s.streams != (len(want)+999)/1000 {
			t.Errorf("%d import streams for %d relationships in chunks of 1000", s.streams, len(want))
		}
		if !bulk && s.writes != (len(want)+99)/100 {
			t.Errorf("%d writes for %d relationships in batches of 100", s.writes, len(want))
		}
	}
}

func TestLoadBulkOnlyFailsWithoutBulk(t *testing.T) {
	_, err := Load(context.Background(), serveImport(t, &importServer{}), dataset.Permify{Users: 10}, LoadOptions{Method: LoadBulk})
	if err == nil || !strings.Contains(err.Error(), "Unimplemented") {
		t.Errorf("bulk-only load into a server without bulk import: %v", err)
	}
}
