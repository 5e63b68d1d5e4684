package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// BenchmarkBulkLoad loads 500,000 relationships per iteration into a fresh database
// and reports the load rate and the table's size on disk (heap, indexes, TOAST) per
// relationship.
//
//	go test ./internal/store/postgres -run '^$' -bench BulkLoad -benchtime 1x
func BenchmarkBulkLoad(b *testing.B) {
	const n = 500_000
	srv := pgtest.Get(b)
	ctx := context.Background()
	var total time.Duration
	var bytesPerRel float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		uri := srv.NewDatabase(b, "latch_migrated", postgres.Migrate)
		s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.BulkLoad(ctx, datasetSeq(n)); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		bytesPerRel = tableBytes(b, s) / n
		s.Close()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "rels/s")
	b.ReportMetric(bytesPerRel, "bytes/rel")
}

// datasetSeq yields n relationships shaped like a document-sharing dataset: documents
// with viewers and editors, some through groups, a few caveated.
func datasetSeq(n int) func(yield func(rel.Relationship, error) bool) {
	return func(yield func(rel.Relationship, error) bool) {
		for i := range n {
			r := rel.Relationship{
				Resource: rel.ObjectRef{Type: "document", ID: fmt.Sprintf("doc_%07d", i/4)},
				Relation: [...]string{"viewer", "editor", "viewer", "owner"}[i%4],
				Subject:  rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprintf("user_%06d", (i*7919)%100_000)}},
			}
			if i%4 == 2 {
				r.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: fmt.Sprintf("group_%05d", i%5000)}, Relation: "member"}
			}
			if i%50 == 0 {
				r.Caveat = &rel.Caveat{Name: "on_weekdays", Context: map[string]any{"tz": "UTC"}}
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func tableBytes(b *testing.B, s *postgres.Store) float64 {
	var size int64
	if err := postgres.QueryRowForTest(s, context.Background(), "SELECT pg_total_relation_size('latch_relationships')", &size); err != nil {
		b.Fatal(err)
	}
	return float64(size)
}

var _ store.Store = (*postgres.Store)(nil)
