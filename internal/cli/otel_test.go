package cli

import (
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// collector is an OTLP/gRPC trace collector that remembers the names of the spans it
// receives and the service they came from.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string // "service/span name"
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, service+"/"+sp.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (c *collector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...)
}

// TestServeExportsTraces runs `latch serve --otel-provider otlpgrpc` against a
// collector on loopback: the calls it serves arrive there as spans, flushed on stop.
func TestServeExportsTraces(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	g := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(g, col)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{
			"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "-", "--datastore-engine", "memory", "--metrics-addr", "-",
			"--grpc-preshared-key", "k", "--otel-provider", "otlpgrpc", "--otel-endpoint", lis.Addr().String(), "--otel-insecure",
			"--otel-sample-ratio", "1", "--otel-service-name", "latch-test",
		},
			Env{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	}()
	grpcAddr := waitFor(t, &out, regexp.MustCompile(`gRPC API listening on (\S+)`))[1]
	runSteps(t, map[string]string{"LATCH_ENDPOINT": grpcAddr, "LATCH_TOKEN": "k"}, []step{
		{args: []string{"schema", "write", "-"}, stdin: testSchema, outRE: token},
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d; stderr %q", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
	want := "latch-test/authzed.api.v1.SchemaService/WriteSchema"
	got := col.received()
	for _, s := range got {
		if s == want {
			return
		}
	}
	t.Errorf("the collector received %v; want a span %q", got, want)
}
