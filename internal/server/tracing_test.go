package server

import (
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"
)

// TestCallsAreTraced: with a TracerProvider every call is a span carrying its request
// id, and its datastore queries are spans within it.
func TestCallsAreTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(ctxT(t)) })
	ts := start(t, func(c *Config) { c.TracerProvider = tp })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "viewer", "user", "amy", ""))
	exp.Reset()

	ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-request-id", "req-7")
	resp, err := ts.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(),
		Resource:    obj("document", "readme"), Permission: "view", Subject: sub("user", "amy", ""),
	})
	if err != nil || resp.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("check: %v, %v", resp, err)
	}
	// The call's span ends just after the client has its response.
	var spans tracetest.SpanStubs
	var call *tracetest.SpanStub
	for deadline := time.Now().Add(10 * time.Second); call == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no span for the check among %d spans: %v", len(spans), spans.Snapshots())
		}
		spans = exp.GetSpans()
		for i, s := range spans {
			if s.Name == "authzed.api.v1.PermissionsService/CheckPermission" {
				call = &spans[i]
			}
		}
	}
	if !hasAttr(call.Attributes, attribute.String("latch.request_id", "req-7")) {
		t.Errorf("the check's span lacks its request id: %v", call.Attributes)
	}
	queries := 0
	for _, s := range spans {
		if s.Name == "datastore.query" && s.Parent.SpanID() == call.SpanContext.SpanID() {
			queries++
		}
	}
	if queries == 0 {
		t.Errorf("no datastore query spans under the check's span: %v", spans.Snapshots())
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}
