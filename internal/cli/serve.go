package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/buildinfo"
	"github.com/latch-authz/latch/internal/cluster"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/logging"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/runtime/gcpace"
	"github.com/latch-authz/latch/internal/server"
	"github.com/latch-authz/latch/internal/server/openfga"
)

// newServeCommand builds `latch serve`. Flag names follow SpiceDB's `spicedb serve`
// so that commands and deployment files carry over.
func newServeCommand(env Env) *cobra.Command {
	var cfg server.Config
	var logLevel, logFormat string
	var playgroundEnabled bool
	openFGAEnabled := true
	authzenEnabled := true
	var materializeEnabled bool
	var materializeTargets []string
	var materializeFile string
	var otel otelFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a latch server (gRPC API and HTTP/JSON gateway)",
		Long: `Run a latch server: SpiceDB's authzed.api.v1 gRPC API on --grpc-addr and its
HTTP/JSON gateway on --http-addr, both on loopback by default.

Clients authenticate with a bearer token that must be one of the --grpc-preshared-key
values (or LATCH_GRPC_PRESHARED_KEY, comma-separated). Without a key the server generates
one, prints it, and refuses to listen on anything but loopback; on the embedded store the
key is kept in the data directory (generated-preshared-key) and used again on restart.

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
			cfg.OpenFGA.Disabled = !openFGAEnabled
			cfg.AuthZENDisabled = !authzenEnabled
			if cmd.Flags().Changed("playground-enabled") {
				cfg.PlaygroundEnabled = &playgroundEnabled
			}
			if err := resolveDataDir(cmd, &cfg); err != nil {
				return err
			}
			if err := applySpiceDBFlags(cmd, &cfg); err != nil {
				return err
			}
			handler, err := newLogHandler(env.Err, logLevel, logFormat)
			if err != nil {
				return err
			}
			limited := logging.Limited(handler, logging.DefaultEvery)
			defer limited.Flush()
			logger := slog.New(limited)
			cfg.Logger = logger
			logging.SetGRPC(logger)
			say := newBanner(env.Out, logFormat)
			if cfg.MaxStalenessPercent == 0 {
				cfg.MaxStalenessPercent = -1 // the flag's 0 means no smearing; Config's 0 means the default
			}
			cfg.MaterializeDisabled = !materializeEnabled
			if cfg.Materialize, err = readMaterializeTargets(materializeTargets, materializeFile); err != nil {
				return err
			}
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
			return serve(ctx, cfg, say)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", server.DefaultGRPCAddr, "gRPC listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", server.DefaultHTTPAddr, `HTTP/JSON gateway listen address ("" or "-" turns the gateway off)`)
	fs.StringSliceVar(&cfg.PresharedKeys, "grpc-preshared-key", nil, "bearer token clients must present; repeat the flag or separate keys with commas (env LATCH_GRPC_PRESHARED_KEY)")
	fs.BoolVar(&cfg.NoAuth, "insecure-no-auth", false, "serve every API without authentication, as Permify does by default; refused unless every listener is on loopback")
	addDatastoreFlags(cmd, &cfg)
	fs.StringVar(&logLevel, "log-level", "info", "debug (one line per call, with its request id), info, warn or error")
	fs.StringVar(&logFormat, "log-format", "text", "text or json (json: every line is a JSON record, the startup lines on stdout included); a warning or error repeated within 10s is written once, then counted")
	cacheSize := newByteSize(&cfg.DispatchCacheMaxBytes, 0) // 0: the engine's default
	cacheSize.text = fmt.Sprintf("%dMiB, %dMiB with the memory engine", server.DefaultDispatchCacheMaxBytes>>20, server.DefaultMemoryDispatchCacheMaxBytes>>20)
	fs.Var(cacheSize, "dispatch-cache-max-bytes",
		"memory of the cache of check and subproblem answers, allocated whole at start: bytes, a size (64MiB, 1GB) or a share of memory (5%); negative: no cache")
	fs.Var(cacheSize, "dispatch-cache-max-cost", "SpiceDB's name for --dispatch-cache-max-bytes")
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
	fs.DurationVar(&cfg.StreamStallTimeout, "stream-stall-timeout", server.DefaultStreamStallTimeout, "longest a streaming call waits on a client that does not read before it is ended and its slot freed")
	fs.IntVar(&cfg.MaxWatchStreams, "max-watch-streams", server.DefaultMaxWatchStreams, "Watch streams open at once; more are refused with RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.MaxTenants, "max-tenants", server.DefaultMaxTenants, "Permify tenants besides t1; more are refused")
	fs.BoolVar(&openFGAEnabled, "openfga-enabled", true, "serve OpenFGA's API (openfga.v1.OpenFGAService on the gRPC listener, /stores/... on the HTTP listener)")
	fs.IntVar(&cfg.OpenFGA.MaxStores, "openfga-max-stores", 0, "OpenFGA stores; more are refused (0: no limit)")
	fs.IntVar(&cfg.OpenFGA.MaxTuplesPerWrite, "openfga-max-tuples-per-write", openfga.DefaultMaxTuplesPerWrite, "writes plus deletes in one OpenFGA Write")
	fs.IntVar(&cfg.OpenFGA.MaxChecksPerBatch, "openfga-max-checks-per-batch-check", openfga.DefaultMaxChecksPerBatch, "checks in one OpenFGA BatchCheck")
	fs.IntVar(&cfg.OpenFGA.ListObjectsMaxResults, "openfga-list-objects-max-results", openfga.DefaultListObjectsMaxResults, "objects one ListObjects returns, as OpenFGA truncates it (negative: no limit)")
	fs.IntVar(&cfg.OpenFGA.StreamedListObjectsMaxResults, "openfga-streamed-list-objects-max-results", 0, "objects one StreamedListObjects streams (0: every one)")
	fs.BoolVar(&authzenEnabled, "authzen-enabled", true, "serve the AuthZEN Authorization API on the HTTP listener (/access/v1/..., /stores/{store_id}/access/v1/... and /.well-known/authzen-configuration)")
	fs.BoolVar(&playgroundEnabled, "playground-enabled", false, "serve the web playground at /playground on the HTTP listener (default: on when --http-addr is loopback, off otherwise)")
	fs.StringVar(&cfg.PlaygroundPresharedKey, "playground-preshared-key", "", "bearer token the playground's API requires (default: none; the playground never reads the server's data)")
	fs.IntVar(&cfg.PlaygroundMaxInflight, "playground-max-inflight", server.DefaultPlaygroundMaxInflight, "playground evaluations running at once; they run only while no API call waits for a slot")
	fs.DurationVar(&cfg.PlaygroundTimeout, "playground-timeout", server.DefaultPlaygroundTimeout, "longest one playground evaluation runs before it answers 503")
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
		"memory bound of the index of nested sets (the server's and its Permify tenants' together): bytes, a size (512MiB) or a share of memory (5%); past it, members and ancestors are dropped and those checks are evaluated")
	fs.StringSliceVar(&materializeTargets, "materialize", nil,
		"permissions the Materialize API (authzed.api.materialize.v0) streams as permission sets, resource#permission@subject_type (repeat the flag or separate with commas), beside the recursive relations it always streams")
	fs.StringVar(&materializeFile, "materialize-file", "",
		"file of --materialize entries, one per line (or comma-separated; blank lines and lines starting with # or // are ignored)")
	fs.BoolVar(&cfg.Cluster.Enabled, "dispatch-cluster-enabled", false, "run as one node of a cluster over a shared postgres or cockroachdb datastore, routing subproblems to the nodes that own them")
	fs.StringVar(&cfg.Cluster.Addr, "dispatch-cluster-addr", server.DefaultClusterAddr, "where this node's internal dispatch service listens; also how it finds itself among the members (beyond loopback it needs --dispatch-cluster-tls-cert-path or --dispatch-cluster-insecure-plaintext)")
	fs.BoolVar(&cfg.Cluster.InsecurePlaintext, "dispatch-cluster-insecure-plaintext", false, "allow a --dispatch-cluster-addr beyond loopback without TLS, on a network only the nodes can reach (the cluster key then crosses it in clear)")
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
	addSpiceDBFlags(cmd, &cfg)
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		_, err := fmt.Fprint(c.OutOrStderr(), serveUsage(c))
		return err
	})
	return cmd
}

// serve runs a server until ctx is done, after telling the user where it listens.
func serve(ctx context.Context, cfg server.Config, say banner) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	grpcAddr, httpAddr := srv.Addrs()
	say.line("version "+buildinfo.Read().Short(), "version", buildinfo.Read().Version, "commit", buildinfo.Read().Commit)
	tlsNote := ""
	if cfg.GRPCTLSCertPath != "" {
		tlsNote = " (TLS)"
	}
	say.line(fmt.Sprintf("gRPC API listening on %s%s", grpcAddr, tlsNote), "listener", "grpc", "addr", grpcAddr, "tls", tlsNote != "")
	if httpAddr != "" {
		scheme := "http"
		if cfg.HTTPTLSCertPath != "" {
			scheme = "https"
		}
		say.line(fmt.Sprintf("HTTP/JSON gateway listening on %s://%s", scheme, httpAddr), "listener", "http", "addr", httpAddr, "tls", scheme == "https")
	}
	if m := srv.MetricsAddr(); m != "" {
		say.line(fmt.Sprintf("metrics on http://%s/metrics", m), "listener", "metrics", "addr", m)
		if cfg.PProf {
			say.line(fmt.Sprintf("profiles on http://%s/debug/pprof/", m), "listener", "pprof", "addr", m)
		}
	}
	say.line("datastore "+describeDatastore(cfg), "datastore", describeDatastore(cfg))
	if a := srv.ClusterAddr(); a != "" {
		say.line(fmt.Sprintf("cluster dispatch service on %s, members from %s", a, cfg.Cluster.Upstream),
			"listener", "dispatch", "addr", a, "upstream", cfg.Cluster.Upstream, "tls", cfg.Cluster.TLSCertPath != "")
	}
	if cfg.NoAuth {
		say.line("serving WITHOUT authentication (--insecure-no-auth), on loopback only", "auth", false)
	}
	if key := srv.GeneratedKey(); key != "" {
		say.generatedKey(key, grpcAddr, srv.GeneratedKeyPath())
	}
	go gcpace.Run(ctx, srv.FixedHeapBytes)
	if err := srv.Serve(ctx); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	say.line("stopped")
	return nil
}

// banner tells the user on stdout where the server listens: "latch: ..." lines, or with
// --log-format json one JSON record per line, like every other line the server writes.
type banner struct {
	out  io.Writer
	json *slog.Logger // nil: text
}

func newBanner(out io.Writer, format string) banner {
	if format == "json" {
		return banner{out: out, json: slog.New(slog.NewJSONHandler(out, nil))}
	}
	return banner{out: out}
}

// line says msg; attrs are its fields in JSON.
func (b banner) line(msg string, attrs ...any) {
	if b.json != nil {
		b.json.Info(msg, attrs...)
		return
	}
	fmt.Fprintf(b.out, "latch: %s\n", msg)
}

// generatedKey tells the key the server generated, and the file that keeps it ("" when
// nothing does: it lasts for this run).
func (b banner) generatedKey(key, endpoint, path string) {
	msg := "no --grpc-preshared-key given; generated this key for this run"
	if path != "" {
		msg = "no --grpc-preshared-key given; using the generated key kept in " + path + " (the same after a restart over this data)"
	}
	if b.json != nil {
		b.json.Info(msg, "key", key, "endpoint", endpoint, "key_file", path)
		return
	}
	fmt.Fprintf(b.out, "latch: %s:\n\n", msg)
	fmt.Fprintf(b.out, "    export LATCH_TOKEN=%s LATCH_ENDPOINT=%s\n\n", key, endpoint)
}

// newLogHandler builds the handler of the server's structured logger on w.
func newLogHandler(w io.Writer, level, format string) (slog.Handler, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format %q: expected text or json", format)
}

// readMaterializeTargets parses the --materialize entries and those of the file.
func readMaterializeTargets(entries []string, file string) ([]materialize.Target, error) {
	text := strings.Join(entries, "\n")
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--materialize-file: %w", err)
		}
		text += "\n" + string(b)
	}
	targets, err := materialize.ParseTargets(text)
	if err != nil {
		return nil, fmt.Errorf("--materialize: %w", err)
	}
	return targets, nil
}
