package server

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// Lines that start with "reliability:" are the figures `make reliability` gathers into
// its table (scripts/reliability.sh).

// codeCounts counts the gRPC codes clients saw.
type codeCounts struct {
	mu sync.Mutex
	n  map[codes.Code]int
}

func (c *codeCounts) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[codes.Code]int{}
	}
	c.n[status.Code(err)]++
}

func (c *codeCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(c.n)) {
		parts = append(parts, fmt.Sprintf("%s %d", code, c.n[code]))
	}
	return strings.Join(parts, ", ")
}

// TestPostgresOutageUnderLoad restarts PostgreSQL, then stops it for two seconds,
// under a load of writes and checks through the API: clients see only OK and
// UNAVAILABLE (never INTERNAL), the API answers again soon after the database is
// back, and every acknowledged write is there at the end. (Health during an outage is
// TestHealthFollowsTheDatastore's.)
func TestPostgresOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a PostgreSQL server")
	}
	pg := pgtest.Own(t) // a server of its own: this test stops it
	uri := pg.URI("postgres")
	if err := postgres.Migrate(context.Background(), uri); err != nil {
		t.Fatal(err)
	}
	ts := start(t, func(c *Config) {
		c.DatastoreEngine, c.DatastoreURI = "postgres", uri
		c.HTTPAddr = ""
	})
	ts.writeSchema(t, docSchema)

	var writes, checks codeCounts
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{
					Updates: touch(relationship("document", id, "viewer", "user", "u"+strconv.Itoa(w), "")),
				})
				cancel()
				writes.add(err)
				if err == nil {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := ts.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
					Consistency: fullyConsistent(), Resource: obj("document", "w0-0"), Permission: "view", Subject: sub("user", "u0", ""),
				})
				cancel()
				checks.add(err)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	pause := func(d time.Duration) { time.Sleep(d) }
	pause(500 * time.Millisecond)
	restart := time.Now()
	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(restart)
	pause(time.Second)
	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	pause(2 * time.Second)
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for {
		if _, err := ts.check(t, fullyConsistent(), obj("document", "w0-0"), "view", sub("user", "u0", "")); err == nil {
			break
		}
		if time.Since(back) > 30*time.Second {
			t.Fatal("the API did not answer within 30s of PostgreSQL's return")
		}
		time.Sleep(10 * time.Millisecond)
	}
	recovered := time.Since(back)
	pause(time.Second)
	close(stop)
	wg.Wait()

	resp, err := ts.readAll(t, &v1.ReadRelationshipsRequest{Consistency: fullyConsistent(), RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document"}})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, r := range resp {
		present[r.GetRelationship().GetResource().GetObjectId()] = true
	}
	lost := 0
	for _, id := range acked {
		if !present[id] {
			lost++
		}
	}
	t.Logf("reliability: postgres restarted (%v) and stopped 2s under load: writes [%s]; checks [%s]; %d writes acknowledged, %d lost; checks answered again %v after it came back",
		restarted.Round(time.Millisecond), writes.String(), checks.String(), len(acked), lost, recovered.Round(time.Millisecond))
	if lost > 0 {
		t.Errorf("%d acknowledged writes are missing", lost)
	}
	for _, c := range []*codeCounts{&writes, &checks} {
		for code := range c.n {
			if code != codes.OK && code != codes.Unavailable {
				t.Errorf("clients saw %s during the outage; want only OK and UNAVAILABLE", code)
			}
		}
	}
}

// TestReliabilityOverload offers 16, 256 and 1,024 checks in flight to a server with
// the default admission limits and reports what it served and shed, the admitted p99,
// goroutines and the process's RSS. It is one of `make reliability`'s figures
// (LATCH_RELIABILITY=1), not part of the test suite: 1,024 clients on a 2-core machine
// say little about correctness.
func TestReliabilityOverload(t *testing.T) {
	if os.Getenv("LATCH_RELIABILITY") == "" {
		t.Skip("a `make reliability` figure (LATCH_RELIABILITY=1)")
	}
	ts := start(t, func(c *Config) { c.HTTPAddr, c.DispatchCacheMaxBytes = "", -1 })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	for _, clients := range []int{16, 256, 1024} {
		var served, shed atomic.Int64
		var other codeCounts
		var mu sync.Mutex
		var lat []time.Duration
		maxG := 0
		deadline := time.Now().Add(2 * time.Second)
		// A connection carries at most 100 streams at once by default: clients get a
		// connection per 64 so that all of them are in flight at the server.
		var perms []v1.PermissionsServiceClient
		for range (clients + 63) / 64 {
			conn := dial(t, ts.grpcAddr, testKey)
			defer conn.Close()
			perms = append(perms, v1.NewPermissionsServiceClient(conn))
		}
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					start := time.Now()
					_, err := perms[i/64].CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
						Consistency: fullyConsistent(), Resource: obj("document", "readme"), Permission: "view", Subject: sub("user", "zed", ""),
					})
					switch status.Code(err) {
					case codes.OK:
						served.Add(1)
						mu.Lock()
						lat = append(lat, time.Since(start))
						mu.Unlock()
					case codes.ResourceExhausted:
						shed.Add(1)
					default:
						other.add(err)
					}
				}
			})
		}
		for time.Now().Before(deadline) {
			maxG = max(maxG, runtime.NumGoroutine())
			time.Sleep(50 * time.Millisecond)
		}
		wg.Wait()
		slices.Sort(lat)
		p99 := time.Duration(0)
		if len(lat) > 0 {
			p99 = lat[len(lat)*99/100]
		}
		t.Logf("reliability: overload %d in flight: served %d (p99 %v), shed %d, other errors [%s], goroutines at most %d, RSS %d MiB",
			clients, served.Load(), p99.Round(100*time.Microsecond), shed.Load(), other.String(), maxG, rssMiB())
		if len(other.n) > 0 {
			t.Errorf("overload at %d in flight: errors other than RESOURCE_EXHAUSTED: %s", clients, other.String())
		}
	}
}

// rssMiB is the process's resident set size (0 where /proc is missing).
func rssMiB() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()) >> 20
}
