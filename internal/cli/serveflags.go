package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latch-authz/latch/internal/server"
)

// serveFlagGroups orders `latch serve --help` as `spicedb serve --help` does: one
// section per concern. Every flag belongs to exactly one group (TestServeHelpGroups).
var serveFlagGroups = []struct {
	title string
	flags []string
}{
	{"API", []string{
		"grpc-addr", "grpc-preshared-key", "http-addr", "http-enabled", "insecure-no-auth", "grpc-shutdown-grace-period",
		"write-relationships-max-updates-per-call", "update-relationships-max-preconditions-per-call",
		"max-relationship-context-size", "max-read-relationships-limit", "max-delete-relationships-limit",
	}},
	{"Datastore", []string{
		"datastore-engine", "datastore-conn-uri", "data-dir", "datastore-conn-pool-read-max-open", "datastore-conn-pool-write-max-open",
		"datastore-read-replica-conn-uri", "datastore-gc-window", "datastore-block-cache-bytes",
		"datastore-revision-quantization-interval", "datastore-revision-quantization-max-staleness-percent",
		"datastore-bootstrap-files", "datastore-bootstrap-overwrite",
	}},
	{"Cluster", []string{
		"dispatch-cluster-enabled", "dispatch-cluster-addr", "dispatch-upstream-addr", "dispatch-cluster-preshared-key",
		"dispatch-concurrency-limit", "dispatch-upstream-timeout", "dispatch-max-depth",
	}},
	{"Cache, index and admission", []string{
		"dispatch-cache-max-bytes", "dispatch-cache-max-cost", "dispatch-cache-enabled", "max-inflight-checks", "max-inflight-lookups",
		"max-queued-checks", "max-queued-lookups", "admission-wait", "stream-stall-timeout", "max-watch-streams", "max-tenants",
		"materialize-enabled", "materialize-max-bytes",
	}},
	{"Observability", []string{
		"log-level", "log-format", "metrics-addr", "metrics-enabled", "metrics-preshared-key", "pprof",
		"otel-provider", "otel-endpoint", "otel-insecure", "otel-sample-ratio", "otel-service-name",
	}},
	{"TLS", []string{
		"grpc-tls-cert-path", "grpc-tls-key-path", "http-tls-cert-path", "http-tls-key-path",
		"dispatch-cluster-tls-cert-path", "dispatch-cluster-tls-key-path", "dispatch-upstream-ca-path", "dispatch-cluster-insecure-plaintext",
	}},
	{"OpenFGA", []string{
		"openfga-enabled", "openfga-max-stores", "openfga-max-tuples-per-write", "openfga-max-checks-per-batch-check",
		"openfga-list-objects-max-results", "openfga-streamed-list-objects-max-results",
	}},
	{"Playground", []string{"playground-enabled", "playground-preshared-key", "playground-max-inflight", "playground-timeout"}},
	{"SpiceDB compatibility", []string{"grpc-enabled", "skip-release-check"}},
}

const serveExamples = `  Try it (embedded durable store in ./latch-data, a key generated and kept there):
    latch serve

  In memory, with a key, and data loaded at start:
    latch serve --datastore-engine memory --grpc-preshared-key "$KEY" \
      --datastore-bootstrap-files schema-and-data.yaml

  PostgreSQL, TLS on both listeners, on every interface:
    latch datastore migrate --datastore-engine postgres --datastore-conn-uri "$PG"
    latch serve --datastore-engine postgres --datastore-conn-uri "$PG" \
      --grpc-preshared-key "$KEY" --grpc-addr :50051 --http-addr :8443 \
      --grpc-tls-cert-path tls.crt --grpc-tls-key-path tls.key \
      --http-tls-cert-path tls.crt --http-tls-key-path tls.key`

// serveUsage renders `latch serve --help`'s flags by group.
func serveUsage(cmd *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n\nExamples:\n%s\n", cmd.UseLine(), serveExamples)
	for _, g := range serveFlagGroups {
		set := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		for _, name := range g.flags {
			if f := cmd.Flags().Lookup(name); f != nil && !f.Hidden {
				set.AddFlag(f)
			}
		}
		if set.HasFlags() {
			fmt.Fprintf(&b, "\n%s flags:\n%s", g.title, set.FlagUsages())
		}
	}
	if f := cmd.Flags().Lookup("help"); f != nil {
		fmt.Fprintf(&b, "\n  -h, --help   %s\n", f.Usage)
	}
	return b.String()
}

// spiceDBOnlyFlags are `spicedb serve` flags latch has no flag for, each with what to
// use instead. They are accepted by the parser (hidden) so that a command line carried
// over from SpiceDB fails with that advice rather than "unknown flag".
var spiceDBOnlyFlags = map[string]struct {
	boolean bool // SpiceDB's flag is a boolean, which may come without a value
	advice  string
}{
	"datastore-conn-pool-read-min-open":           {false, "latch's pools open connections as needed, up to --datastore-conn-pool-read-max-open"},
	"datastore-conn-pool-write-min-open":          {false, "latch's pools open connections as needed, up to --datastore-conn-pool-write-max-open"},
	"datastore-gc-interval":                       {false, "latch collects garbage continuously; --datastore-gc-window says how long revisions stay readable"},
	"dispatch-cluster-cache-max-cost":             {false, "use --dispatch-cache-max-bytes (one cache serves local and dispatched subproblems)"},
	"dispatch-cluster-cache-enabled":              {true, "use --dispatch-cache-enabled (one cache serves local and dispatched subproblems)"},
	"dispatch-hashring-replication-factor":        {false, "latch routes by rendezvous hashing, which needs no virtual nodes"},
	"dispatch-check-permission-concurrency-limit": {false, "use --dispatch-concurrency-limit"},
	"grpc-max-conn-age":                           {false, "latch keeps client connections as long as clients keep them"},
	"grpc-max-workers":                            {false, "use --max-inflight-checks and --max-inflight-lookups"},
	"grpc-network":                                {false, "latch serves gRPC over TCP only"},
	"metrics-tls-cert-path":                       {false, "serve /metrics on loopback, or protect it with --metrics-preshared-key"},
	"ns-cache-enabled":                            {true, "latch caches compiled schemas by their text, always"},
	"datastore-readonly":                          {true, "latch has no read-only mode; use a key per client and read replicas (--datastore-read-replica-conn-uri)"},
	"telemetry-endpoint":                          {false, "latch sends no telemetry"},
	"max-lookup-resources-limit":                  {false, "LookupResources streams every result; the request's optional_limit pages it"},
	"max-bulk-export-relationships-limit":         {false, "ExportBulkRelationships streams every relationship in pages of the request's optional_limit"},
	"enable-memory-protection-middleware":         {true, "admission control (--max-inflight-checks, --max-queued-checks) bounds work in flight"},
	"datastore-max-tx-retries":                    {false, "latch retries serialization failures itself, a bounded number of times"},
	"datastore-watch-buffer-length":               {false, "latch's watch streams share one change feed per store"},
	"streaming-api-response-delay-timeout":        {false, "latch ends a stream that makes no progress on its own"},
}

// addSpiceDBFlags adds the `spicedb serve` flags latch honours under SpiceDB's names,
// and the hidden ones it refuses with advice.
func addSpiceDBFlags(cmd *cobra.Command, cfg *server.Config) {
	fs := cmd.Flags()
	fs.Bool("http-enabled", true, "serve the HTTP/JSON gateway on --http-addr (false turns it off, like --http-addr -)")
	fs.Bool("metrics-enabled", true, "serve /metrics on --metrics-addr (false turns it off, like --metrics-addr -)")
	fs.Bool("dispatch-cache-enabled", true, "cache check and subproblem answers (false: --dispatch-cache-max-bytes -1)")
	fs.Bool("grpc-enabled", true, "accepted for SpiceDB's command lines; latch always serves gRPC (false is refused)")
	fs.Bool("skip-release-check", true, "accepted for SpiceDB's command lines; latch never checks for releases")
	fs.DurationVar(&cfg.ShutdownGrace, "grpc-shutdown-grace-period", server.DefaultShutdownGrace, "how long the server lets requests in flight finish after SIGINT or SIGTERM")
	fs.StringSliceVar(&cfg.BootstrapFiles, "datastore-bootstrap-files", nil, "validation files (schema and relationships) loaded at start into a datastore with no schema; repeat or separate with commas")
	fs.BoolVar(&cfg.BootstrapOverwrite, "datastore-bootstrap-overwrite", false, "load --datastore-bootstrap-files even over a datastore that has a schema, deleting its relationships first")
	fs.IntVar(&cfg.MaxUpdatesPerWrite, "write-relationships-max-updates-per-call", server.DefaultMaxUpdatesPerWrite, "most updates one WriteRelationships may carry")
	fs.IntVar(&cfg.MaxPreconditions, "update-relationships-max-preconditions-per-call", server.DefaultMaxPreconditions, "most preconditions one write may carry")
	fs.IntVar(&cfg.MaxRelationshipContextBytes, "max-relationship-context-size", server.DefaultMaxRelationshipContextBytes, "largest caveat context one relationship may carry, in bytes")
	fs.IntVar(&cfg.ReadRelationshipsLimit, "max-read-relationships-limit", server.DefaultReadRelationshipsLimit, "largest optional_limit a ReadRelationships may ask")
	fs.IntVar(&cfg.MaxDeleteLimit, "max-delete-relationships-limit", server.DefaultMaxDeleteLimit, "largest optional_limit a DeleteRelationships may ask")
	for name, f := range spiceDBOnlyFlags {
		fs.String(name, "", "")
		if f.boolean {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		if err := fs.MarkHidden(name); err != nil {
			panic(err)
		}
	}
}

// applySpiceDBFlags applies the SpiceDB-named flags the user set, and refuses the ones
// latch does not have, naming what to use instead.
func applySpiceDBFlags(cmd *cobra.Command, cfg *server.Config) error {
	fs := cmd.Flags()
	var refused []string
	for name, f := range spiceDBOnlyFlags {
		if fs.Changed(name) {
			refused = append(refused, fmt.Sprintf("--%s is a SpiceDB flag latch does not have: %s", name, f.advice))
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return fmt.Errorf("%s", strings.Join(refused, "; "))
	}
	off := func(name string) bool {
		v, _ := fs.GetBool(name)
		return fs.Changed(name) && !v
	}
	if off("grpc-enabled") {
		return fmt.Errorf("--grpc-enabled=false: latch always serves gRPC (the HTTP gateway forwards to it)")
	}
	if off("http-enabled") {
		cfg.HTTPAddr = "-"
	}
	if off("metrics-enabled") {
		cfg.MetricsAddr = "-"
	}
	if off("dispatch-cache-enabled") {
		cfg.DispatchCacheMaxBytes = -1
	}
	return nil
}
