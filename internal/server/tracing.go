package server

import (
	"context"
	"iter"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/latch-authz/latch/internal/store"
)

// tracerName names the spans latch itself starts (datastore queries); calls are traced
// by otelgrpc's instrumentation.
const tracerName = "github.com/latch-authz/latch"

// tracer returns the tracer of cfg's TracerProvider, or one that records nothing.
func (c Config) tracer() trace.Tracer {
	if c.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return c.TracerProvider.Tracer(tracerName)
}

// tracingOptions traces every call, continuing the trace a client propagates in W3C
// traceparent metadata; none when no TracerProvider is configured.
func (c Config) tracingOptions() []grpc.ServerOption {
	if c.TracerProvider == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(c.TracerProvider),
		otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
	))}
}

// traceQuery runs r.Query in a span, for a call that is traced (sampled).
func traceQuery(ctx context.Context, t trace.Tracer, r store.Reader, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return func(yield func(store.Item, error) bool) {
		ctx, span := t.Start(ctx, "datastore.query", trace.WithAttributes(
			attribute.String("latch.resource_type", f.ResourceType),
			attribute.Int("latch.resource_ids", len(f.ResourceIDs)),
			attribute.String("latch.relation", f.Relation),
		))
		defer span.End()
		n := 0
		for item, err := range r.Query(ctx, f, opts) {
			if err != nil {
				span.RecordError(err)
			} else {
				n++
			}
			if !yield(item, err) {
				break
			}
		}
		span.SetAttributes(attribute.Int("latch.results", n))
	}
}
