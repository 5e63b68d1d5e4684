package engine_test

import (
	"context"
	"flag"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

var socialUsers = flag.Int("social-users", 100_000, "users in the social data set for benchmarks (100,000 ≈ 1.5M relationships)")

type socialFixture struct {
	s      *ir.Schema
	reader store.Reader
	rels   int
}

var (
	socialOnce sync.Once
	social     socialFixture
	socialErr  error
)

// loadSocial builds the social data set once per test binary.
func loadSocial(b *testing.B) socialFixture {
	b.Helper()
	socialOnce.Do(func() {
		ctx := context.Background()
		social.s, socialErr = schema.Compile(dataset.SocialSchema)
		if socialErr != nil {
			return
		}
		st := memory.New(memory.Options{})
		var batch []store.Update
		flush := func() error {
			_, err := st.Write(ctx, nil, batch, nil)
			batch = batch[:0]
			return err
		}
		socialErr = dataset.Social{Users: *socialUsers, Seed: 1}.Generate(func(r rel.Relationship) error {
			social.rels++
			batch = append(batch, store.Update{Op: store.Touch, Relationship: r})
			if len(batch) == 10_000 {
				return flush()
			}
			return nil
		})
		if socialErr == nil {
			socialErr = flush()
		}
		if socialErr != nil {
			return
		}
		rev, err := st.HeadRevision(ctx)
		if err == nil {
			social.reader, err = st.Reader(ctx, rev)
		}
		socialErr = err
	})
	if socialErr != nil {
		b.Fatal(socialErr)
	}
	return social
}

// BenchmarkCheckSocial measures one in-process check of the social workload's request
// mix against the memory store: go test ./internal/engine -bench CheckSocial -benchmem
func BenchmarkCheckSocial(b *testing.B) {
	f := loadSocial(b)
	eng := engine.New(engine.Config{})
	draw := dataset.NewSocialChecks(*socialUsers, 2)
	items := make([]engine.CheckRequest, 4096)
	for i := range items {
		c := draw.Next()
		items[i] = engine.CheckRequest{Resource: c.Resource, Permission: c.Permission, Subject: c.Subject}
	}
	ctx := context.Background()
	allowed := 0
	b.ReportAllocs()
	gcBefore, cpuBefore := gcCPU()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := eng.Check(ctx, f.s, f.reader, items[i%len(items)])
		if err != nil {
			b.Fatal(err)
		}
		if res.Membership == engine.HasPermission {
			allowed++
		}
	}
	b.StopTimer()
	if gcAfter, cpuAfter := gcCPU(); cpuAfter > cpuBefore {
		b.ReportMetric(100*(gcAfter-gcBefore)/(cpuAfter-cpuBefore), "gc-cpu-%")
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
	b.ReportMetric(float64(f.rels), "rels")
}

// gcCPU returns the process's CPU seconds spent in garbage collection and in all, as
// the runtime estimates them.
func gcCPU() (gc, total float64) {
	samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(samples)
	return samples[0].Value.Float64(), samples[1].Value.Float64()
}
