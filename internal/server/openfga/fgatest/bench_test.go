package fgatest

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/transformer"
	"golang.org/x/sync/errgroup"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

var benchUsers = flag.Int("fga.users", 10000, "users of the social data set BenchmarkSocialCheck loads (about 14 tuples each)")

// socialModel is the social data set's schema (dataset.SocialSchema) in OpenFGA's
// language: the same relations, and permissions as relations rewritten the same way;
// OpenFGA reserves the name self, so the data set's self relation is me here.
const socialModel = `model
  schema 1.1

type user
  relations
    define me: [user]
    define follower: [user, user:*]
    define blocked: [user]
    define view: (me or follower) but not blocked

type content
  relations
    define owner: [user]
    define public: [user:*]
    define view: me from owner or ((public or follower from owner) but not blocked from owner)

type interaction
  relations
    define creator: [user]
    define parent: [content]
    define view: me from creator or (view from creator and view from parent)
`

// BenchmarkSocialCheck measures OpenFGA's Check over gRPC on the social workload (the
// data of `latch bench gen social`, the request mix of workloads/social.yaml, 16 in
// flight) against latch on its memory store and on PostgreSQL, in this process, and,
// with bin/openfga, against the real OpenFGA on the same PostgreSQL: checks/s and p95
// per target.
//
//	go test ./internal/server/openfga/fgatest -run '^$' -bench SocialCheck -benchtime 20s -fga.users 100000
func BenchmarkSocialCheck(b *testing.B) {
	b.Run("latch-memory", func(b *testing.B) {
		benchSocial(b, startLatch(b).Client)
	})
	b.Run("latch-postgres", func(b *testing.B) {
		uri := pgtest.Own(b).NewDatabase(b, "latch_migrated", postgres.Migrate)
		benchSocial(b, startLatchOn(b, "postgres", uri).Client)
	})
	b.Run("openfga-postgres", func(b *testing.B) {
		bin := OpenFGABinary(b)
		if bin == "" {
			b.Skip("no bin/openfga: `make openfga` first")
		}
		pg := pgtest.Own(b)
		uri := pg.NewDatabase(b, "openfga", func(ctx context.Context, uri string) error {
			out, err := exec.CommandContext(ctx, bin, "migrate", "--datastore-engine", "postgres", "--datastore-uri", uri).CombinedOutput()
			if err != nil {
				return fmt.Errorf("openfga migrate: %v: %s", err, out)
			}
			return nil
		})
		benchSocial(b, StartOpenFGA(b, "--datastore-engine", "postgres", "--datastore-uri", uri).Client)
	})
}

// benchSocial loads the social data set into a new store of client, then measures
// checks.
func benchSocial(b *testing.B, client openfgav1.OpenFGAServiceClient) {
	ctx := context.Background()
	store, model := loadSocial(b, ctx, client)
	b.Run("check", func(b *testing.B) {
		var seed atomic.Uint64
		var mu sync.Mutex
		var all []time.Duration // guarded by mu
		b.SetParallelism(8)     // 16 in flight on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			draw := dataset.NewSocialChecks(*benchUsers, seed.Add(1))
			var lat []time.Duration
			for pb.Next() {
				c := draw.Next()
				start := time.Now()
				_, err := client.Check(ctx, &openfgav1.CheckRequest{
					StoreId: store, AuthorizationModelId: model,
					TupleKey: &openfgav1.CheckRequestTupleKey{
						Object: c.Resource.Type + ":" + c.Resource.ID, Relation: c.Permission,
						User: c.Subject.Object.Type + ":" + c.Subject.Object.ID,
					},
				})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
		b.StopTimer()
		slices.Sort(all)
		if len(all) > 0 {
			b.ReportMetric(float64(all[len(all)*95/100].Microseconds())/1000, "p95-ms")
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
	})
}

// loadSocial creates a store with socialModel and writes the data set through Write,
// 100 tuples a call, four calls at a time.
func loadSocial(b *testing.B, ctx context.Context, client openfgav1.OpenFGAServiceClient) (store, model string) {
	b.Helper()
	s, err := client.CreateStore(ctx, &openfgav1.CreateStoreRequest{Name: "social"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := transformer.TransformDSLToProto(socialModel)
	if err != nil {
		b.Fatal(err)
	}
	w, err := client.WriteAuthorizationModel(ctx, &openfgav1.WriteAuthorizationModelRequest{
		StoreId: s.GetId(), SchemaVersion: m.GetSchemaVersion(), TypeDefinitions: m.GetTypeDefinitions(),
	})
	if err != nil {
		b.Fatal(err)
	}
	store, model = s.GetId(), w.GetAuthorizationModelId()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	var batch []*openfgav1.TupleKey
	flush := func() {
		keys := batch
		batch = nil
		g.Go(func() error {
			_, err := client.Write(gctx, &openfgav1.WriteRequest{
				StoreId: store, AuthorizationModelId: model, Writes: &openfgav1.WriteRequestWrites{TupleKeys: keys},
			})
			return err
		})
	}
	start := time.Now()
	err = dataset.Social{Users: *benchUsers, Seed: 1}.Generate(func(r rel.Relationship) error {
		user := r.Subject.Object.Type + ":" + r.Subject.Object.ID
		if r.Subject.Relation != "" {
			user += "#" + r.Subject.Relation
		}
		relation := r.Relation
		if relation == "self" {
			relation = "me"
		}
		batch = append(batch, &openfgav1.TupleKey{Object: r.Resource.Type + ":" + r.Resource.ID, Relation: relation, User: user})
		if len(batch) == apiLimit {
			flush()
		}
		return gctx.Err()
	})
	if len(batch) > 0 {
		flush()
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("loading the social data set: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d users' social data set in %v", *benchUsers, time.Since(start).Round(time.Millisecond))
	return store, model
}
