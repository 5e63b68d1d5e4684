package cli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// otelFlags are `latch serve`'s tracing flags, named as SpiceDB's.
type otelFlags struct {
	provider    string
	endpoint    string
	insecure    bool
	sampleRatio float64
	serviceName string
}

func (o *otelFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.provider, "otel-provider", "none", "OpenTelemetry trace exporter: none, otlpgrpc or otlphttp")
	fs.StringVar(&o.endpoint, "otel-endpoint", "", "OTLP collector address, host:port (default: OTEL_EXPORTER_OTLP_ENDPOINT, else the exporter's localhost default)")
	fs.BoolVar(&o.insecure, "otel-insecure", false, "send traces without TLS")
	fs.Float64Var(&o.sampleRatio, "otel-sample-ratio", 0.01, "share of calls traced when the client did not decide (a propagated sampled trace is always continued)")
	fs.StringVar(&o.serviceName, "otel-service-name", "latch", "service.name of the traces")
}

// tracerProvider returns the provider the flags describe, or nil for --otel-provider
// none. Shut it down on exit to flush the spans still batched.
func (o *otelFlags) tracerProvider(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if o.sampleRatio < 0 || o.sampleRatio > 1 {
		return nil, fmt.Errorf("--otel-sample-ratio %v: expected a number from 0 to 1", o.sampleRatio)
	}
	var client otlptrace.Client
	switch o.provider {
	case "none", "":
		return nil, nil
	case "otlpgrpc":
		var opts []otlptracegrpc.Option
		if o.endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(o.endpoint))
		}
		if o.insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		client = otlptracegrpc.NewClient(opts...)
	case "otlphttp":
		var opts []otlptracehttp.Option
		if o.endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(o.endpoint))
		}
		if o.insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		client = otlptracehttp.NewClient(opts...)
	default:
		return nil, fmt.Errorf("--otel-provider %q: expected none, otlpgrpc or otlphttp", o.provider)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("starting the %s trace exporter: %w", o.provider, err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.sampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(o.serviceName))),
	), nil
}
