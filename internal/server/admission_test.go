package server

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOverloadSheds offers several times the load a tiny admission limit serves: the
// admitted calls succeed, the rest are refused fast with RESOURCE_EXHAUSTED and a retry
// hint, goroutines stay bounded, and everything recovers when the load drops.
func TestOverloadSheds(t *testing.T) {
	ts := start(t, func(c *Config) {
		// One slot, one queue place and a 1 ms wait: 48 clients are far more than that
		// serves even on a loaded machine. No answer cache, so every check does its work.
		c.MaxInflightCheap, c.MaxQueuedCheap, c.AdmissionWait = 1, 1, time.Millisecond
		c.DispatchCacheMaxBytes = -1
		c.MetricsAddr = "127.0.0.1:0"
	})
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	base := runtime.NumGoroutine()

	var ok, shed, other atomic.Int64
	var shedLatency, okLatency []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(1500 * time.Millisecond)
	maxGoroutines := 0
	for range 48 { // 48 clients in flight against 1 slot and 1 queue place
		wg.Go(func() {
			for time.Now().Before(deadline) {
				start := time.Now()
				_, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "zed", ""))
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
					mu.Lock()
					okLatency = append(okLatency, time.Since(start))
					mu.Unlock()
				case codes.ResourceExhausted:
					shed.Add(1)
					mu.Lock()
					shedLatency = append(shedLatency, time.Since(start))
					if len(shedLatency) == 1 {
						wantRetryInfo(t, err)
					}
					mu.Unlock()
				default:
					other.Add(1)
					t.Errorf("unexpected error under overload: %v", err)
				}
			}
		})
	}
	for time.Now().Before(deadline) {
		maxGoroutines = max(maxGoroutines, runtime.NumGoroutine())
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if ok.Load() == 0 || shed.Load() == 0 {
		t.Fatalf("served %d, shed %d: the overload did not both serve and shed", ok.Load(), shed.Load())
	}
	slices.Sort(shedLatency)
	slices.Sort(okLatency)
	p99 := shedLatency[len(shedLatency)*99/100]
	t.Logf("served %d (p99 %v), shed %d (p99 %v); goroutines %d before, at most %d during",
		ok.Load(), okLatency[len(okLatency)*99/100], shed.Load(), p99, base, maxGoroutines)
	if p99 > 2*time.Second {
		t.Errorf("shedding took %v at p99; it must be fast", p99)
	}
	// 48 clients each hold at most one call; the server side of each call is a few
	// goroutines. Anything proportional to the request count would be far larger.
	if maxGoroutines > base+48*6 {
		t.Errorf("goroutines grew from %d to %d under overload", base, maxGoroutines)
	}
	if _, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "zed", "")); err != nil {
		t.Errorf("after the overload: %v", err)
	}

	body := scrape(t, ts.srv.MetricsAddr())
	for _, want := range []string{
		`latch_admission_shed_requests_total{class="cheap"}`,
		`latch_grpc_request_duration_seconds_count{code="OK",method="/authzed.api.v1.PermissionsService/CheckPermission"}`,
		`latch_grpc_request_duration_seconds_count{code="ResourceExhausted",method="/authzed.api.v1.PermissionsService/CheckPermission"}`,
		"go_goroutines",
		"latch_datastore_query_duration_seconds_count",
		"latch_check_datastore_queries_bucket",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func wantRetryInfo(t *testing.T, err error) {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay.AsDuration() > 0 {
			return
		}
	}
	t.Errorf("RESOURCE_EXHAUSTED without a RetryInfo: %v", err)
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExpensiveCallsDoNotStarveChecks: with the one expensive slot taken, another
// expensive call is refused while checks are still served.
func TestExpensiveCallsDoNotStarveChecks(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.MaxInflightExpensive, c.MaxQueuedExpensive, c.AdmissionWait = 1, 1, 50*time.Millisecond
	})
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	// An import the client never finishes holds the expensive slot.
	held, err := ts.perms.ImportBulkRelationships(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Send(&v1.ImportBulkRelationshipsRequest{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the import take its slot
	lookup, err := ts.perms.LookupResources(ctxT(t), &v1.LookupResourcesRequest{
		Consistency:        fullyConsistent(),
		ResourceObjectType: "document", Permission: "view", Subject: sub("user", "zed", ""),
	})
	if err == nil {
		_, err = lookup.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("lookup while the expensive slot is held: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "zed", "")); err != nil {
		t.Errorf("check while the expensive class is busy: %v", err)
	}
}
