package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestRestartUnderLoad stops the server under a write and read load: operations must
// fail promptly with store.ErrUnavailable while it is down, succeed again on their own
// once it is back, and every write that succeeded must still be there.
func TestRestartUnderLoad(t *testing.T) {
	pgtest.Get(t)              // skips when PostgreSQL is not installed
	srv, err := pgtest.Start() // a server of its own: this test stops it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	uri := srv.NewDatabase(t, "latch_migrated", postgres.Migrate)
	ctx := context.Background()
	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var (
		mu        sync.Mutex
		committed []string // guarded by mu
		failures  atomic.Int64
		slowest   atomic.Int64 // nanoseconds of the slowest failed operation
		bad       = make(chan error, 16)
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		seq       atomic.Int64
	)
	failed := func(err error, took time.Duration) {
		if !errors.Is(err, store.ErrUnavailable) {
			select {
			case bad <- err:
			default:
			}
			return
		}
		failures.Add(1)
		for cur := slowest.Load(); int64(took) > cur && !slowest.CompareAndSwap(cur, int64(took)); cur = slowest.Load() {
		}
	}
	for w := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, seq.Add(1))
				start := time.Now()
				_, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel(id, "u")}}, nil)
				if err != nil {
					failed(err, time.Since(start))
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				committed = append(committed, id)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			rev, err := s.HeadRevision(ctx)
			if err == nil {
				_, err = readAll(ctx, s, rev)
			}
			if err != nil {
				failed(err, time.Since(start))
				time.Sleep(5 * time.Millisecond)
			}
		}
	})

	time.Sleep(300 * time.Millisecond)
	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	downFailures := failures.Load()
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
	// The store recovers by itself: writes succeed again without reopening it.
	mu.Lock()
	before := len(committed)
	mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := len(committed)
		mu.Unlock()
		if n > before+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writes succeeded within 15s of the server's restart (%d before)", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(bad)
	for err := range bad {
		t.Fatalf("an operation failed with an error that is not store.ErrUnavailable: %v", err)
	}
	if downFailures == 0 {
		t.Fatal("no operation failed while the server was down")
	}
	if d := time.Duration(slowest.Load()); d > 3*time.Second {
		t.Fatalf("a failing operation took %v; want ErrUnavailable promptly", d)
	}
	head, err := s.HeadRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(ctx, s, head)
	if err != nil {
		t.Fatal(err)
	}
	present := make(map[string]bool, len(got))
	for _, id := range got {
		present[id] = true
	}
	for _, id := range committed {
		if !present[id] {
			t.Fatalf("write %s succeeded before or after the restart but is missing", id)
		}
	}
	t.Logf("reliability: postgres store restarted under load: %d writes committed, 0 lost, %d operations failed with ErrUnavailable while down (slowest %v)",
		len(committed), failures.Load(), time.Duration(slowest.Load()))
}
