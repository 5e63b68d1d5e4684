package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/cluster"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/runtime/gcpace"
	"github.com/latch-authz/latch/internal/server"
)

// newServeCommand builds `latch serve`. Flag names follow SpiceDB's `spicedb serve`
// so that commands and deployment files carry over.
func newServeCommand(env Env) *cobra.Command {
	var cfg server.Config
	var logLevel, logFormat string
	var materializeEnabled bool
	var otel otelFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a latch server (gRPC API and HTTP/JSON gateway)",
		Long: `Run a latch server: SpiceDB's authzed.api.v1 gRPC API on --grpc-addr and its
HTTP/JSON gateway on --http-addr, both on loopback by default.

Clients authenticate with a bearer token that must be one of the --grpc-preshared-key
values (or LATCH_GRPC_PRESHARED_KEY, comma-separated). Without a key the server generates
one for this run, prints it, and refuses to listen on anything but loopback.

The datastore is embedded and durable by default: relationships, schema and revisions
live in the directory --data-dir (./latch-data), and a write is acknowledged only once it
is on disk. --datastore-engine memory keeps everything in memory (gone when the server
stops); postgres and cockroachdb use a database server named by --datastore-conn-uri,
migrated first with "latch datastore migrate". The server stops cleanly on SIGINT or
SIGTERM, letting requests in flight finish.

Cluster mode (--dispatch-cluster-enabled) makes several servers over one postgres or
cockroachdb datastore one cluster: each subproblem of a check has an owner among the
members (rendezvous hashing), the owner answers it and its cache remembers it, so the
nodes' caches hold distinct answers. The members are --dispatch-upstream-addr:
static:///h1:p1,h2:p2 (a fixed list, in which each node finds itself by its
--dispatch-cluster-addr) or dns:///name:port (every address of a headless service,
re-resolved every 5s, so nodes join and leave without restarts). Dispatches travel over
an internal gRPC service on --dispatch-cluster-addr, authenticated by
--dispatch-cluster-preshared-key (default: the first --grpc-preshared-key). A peer that
fails is answered for locally, marked down after 3 failures in a row and probed again
later; one that is slower than the peers' p95 is hedged by a local answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("grpc-preshared-key") {
				if v := env.Getenv("LATCH_GRPC_PRESHARED_KEY"); v != "" {
					if err := cmd.Flags().Set("grpc-preshared-key", v); err != nil {
						return err
					}
				}
			}
			if v := env.Getenv("LATCH_METRICS_PRESHARED_KEY"); v != "" && !cmd.Flags().Changed("metrics-preshared-key") {
				cfg.MetricsPresharedKey = v
			}
			if v := env.Getenv("LATCH_DISPATCH_CLUSTER_PRESHARED_KEY"); v != "" && !cmd.Flags().Changed("dispatch-cluster-preshared-key") {
				cfg.Cluster.PresharedKey = v
			}
			if err := resolveDataDir(cmd, &cfg); err != nil {
				return err
			}
			logger, err := newLogger(env.Err, logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			if cfg.MaxStalenessPercent == 0 {
				cfg.MaxStalenessPercent = -1 // the flag's 0 means no smearing; Config's 0 means the default
			}
			cfg.MaterializeDisabled = !materializeEnabled
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tp, err := otel.tracerProvider(ctx)
			if err != nil {
				return err
			}
			if tp != nil {
				cfg.TracerProvider = tp
				defer func() {
					// Flush the spans still batched, but do not hang on an unreachable collector.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := tp.Shutdown(ctx); err != nil {
						logger.Warn("flushing traces", slog.Any("error", err))
					}
				}()
			}
			return serve(ctx, cfg, env)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", server.DefaultGRPCAddr, "gRPC listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", server.DefaultHTTPAddr, `HTTP/JSON gateway listen address ("" or "-" turns the gateway off)`)
	fs.StringSliceVar(&cfg.PresharedKeys, "grpc-preshared-key", nil, "bearer token clients must present; repeat the flag or separate keys with commas (env LATCH_GRPC_PRESHARED_KEY)")
	fs.BoolVar(&cfg.NoAuth, "insecure-no-auth", false, "serve every API without authentication, as Permify does by default; refused unless every listener is on loopback")
	addDatastoreFlags(cmd, &cfg)
	fs.StringVar(&logLevel, "log-level", "info", "debug (one line per call, with its request id), info, warn or error")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	cacheSize := newByteSize(&cfg.DispatchCacheMaxBytes, 0) // 0: the engine's default
	cacheSize.text = fmt.Sprintf("%dMiB, %dMiB with the memory engine", server.DefaultDispatchCacheMaxBytes>>20, server.DefaultMemoryDispatchCacheMaxBytes>>20)
	fs.Var(cacheSize, "dispatch-cache-max-bytes",
		"memory of the cache of check and subproblem answers, allocated whole at start: bytes, a size (64MiB, 1GB) or a share of memory (5%); negative: no cache")
	fs.StringVar(&cfg.GRPCTLSCertPath, "grpc-tls-cert-path", "", "PEM certificate to serve the gRPC API over TLS with (reloaded when the file changes)")
	fs.StringVar(&cfg.GRPCTLSKeyPath, "grpc-tls-key-path", "", "PEM private key of --grpc-tls-cert-path")
	fs.StringVar(&cfg.HTTPTLSCertPath, "http-tls-cert-path", "", "PEM certificate to serve the HTTP gateway over TLS with (reloaded when the file changes)")
	fs.StringVar(&cfg.HTTPTLSKeyPath, "http-tls-key-path", "", "PEM private key of --http-tls-cert-path")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", server.DefaultMetricsAddr, `Prometheus /metrics listen address ("" or "-" turns it off)`)
	fs.StringVar(&cfg.MetricsPresharedKey, "metrics-preshared-key", "", "bearer token /metrics and /debug/pprof require (env LATCH_METRICS_PRESHARED_KEY); needed for a metrics address beyond loopback")
	fs.BoolVar(&cfg.PProf, "pprof", false, "serve Go's profiles under /debug/pprof on the metrics address (never the command line)")
	fs.IntVar(&cfg.MaxInflightCheap, "max-inflight-checks", 0, "checks, writes and schema calls executing at once before new ones queue (0: 4×GOMAXPROCS)")
	fs.IntVar(&cfg.MaxInflightExpensive, "max-inflight-lookups", 0, "lookups, reads, imports and exports executing at once before new ones queue (0: GOMAXPROCS)")
	fs.IntVar(&cfg.MaxQueuedCheap, "max-queued-checks", 0, "cheap calls that may wait for a slot; more are refused with RESOURCE_EXHAUSTED (0: 8× the in-flight cap)")
	fs.IntVar(&cfg.MaxQueuedExpensive, "max-queued-lookups", 0, "expensive calls that may wait for a slot (0: 8× the in-flight cap)")
	fs.DurationVar(&cfg.AdmissionWait, "admission-wait", server.DefaultAdmissionWait, "longest a queued call waits for a slot before it is refused")
	fs.DurationVar(&cfg.QuantizationWindow, "datastore-revision-quantization-interval", server.DefaultQuantizationWindow,
		"minimize_latency reads use a revision rounded down to this window, so they share cached work (negative: always the newest revision)")
	fs.IntVar(&cfg.MaxStalenessPercent, "datastore-revision-quantization-max-staleness-percent", server.DefaultMaxStalenessPercent,
		"largest random share of the window by which a read may lag, so that requests do not all move to a new revision at once (0: none)")
	fs.IntVar(&cfg.MaxDepth, "dispatch-max-depth", engine.DefaultMaxDepth, "maximum depth of relations and arrows one check may follow")
	fs.BoolVar(&materializeEnabled, "materialize-enabled", true,
		"keep an in-memory index of nested sets (the schema's recursive subject-set relations, such as groups in groups) that answers checks through them without walking the chain")
	indexSize := newByteSize(&cfg.MaterializeMaxBytes, 0)
	indexSize.text = fmt.Sprintf("%dMiB", server.DefaultMaterializeMaxBytes>>20)
	fs.Var(indexSize, "materialize-max-bytes",
		"memory bound of the index of nested sets: bytes, a size (512MiB) or a share of memory (5%); past it, members and ancestors are dropped and those checks are evaluated")
	fs.BoolVar(&cfg.Cluster.Enabled, "dispatch-cluster-enabled", false, "run as one node of a cluster over a shared postgres or cockroachdb datastore, routing subproblems to the nodes that own them")
	fs.StringVar(&cfg.Cluster.Addr, "dispatch-cluster-addr", ":50053", "where this node's internal dispatch service listens; also how it finds itself among the members")
	fs.StringVar(&cfg.Cluster.Upstream, "dispatch-upstream-addr", "", "the cluster's members: static:///host:port,host:port,... or dns:///name:port (every A/AAAA record, re-resolved)")
	fs.StringVar(&cfg.Cluster.PresharedKey, "dispatch-cluster-preshared-key", "", "bearer token nodes present to each other's dispatch service (env LATCH_DISPATCH_CLUSTER_PRESHARED_KEY; default: the first --grpc-preshared-key)")
	fs.IntVar(&cfg.Cluster.ConcurrencyLimit, "dispatch-concurrency-limit", cluster.DefaultConcurrencyLimit, "dispatches in flight to one peer; past it, subproblems are answered locally")
	fs.DurationVar(&cfg.Cluster.Timeout, "dispatch-upstream-timeout", cluster.DefaultTimeout, "longest one dispatch to a peer may take; past it the subproblem is answered locally")
	fs.StringVar(&cfg.Cluster.TLSCertPath, "dispatch-cluster-tls-cert-path", "", "PEM certificate to serve the dispatch service over TLS with (reloaded when the file changes); peers are then dialed over TLS too")
	fs.StringVar(&cfg.Cluster.TLSKeyPath, "dispatch-cluster-tls-key-path", "", "PEM private key of --dispatch-cluster-tls-cert-path")
	fs.StringVar(&cfg.Cluster.UpstreamCAPath, "dispatch-upstream-ca-path", "", "PEM certificate authorities peers' dispatch certificates are verified with (dials peers over TLS; default: the system's)")
	fs.DurationVar(&cfg.Cluster.TestDelay, "dispatch-cluster-test-delay", 0, "test hook: hold every dispatch this node answers this long, making it a slow peer")
	if err := fs.MarkHidden("dispatch-cluster-test-delay"); err != nil {
		panic(err)
	}
	otel.register(fs)
	return cmd
}

// serve runs a server until ctx is done, after telling the user where it listens.
func serve(ctx context.Context, cfg server.Config, env Env) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	grpcAddr, httpAddr := srv.Addrs()
	tlsNote := ""
	if cfg.GRPCTLSCertPath != "" {
		tlsNote = " (TLS)"
	}
	fmt.Fprintf(env.Out, "latch: gRPC API listening on %s%s\n", grpcAddr, tlsNote)
	if httpAddr != "" {
		scheme := "http"
		if cfg.HTTPTLSCertPath != "" {
			scheme = "https"
		}
		fmt.Fprintf(env.Out, "latch: HTTP/JSON gateway listening on %s://%s\n", scheme, httpAddr)
	}
	if m := srv.MetricsAddr(); m != "" {
		fmt.Fprintf(env.Out, "latch: metrics on http://%s/metrics\n", m)
		if cfg.PProf {
			fmt.Fprintf(env.Out, "latch: profiles on http://%s/debug/pprof/\n", m)
		}
	}
	fmt.Fprintf(env.Out, "latch: datastore %s\n", describeDatastore(cfg))
	if a := srv.ClusterAddr(); a != "" {
		fmt.Fprintf(env.Out, "latch: cluster dispatch service on %s, members from %s\n", a, cfg.Cluster.Upstream)
	}
	if cfg.NoAuth {
		fmt.Fprintln(env.Out, "latch: serving WITHOUT authentication (--insecure-no-auth), on loopback only")
	}
	if key := srv.GeneratedKey(); key != "" {
		fmt.Fprintf(env.Out, "latch: no --grpc-preshared-key given; generated this key for this run:\n\n")
		fmt.Fprintf(env.Out, "    export LATCH_TOKEN=%s LATCH_ENDPOINT=%s\n\n", key, grpcAddr)
	}
	go gcpace.Run(ctx, srv.FixedHeapBytes)
	if err := srv.Serve(ctx); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	fmt.Fprintln(env.Out, "latch: stopped")
	return nil
}

// newLogger builds the server's structured logger on w.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: expected text or json", format)
}
