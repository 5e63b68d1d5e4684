package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/latch-authz/latch/internal/bench/dataset"
)

const checkOnly = `name: checks
users: 10000
dataset: {name: social, seed: 1}
generators:
  subject: {dist: zipf, s: 1.1, seed: 42}
  content: {dist: uniform}
  user: {dist: uniform}
steps:
  - {name: content, type: check, weight: 6, resource: "content:c{content}", permission: view, subject: "user:u{subject}"}
  - {name: user, type: check, weight: 4, resource: "user:u{user}", permission: view, subject: "user:u{subject}"}
phases:
  - {name: steady, duration: 1s, closed: {in_flight: 16}}
`

// benchChecks drives checks at e with b.N requests over 16 goroutines and reports
// requests/s, the figure to hold latch's against.
func benchChecks(b *testing.B, e Endpoint) {
	w, err := ParseWorkload([]byte(checkOnly))
	if err != nil {
		b.Fatal(err)
	}
	conns, err := Dial(e, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer CloseAll(conns)
	p := newPlan(w)
	var id, failed atomic.Int64
	b.SetParallelism(8) // 16 in flight on 2 cores, as the reference measurements
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(id.Add(1))
		wk := newGRPCWorker(p, conns[i%len(conns)], 1, i)
		for pb.Next() {
			if _, err := wk.do(context.Background()); err != nil {
				failed.Add(1)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if failed.Load() > 0 {
		b.Fatalf("%d of %d requests failed", failed.Load(), b.N)
	}
}

// BenchmarkEmptyServer measures the generator against a gRPC server that answers every
// check with a constant: the ceiling of gRPC and this generator on this machine.
func BenchmarkEmptyServer(b *testing.B) {
	e, stop, err := startEmpty()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	benchChecks(b, e)
}

// BenchmarkLatchInProcess measures the same checks against latch (memory store) over
// the social data set with 10,000 users; its req/s over BenchmarkEmptyServer's is the
// latch/empty ratio.
func BenchmarkLatchInProcess(b *testing.B) {
	e, stop, err := StartLatch(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	conns, err := Dial(e, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer CloseAll(conns)
	if _, err := Load(context.Background(), conns[0], dataset.Social{Users: 10_000, Seed: 1}, LoadOptions{}); err != nil {
		b.Fatal(err)
	}
	benchChecks(b, e)
}

func TestEmptyServerAnswersChecks(t *testing.T) {
	e, stop, err := startEmpty()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	w, err := ParseWorkload([]byte(checkOnly))
	if err != nil {
		t.Fatal(err)
	}
	w.Phases[0].Duration /= 5
	conns, err := Dial(e, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(conns)
	res, err := Run(context.Background(), w, Options{Conns: Conns(conns)})
	if err != nil {
		t.Fatal(err)
	}
	if tot := res.Phases[0].Total; tot.Count == 0 || len(tot.Errors) > 0 {
		t.Errorf("against the empty server: %d answers, errors %v", tot.Count, tot.Errors)
	}
}
