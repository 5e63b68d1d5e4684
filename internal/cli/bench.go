package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/bench"
	"github.com/latch-authz/latch/internal/bench/dataset"
)

func newBenchCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Generate data sets and load-test latch or any SpiceDB-API server",
		Long: `Generate the reference data sets and drive YAML workloads against latch or any server
that speaks the SpiceDB API, then read the results as JSON, an HTML report or a comparison.

  latch bench gen social --users 100000 --endpoint HOST:PORT --token T
  latch bench run workloads/social.yaml --endpoint HOST:PORT --token T -o social.json --html social.html
  latch bench compare before.json after.json

--endpoint takes several addresses, separated by commas, to drive the nodes of a
cluster: run sends each worker's calls to them in turn, gen loads the first.

or, all in one process against latch's memory store:

  latch bench run workloads/social.yaml --in-process --users 10000 --html social.html`,
	}
	cmd.AddCommand(newBenchGenCommand(env), newBenchRunCommand(env), newBenchCompareCommand(env), newBenchReportCommand(env),
		newBenchEmptyServerCommand(env))
	return cmd
}

// newBenchEmptyServerCommand is the process `bench run --target empty` starts: the
// empty server, until its standard input ends.
func newBenchEmptyServerCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "empty-server",
		Short:  "Serve a constant-answer gRPC server on 127.0.0.1 until standard input ends (for bench run --target empty)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeEmpty(cmd.Context(), env.In, env.Out)
		},
	}
}

// BenchGenConfig is a `latch bench gen` invocation.
type BenchGenConfig struct {
	Client  ClientConfig
	Dataset string
	Users   int
	// Groups, Folders and Documents size the deepgroups data set; 0 takes them in its
	// reference proportions to Users.
	Groups, Folders, Documents int
	Seed                       uint64
	// Output is a file for the relationships, one per line; "" sends them to the server.
	Output string
	Load   bench.LoadOptions
}

// Validate reports what is wrong with c.
func (c BenchGenConfig) Validate() error {
	if !slices.Contains(dataset.Names, c.Dataset) {
		return fmt.Errorf("unknown data set %q (want %s)", c.Dataset, strings.Join(dataset.Names, " or "))
	}
	if c.Users <= 0 {
		return fmt.Errorf("--users must be > 0, got %d", c.Users)
	}
	if c.Groups < 0 || c.Folders < 0 || c.Documents < 0 {
		return fmt.Errorf("--groups, --folders and --documents must be >= 0, got %d, %d and %d", c.Groups, c.Folders, c.Documents)
	}
	if c.Dataset != "deepgroups" && c.Groups+c.Folders+c.Documents > 0 {
		return fmt.Errorf("--groups, --folders and --documents size the deepgroups data set, not %s", c.Dataset)
	}
	if !slices.Contains([]string{bench.LoadAuto, bench.LoadBulk, bench.LoadWrite}, c.Load.Method) {
		return fmt.Errorf("--method %q: want auto, bulk or write", c.Load.Method)
	}
	return nil
}

func newBenchGenCommand(env Env) *cobra.Command {
	var flags clientFlags
	cfg := BenchGenConfig{Load: bench.LoadOptions{Method: bench.LoadAuto}}
	cmd := &cobra.Command{
		Use:   "gen DATASET",
		Short: "Generate a reference data set (social, permify, deepgroups) into a server or a file",
		Long: `Generate a reference data set, deterministically for a seed and streamed (memory does
not grow with the data set), and write its schema and relationships into a server, by
ImportBulkRelationships when the server serves it and WriteRelationships batches of
TOUCH otherwise, or with -o into a file of one relationship per line.

  social   the social network: Pareto-shaped activity (20% of users make 80% of the
           follows, content and interactions), a few users with very many followers,
           about 1% of follows are blocks, 25% of content public; about 15 relationships
           per user
  permify  Permify's load-test data set, through the SpiceDB API
  deepgroups
           an organisation of nested groups: a DAG 12 levels deep with Pareto-sized
           groups, users mostly in the deepest, folders in trees, documents shared
           with high-level groups (default 100,000 groups, 200,000 users, 50,000
           folders, 500,000 documents: about 2.06M relationships; --groups, --folders
           and --documents override the sizes --users implies)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Dataset = args[0]
			if cfg.Dataset == "deepgroups" && !cmd.Flags().Changed("users") {
				cfg.Users = 200_000
			}
			if cfg.Output == "" {
				var err error
				if cfg.Client, err = flags.resolve(cmd, env); err != nil {
					return err
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return benchGen(cmd.Context(), cfg, env)
		},
	}
	addClientFlags(cmd, &flags)
	benchEndpointUsage(cmd)
	fs := cmd.Flags()
	fs.IntVar(&cfg.Users, "users", 100_000, "users in the data set (social: about 15 relationships each; deepgroups: default 200,000)")
	fs.IntVar(&cfg.Groups, "groups", 0, "deepgroups: groups (default: users/2)")
	fs.IntVar(&cfg.Folders, "folders", 0, "deepgroups: folders (default: users/4)")
	fs.IntVar(&cfg.Documents, "documents", 0, "deepgroups: documents (default: users*5/2)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed: the same seed gives the same data")
	fs.StringVarP(&cfg.Output, "output", "o", "", "write relationships to this file (one per line) instead of a server")
	fs.StringVar(&cfg.Load.Method, "method", bench.LoadAuto, "how to load a server: auto, bulk (ImportBulkRelationships) or write (WriteRelationships)")
	fs.IntVar(&cfg.Load.Batch, "batch", 1000, "relationships per message or per write")
	return cmd
}

func benchGen(ctx context.Context, cfg BenchGenConfig, env Env) error {
	ds, err := dataset.ByName(cfg.Dataset, cfg.Users, cfg.Seed)
	if err != nil {
		return err
	}
	if dg, ok := ds.(dataset.DeepGroups); ok {
		ds = dg.Resized(cfg.Groups, cfg.Folders, cfg.Documents)
	}
	cfg.Load.Progress = env.Err
	if cfg.Output != "" {
		f, err := os.Create(cfg.Output)
		if err != nil {
			return err
		}
		_, err = bench.WriteFile(f, ds, env.Err)
		return errors.Join(err, f.Close())
	}
	eps, err := endpointsOf(cfg.Client)
	if err != nil {
		return err
	}
	// The nodes of a cluster share one datastore: loading it through one node is enough.
	conns, err := bench.Dial(eps[0], 1)
	if err != nil {
		return err
	}
	defer bench.CloseAll(conns)
	_, err = bench.Load(ctx, conns[0], ds, cfg.Load)
	if err != nil {
		return rpcFailed("loading the data set", eps[0].Addr, err)
	}
	return nil
}

// endpointsOf reads c.Endpoint as bench commands take it, a comma-separated list of
// addresses, each reached with c's token and TLS settings.
func endpointsOf(c ClientConfig) ([]bench.Endpoint, error) {
	var eps []bench.Endpoint
	for a := range strings.SplitSeq(c.Endpoint, ",") {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			return nil, fmt.Errorf("--endpoint %q has an empty address: separate addresses with single commas", c.Endpoint)
		case slices.ContainsFunc(eps, func(e bench.Endpoint) bool { return e.Addr == a }):
			return nil, fmt.Errorf("--endpoint lists %s twice: each node takes an equal share, so list each once", a)
		}
		eps = append(eps, bench.Endpoint{Addr: a, Token: c.Token, TLS: c.TLS, CACert: c.CACert})
	}
	return eps, nil
}

// BenchRunConfig is a `latch bench run` invocation.
type BenchRunConfig struct {
	Client   ClientConfig
	Workload string
	// Target is "server" (the --endpoint addresses), "in-process" (a latch in this process, loaded
	// with the workload's data set) or "empty" (a gRPC server in a process of its own that
	// answers every check with a constant: the ceiling).
	Target string
	Users  int // 0: the workload's
	Seed   uint64
	// Conns is the number of gRPC connections, rounded up to an equal number per endpoint.
	Conns      int
	Output     string
	HTML       string
	MetricsURL string
	// PermifyURL, when set, sends the checks to Permify's HTTP API at this base URL
	// (tenant Tenant) instead of the SpiceDB gRPC API.
	PermifyURL, Tenant string
	// NoLoad skips loading the data set into an in-process latch.
	NoLoad bool
	Quiet  bool
}

func newBenchRunCommand(env Env) *cobra.Command {
	var flags clientFlags
	var cfg BenchRunConfig
	var inProcess bool
	cmd := &cobra.Command{
		Use:   "run WORKLOAD.yaml",
		Short: "Run a workload file against a server and report rates and latencies",
		Long: `Run a workload file (see workloads/ in the latch repository) against the server at
--endpoint, or with --in-process against a latch started inside this process with the
memory datastore and loaded with the workload's data set first, or with --target empty
against a gRPC server that answers every check with a constant (the ceiling of this
machine and generator), which runs in a process of its own as a server does and whose
CPU the report shows unless --metrics-url names another server's.

--endpoint HOST1:PORT,HOST2:PORT,... drives the nodes of a cluster, all with the same
token and TLS settings: each node gets the same number of connections, and each worker
sends its calls to them in turn, so every node receives an equal share.

Prints per-step rates, errors by gRPC code and latency percentiles for each measured
phase; -o writes the JSON result (for latch bench compare), --html a self-contained report.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Workload = args[0]
			if inProcess {
				if cmd.Flags().Changed("target") && cfg.Target != "in-process" {
					return errors.New("--in-process and --target contradict each other: choose one")
				}
				cfg.Target = "in-process"
			}
			switch {
			case cfg.PermifyURL != "" && cfg.Target != "server":
				return errors.New("--permify-url sends the checks to that server: it cannot be combined with --in-process or --target")
			case cfg.PermifyURL != "":
				cfg.Client.Token, _ = cmd.Flags().GetString("token")
				if cfg.Client.Token == "" {
					cfg.Client.Token = env.Getenv("LATCH_TOKEN")
				}
			case cfg.Target == "server":
				var err error
				if cfg.Client, err = flags.resolve(cmd, env); err != nil {
					return err
				}
			}
			return benchRun(cmd.Context(), cfg, env)
		},
	}
	addClientFlags(cmd, &flags)
	benchEndpointUsage(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&inProcess, "in-process", false, "start a latch (memory datastore) in this process, load the data set and run against it")
	fs.StringVar(&cfg.Target, "target", "server", "server (the --endpoint), in-process, or empty (a constant-answer gRPC server in a process of its own)")
	fs.IntVar(&cfg.Users, "users", 0, "size of the user id space and data set (default: the workload's users)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed of the request sequences")
	fs.IntVar(&cfg.Conns, "conns", 2, "gRPC connections the calls go over in turn, rounded up to the same number per endpoint")
	fs.StringVarP(&cfg.Output, "output", "o", "", "write the JSON result here")
	fs.StringVar(&cfg.HTML, "html", "", "write the HTML report here")
	fs.StringVar(&cfg.MetricsURL, "metrics-url", "", "the server's Prometheus metrics URL, scraped around each phase (CPU, cache hit ratio)")
	fs.StringVar(&cfg.PermifyURL, "permify-url", "", "send the checks to Permify's HTTP API at this base URL (e.g. http://127.0.0.1:8443) instead of over gRPC; check steps only, data loaded beforehand")
	fs.StringVar(&cfg.Tenant, "tenant", "t1", "with --permify-url: the Permify tenant")
	fs.BoolVar(&cfg.NoLoad, "no-load", false, "with --in-process: do not load the data set")
	fs.BoolVarP(&cfg.Quiet, "quiet", "q", false, "no progress lines")
	return cmd
}

func benchRun(ctx context.Context, cfg BenchRunConfig, env Env) error {
	src, err := os.ReadFile(cfg.Workload)
	if err != nil {
		return err
	}
	w, err := bench.ParseWorkload(src)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Workload, err)
	}
	if cfg.Users > 0 {
		if err := w.SetUsers(cfg.Users); err != nil {
			return fmt.Errorf("%s: %w", cfg.Workload, err)
		}
	}
	if cfg.PermifyURL != "" {
		return runAndReport(ctx, cfg, w, bench.Options{
			Seed: cfg.Seed, Target: "Permify API at " + cfg.PermifyURL, MetricsURL: cfg.MetricsURL,
			Permify: &bench.PermifyTarget{URL: cfg.PermifyURL, Tenant: cfg.Tenant, Token: cfg.Client.Token},
		}, env)
	}
	eps, metricsURL, stop, err := benchTarget(ctx, cfg)
	if err != nil {
		return err
	}
	defer stop()
	if cfg.MetricsURL == "" {
		cfg.MetricsURL = metricsURL
	}
	conns, err := bench.DialEach(eps, cfg.Conns)
	if err != nil {
		return err
	}
	defer bench.CloseAll(conns)
	if cfg.Target == "server" {
		if err := serversAnswer(ctx, conns, eps); err != nil {
			return err
		}
	}
	if cfg.Target == "in-process" && !cfg.NoLoad && w.Dataset != nil {
		if err := loadInProcess(ctx, conns[0], w, env); err != nil {
			return err
		}
	}
	addrs := make([]string, len(eps))
	for i, e := range eps {
		addrs[i] = e.Addr
	}
	return runAndReport(ctx, cfg, w, bench.Options{
		Conns: bench.Conns(conns), Endpoints: addrs, Seed: cfg.Seed, Target: targetName(cfg, addrs), MetricsURL: cfg.MetricsURL,
	}, env)
}

// serversAnswer calls each endpoint once (ReadSchema, which any SpiceDB-API server
// answers, with a schema or without) before a run, so that a server that is not there
// or refuses the token fails the run at once, with the reason, instead of failing each
// of its calls for the whole run. conns holds one connection to each endpoint first.
func serversAnswer(ctx context.Context, conns []*grpc.ClientConn, eps []bench.Endpoint) error {
	for i, e := range eps {
		callCtx, cancel := context.WithTimeout(ctx, serverAnswerTimeout)
		_, err := v1.NewSchemaServiceClient(conns[i]).ReadSchema(callCtx, &v1.ReadSchemaRequest{})
		cancel()
		switch status.Code(err) {
		case codes.Unavailable, codes.Unauthenticated, codes.PermissionDenied, codes.DeadlineExceeded, codes.Unimplemented:
			return rpcFailed("reaching the server before the run", e.Addr, err)
		}
	}
	return nil
}

// serverAnswerTimeout bounds serversAnswer's call to each endpoint.
const serverAnswerTimeout = 10 * time.Second

// benchEndpointUsage says in cmd's help that its --endpoint takes a list.
func benchEndpointUsage(cmd *cobra.Command) {
	cmd.PersistentFlags().Lookup("endpoint").Usage = "server gRPC address, or several separated by commas: the nodes of a cluster (env LATCH_ENDPOINT)"
}

func runAndReport(ctx context.Context, cfg BenchRunConfig, w *bench.Workload, opt bench.Options, env Env) error {
	if !cfg.Quiet {
		opt.Log = env.Err
	}
	res, err := bench.Run(ctx, w, opt)
	if err != nil {
		return err
	}
	printSummary(env.Out, res)
	return writeOutputs(cfg, res)
}

// benchTarget returns the endpoints of cfg's target, the URL of the metrics of the
// empty server it started ("" for other targets), and stop.
func benchTarget(ctx context.Context, cfg BenchRunConfig) ([]bench.Endpoint, string, func(), error) {
	var (
		ep         bench.Endpoint
		metricsURL string
		stop       func()
		err        error
	)
	switch cfg.Target {
	case "server":
		eps, err := endpointsOf(cfg.Client)
		return eps, "", func() {}, err
	case "in-process":
		ep, stop, err = bench.StartLatch(ctx)
	case "empty":
		var exe string
		if exe, err = os.Executable(); err != nil {
			return nil, "", nil, fmt.Errorf("finding the latch binary to run the empty server: %w", err)
		}
		ep, metricsURL, stop, err = bench.StartEmptyProcess(exe)
	default:
		return nil, "", nil, fmt.Errorf("--target %q: want server, in-process or empty", cfg.Target)
	}
	return []bench.Endpoint{ep}, metricsURL, stop, err
}

func targetName(cfg BenchRunConfig, addrs []string) string {
	switch cfg.Target {
	case "in-process":
		return "latch in-process (memory datastore)"
	case "empty":
		return "empty gRPC server (constant CheckPermission)"
	}
	return strings.Join(addrs, ", ")
}

func loadInProcess(ctx context.Context, conn bench.Conn, w *bench.Workload, env Env) error {
	ds, err := dataset.ByName(w.Dataset.Name, w.Users, w.Dataset.Seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Err, "loading the %s data set (%d users) into the in-process latch\n", ds.Name(), w.Users)
	_, err = bench.Load(ctx, conn, ds, bench.LoadOptions{Method: bench.LoadAuto, Progress: env.Err})
	return err
}

func writeOutputs(cfg BenchRunConfig, res *bench.Result) error {
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{cfg.Output, res.WriteJSON},
		{cfg.HTML, func(w io.Writer) error { return bench.WriteHTML(w, res) }},
	} {
		if out.path == "" {
			continue
		}
		f, err := os.Create(out.path)
		if err != nil {
			return err
		}
		if err := errors.Join(out.write(f), f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", out.path, err)
		}
	}
	return nil
}

func printSummary(w io.Writer, r *bench.Result) {
	for _, p := range r.Phases {
		fmt.Fprintf(w, "\nphase %s (%s, %.1fs)", p.Name, p.Load, p.Duration)
		if p.Scheduled > 0 {
			fmt.Fprintf(w, ": scheduled %d, dropped %d", p.Scheduled, p.Dropped)
		}
		fmt.Fprintf(w, "\n%-22s %10s %10s %8s %8s %8s %8s %8s %8s  %s\n", "step", "count", "rate/s", "p50 ms", "p90", "p95", "p99", "p99.9", "max", "errors")
		for _, s := range append(append([]bench.StepResult{}, p.Steps...), p.Total) {
			l := s.Latency
			fmt.Fprintf(w, "%-22s %10d %10.1f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f  %s\n", s.Name, s.Count, s.Rate,
				l.P50, l.P90, l.P95, l.P99, l.P999, l.Max, benchErrors(s.Errors))
		}
		fmt.Fprintf(w, "generator CPU: %.2f cores (user %.1fs, sys %.1fs)", p.GeneratorCPU.Cores, p.GeneratorCPU.User, p.GeneratorCPU.Sys)
		if r.Target == "latch in-process (memory datastore)" {
			fmt.Fprint(w, " — in-process: this includes the server")
		}
		fmt.Fprintln(w)
		if m := p.Server; m != nil {
			fmt.Fprintf(w, "server: %.2f cores, cache hit ratio %s%s\n", m.CPUCores, hitRatio(m.CacheHitRatio), m.Error)
		}
	}
}

func hitRatio(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

func benchErrors(m map[string]int64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func newBenchCompareCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "compare A.json B.json",
		Short: "Compare two bench results: B's rates and latencies as ratios of A's",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := bench.ReadResult(args[0])
			if err != nil {
				return err
			}
			b, err := bench.ReadResult(args[1])
			if err != nil {
				return err
			}
			return bench.Compare(env.Out, a, b)
		},
	}
}

func newBenchReportCommand(env Env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RESULT.json",
		Short: "Write the HTML report of a JSON result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := bench.ReadResult(args[0])
			if err != nil {
				return err
			}
			if out == "" {
				return bench.WriteHTML(env.Out, r)
			}
			return writeOutputs(BenchRunConfig{HTML: out}, r)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the report here (default: standard output)")
	return cmd
}
