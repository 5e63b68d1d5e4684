package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/latch-authz/latch/internal/store"
)

// Defaults, SpiceDB's where SpiceDB has one, so clients tuned for SpiceDB fit.
const (
	DefaultGRPCAddr = "127.0.0.1:50051"
	DefaultHTTPAddr = "127.0.0.1:8443"
	// DefaultClusterAddr is the dispatch service's: loopback, since beyond it the
	// service needs TLS or an explicit --dispatch-cluster-insecure-plaintext.
	DefaultClusterAddr                 = "127.0.0.1:50053"
	DefaultDatastoreEngine             = "pebble"
	DefaultDataDir                     = "./latch-data"
	DefaultGCWindow                    = 24 * time.Hour
	DefaultMaxUpdatesPerWrite          = 1000
	DefaultMaxPreconditions            = 1000
	DefaultMaxChecksPerBulk            = 1000
	DefaultMaxRelationshipContextBytes = 25000
	DefaultReadRelationshipsLimit      = 1000
	DefaultMaxDeleteLimit              = 1000
	DefaultMaxRequestBytes             = 4 << 20
	DefaultShutdownGrace               = 10 * time.Second
	DefaultQuantizationWindow          = 5 * time.Second
	DefaultMaxStalenessPercent         = 10
	DefaultAdmissionWait               = 250 * time.Millisecond
	DefaultPlaygroundMaxInflight       = 1
	DefaultPlaygroundTimeout           = 5 * time.Second
	DefaultMaxWatchStreams             = 1000
	DefaultStreamStallTimeout          = 2 * time.Second
	DefaultMaxTenants                  = 100
	DefaultMetricsAddr                 = "127.0.0.1:9090"
	DefaultDispatchCacheMaxBytes       = 32 << 20
	// DefaultMaterializeMaxBytes bounds the index of nested sets.
	DefaultMaterializeMaxBytes = 1 << 30
	// DefaultMemoryDispatchCacheMaxBytes is the dispatch cache over the memory engine,
	// whose reads cost little more than a cache hit: there a larger cache buys nothing
	// and holds memory (on the social workload, 16 MiB served as many checks per CPU
	// second as 32 and 64 MiB, and the process took 15 MiB less than with 32).
	DefaultMemoryDispatchCacheMaxBytes = 16 << 20
	DefaultDatastoreBlockCacheBytes    = 64 << 20
)

// Config is everything a Server needs. The CLI fills it from flags; zero values mean
// the defaults above.
type Config struct {
	// GRPCAddr is the gRPC listen address; "" means DefaultGRPCAddr. Port 0 picks a free port.
	GRPCAddr string
	// HTTPAddr is the HTTP/JSON gateway listen address; "" or "-" disables the gateway.
	// The CLI's flag default is DefaultHTTPAddr.
	HTTPAddr string
	// PresharedKeys are the bearer tokens clients may present. When empty the server
	// generates one (GeneratedKey) and refuses to listen on anything but loopback.
	PresharedKeys []string
	// NoAuth serves every API without authentication, as Permify serves by default (its
	// published load scripts send no key). Every listener must then be on loopback.
	NoAuth bool

	// DatastoreEngine names the store backend: "pebble" (embedded and durable, the
	// default), "memory", "postgres" or "cockroachdb".
	DatastoreEngine string
	// DatastoreURI is pebble's data directory (default DefaultDataDir) or the database's
	// connection string for postgres and cockroachdb.
	DatastoreURI string
	// ReadConns and WriteConns size the SQL stores' connection pools (0: their defaults).
	ReadConns, WriteConns int
	// ReplicaURIs name PostgreSQL read replicas.
	ReplicaURIs []string
	// Datastore, when set, is used instead of opening DatastoreEngine (embedding, tests).
	// The server does not close a store it was given.
	Datastore store.Store
	// GCWindow is how long old revisions stay readable.
	GCWindow time.Duration
	// DatastoreBlockCacheBytes is the pebble engine's block cache (0: the default).
	DatastoreBlockCacheBytes int64

	// QuantizationWindow is the window minimize_latency reads round their revision down
	// to (0: the default; negative: no quantization, read the newest revision).
	QuantizationWindow time.Duration
	// MaxStalenessPercent is the largest random share of the window by which a request
	// may read an older window's revision, so requests do not all move at once
	// (0: the default; negative: no smearing).
	MaxStalenessPercent int

	// MaxInflightCheap and MaxInflightExpensive cap the requests executing at once
	// (cheap: checks, writes, schema; expensive: lookups, reads, import, export); 0 means
	// 4×GOMAXPROCS and GOMAXPROCS. MaxQueuedCheap and MaxQueuedExpensive bound the
	// requests waiting for a slot (0: 8× the cap), each for at most AdmissionWait; past
	// that a request is refused with RESOURCE_EXHAUSTED at once.
	MaxInflightCheap, MaxInflightExpensive int
	MaxQueuedCheap, MaxQueuedExpensive     int
	AdmissionWait                          time.Duration

	// DispatchCacheMaxBytes is the memory of the cache of subproblem answers (0: the default
	// of the engine; negative: no cache). It is allocated whole at start: the limit is the
	// cost.
	DispatchCacheMaxBytes int64

	// Cluster, when Enabled, makes this server one node of a cluster over a shared
	// datastore: subproblems are routed to the nodes owning them (see ClusterConfig).
	Cluster ClusterConfig

	// GRPCTLSCertPath and GRPCTLSKeyPath, when set, serve the gRPC API over TLS with that
	// certificate and key, reloaded when the files change; HTTPTLSCertPath and
	// HTTPTLSKeyPath do the same for the HTTP gateway.
	GRPCTLSCertPath, GRPCTLSKeyPath string
	HTTPTLSCertPath, HTTPTLSKeyPath string

	// MetricsAddr is where /metrics (and, with PProf, /debug/pprof) listen; "" or "-"
	// turns them off. The CLI's flag default is DefaultMetricsAddr.
	MetricsAddr string
	// MetricsPresharedKey, when set, is the bearer token /metrics and /debug/pprof
	// require. A metrics address beyond loopback needs one.
	MetricsPresharedKey string
	// PProf serves Go's profiles under /debug/pprof on the metrics address. The
	// command line is never served: it may hold keys and passwords.
	PProf bool
	// TracerProvider, if not nil, traces every call (OpenTelemetry, continuing traces
	// clients propagate) and the datastore queries of sampled calls.
	TracerProvider trace.TracerProvider

	// MaterializeDisabled turns off the index of nested sets (internal/materialize),
	// which otherwise answers checks through the schema's recursive subject-set
	// relations; MaterializeMaxBytes bounds its memory (0: the default).
	MaterializeDisabled bool
	MaterializeMaxBytes int64

	// MaxDepth bounds check recursion (0: the engine's default, 50).
	MaxDepth int
	// MaxUpdatesPerWrite bounds the updates of one WriteRelationships call.
	MaxUpdatesPerWrite int
	// MaxPreconditions bounds the preconditions of one write or delete call.
	MaxPreconditions int
	// MaxChecksPerBulk bounds the items of one CheckBulkPermissions call.
	MaxChecksPerBulk int
	// MaxRelationshipContextBytes bounds the caveat context stored on one relationship.
	MaxRelationshipContextBytes int
	// ReadRelationshipsLimit is the largest optional_limit ReadRelationships accepts.
	ReadRelationshipsLimit int
	// MaxDeleteLimit is the largest optional_limit DeleteRelationships accepts.
	MaxDeleteLimit int
	// MaxRequestBytes bounds one request message (gRPC and HTTP alike).
	MaxRequestBytes int
	// BootstrapFiles are validation files (schema and relationships) loaded at start into
	// a datastore that holds no schema (SpiceDB's --datastore-bootstrap-files).
	BootstrapFiles []string
	// BootstrapOverwrite loads BootstrapFiles over whatever the datastore holds,
	// deleting its relationships first.
	BootstrapOverwrite bool
	// ShutdownGrace is how long Serve waits for in-flight requests when it stops.
	ShutdownGrace time.Duration
	// StreamStallTimeout is how long a streaming call may wait on a client that does
	// not read before it is ended and its admission slot freed (0: the default).
	StreamStallTimeout time.Duration

	// PlaygroundEnabled serves the web playground at /playground on the HTTP listener;
	// nil means on when the HTTP address is loopback and off beyond it (the playground
	// needs no API key, and its evaluations cost CPU).
	PlaygroundEnabled *bool
	// PlaygroundPresharedKey, when set, is the bearer token the playground's API requires.
	PlaygroundPresharedKey string
	// PlaygroundMaxInflight is how many playground evaluations run at once (0: 1), and
	// PlaygroundMaxQueued how many wait (0: 4× that); they run only while no API call
	// waits for a slot. PlaygroundTimeout bounds one evaluation and its wait (0: 5 s);
	// one that runs out answers 503.
	PlaygroundMaxInflight, PlaygroundMaxQueued int
	PlaygroundTimeout                          time.Duration

	// MaxWatchStreams bounds the Watch streams open at once (0: the default); past it
	// a Watch is refused with RESOURCE_EXHAUSTED.
	MaxWatchStreams int
	// MaxTenants bounds the Permify tenants besides t1 (0: the default); past it
	// tenants/create is refused.
	MaxTenants int

	// OpenFGA configures OpenFGA's API (/stores/... and openfga.v1.OpenFGAService).
	OpenFGA OpenFGAConfig

	// Logger receives server logs; nil means slog.Default().
	Logger *slog.Logger
}

// OpenFGAConfig configures OpenFGA's API.
type OpenFGAConfig struct {
	// Disabled turns the API off on both listeners.
	Disabled bool
	// MaxStores bounds the stores (0: no bound).
	MaxStores int
	// MaxTuplesPerWrite bounds a Write's writes plus deletes (0: OpenFGA's 100), and
	// MaxChecksPerBatch a BatchCheck's checks (0: OpenFGA's 50).
	MaxTuplesPerWrite, MaxChecksPerBatch int
	// ListObjectsMaxResults caps ListObjects (0: OpenFGA's 1,000; negative: no cap);
	// StreamedListObjectsMaxResults caps StreamedListObjects (0: no cap).
	ListObjectsMaxResults, StreamedListObjectsMaxResults int
}

// ClusterConfig places a server in a cluster.
type ClusterConfig struct {
	Enabled bool
	// Addr is where the internal dispatch service listens, and how this node finds
	// itself among the members. Beyond loopback it needs TLS (TLSCertPath) or
	// InsecurePlaintext: the preshared key would otherwise cross the network in clear.
	Addr string
	// InsecurePlaintext allows a dispatch address beyond loopback without TLS, for a
	// network only the nodes can reach (a NetworkPolicy, a private VLAN).
	InsecurePlaintext bool
	// Upstream names the members: static:///h1:p1,h2:p2 or dns:///name:port.
	Upstream string
	// PresharedKey guards the dispatch service ("": the first API preshared key).
	PresharedKey string
	// ConcurrencyLimit bounds the dispatches in flight to one peer (0: the default).
	ConcurrencyLimit int
	// Timeout bounds one dispatch (0: the default, a minute); past it the dispatch is
	// answered locally.
	Timeout time.Duration
	// TLSCertPath and TLSKeyPath serve the dispatch service over TLS (reloaded when the
	// files change); UpstreamCAPath is the CA peers' certificates are verified with.
	// Either makes this node dial its peers over TLS (with the system's CAs when
	// UpstreamCAPath is empty).
	TLSCertPath, TLSKeyPath, UpstreamCAPath string
	// TestDelay holds every dispatch this node answers this long: a test hook that
	// makes it a slow peer.
	TestDelay time.Duration
}

// clusterKey is the dispatch service's key: its own, or the first API key.
func (c Config) clusterKey() string {
	if c.Cluster.PresharedKey != "" || len(c.PresharedKeys) == 0 {
		return c.Cluster.PresharedKey
	}
	return c.PresharedKeys[0]
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.HTTPAddr == "-" {
		c.HTTPAddr = ""
	}
	if c.DatastoreEngine == "" {
		c.DatastoreEngine = DefaultDatastoreEngine
	}
	setDefault(&c.GCWindow, DefaultGCWindow)
	setDefault(&c.DatastoreBlockCacheBytes, DefaultDatastoreBlockCacheBytes)
	setDefault(&c.MaxUpdatesPerWrite, DefaultMaxUpdatesPerWrite)
	setDefault(&c.MaxPreconditions, DefaultMaxPreconditions)
	setDefault(&c.MaxChecksPerBulk, DefaultMaxChecksPerBulk)
	setDefault(&c.MaxRelationshipContextBytes, DefaultMaxRelationshipContextBytes)
	setDefault(&c.ReadRelationshipsLimit, DefaultReadRelationshipsLimit)
	setDefault(&c.MaxDeleteLimit, DefaultMaxDeleteLimit)
	setDefault(&c.MaxRequestBytes, DefaultMaxRequestBytes)
	setDefault(&c.ShutdownGrace, DefaultShutdownGrace)
	setDefault(&c.QuantizationWindow, DefaultQuantizationWindow)
	procs := runtime.GOMAXPROCS(0)
	setDefault(&c.MaxInflightCheap, 4*procs)
	setDefault(&c.MaxInflightExpensive, procs)
	setDefault(&c.MaxQueuedCheap, 8*c.MaxInflightCheap)
	setDefault(&c.MaxQueuedExpensive, 8*c.MaxInflightExpensive)
	setDefault(&c.AdmissionWait, DefaultAdmissionWait)
	setDefault(&c.StreamStallTimeout, DefaultStreamStallTimeout)
	setDefault(&c.PlaygroundMaxInflight, DefaultPlaygroundMaxInflight)
	setDefault(&c.PlaygroundMaxQueued, 4*c.PlaygroundMaxInflight)
	setDefault(&c.PlaygroundTimeout, DefaultPlaygroundTimeout)
	setDefault(&c.MaxWatchStreams, DefaultMaxWatchStreams)
	setDefault(&c.MaxTenants, DefaultMaxTenants)
	if c.DatastoreEngine == "memory" {
		setDefault(&c.DispatchCacheMaxBytes, DefaultMemoryDispatchCacheMaxBytes)
	}
	setDefault(&c.DispatchCacheMaxBytes, DefaultDispatchCacheMaxBytes)
	setDefault(&c.MaterializeMaxBytes, DefaultMaterializeMaxBytes)
	if c.MetricsAddr == "-" {
		c.MetricsAddr = ""
	}
	setDefault(&c.MaxStalenessPercent, DefaultMaxStalenessPercent)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports every problem with c (after defaults), joined.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	keyFlag := "--grpc-preshared-key"
	if c.NoAuth {
		keyFlag = "a preshared key instead of --insecure-no-auth"
		if len(c.PresharedKeys) > 0 {
			errs = append(errs, errors.New("--insecure-no-auth and --grpc-preshared-key contradict each other: choose one"))
		}
	}
	if c.NoAuth && c.Cluster.Enabled {
		errs = append(errs, checkAddr("dispatch cluster address", c.Cluster.Addr, true, "a preshared key instead of --insecure-no-auth"))
	}
	errs = append(errs, checkAddr("grpc address", c.GRPCAddr, c.NoAuth || len(c.PresharedKeys) == 0, keyFlag))
	if c.HTTPAddr != "" {
		errs = append(errs, checkAddr("http address", c.HTTPAddr, c.NoAuth || len(c.PresharedKeys) == 0, keyFlag))
	}
	if c.MetricsAddr != "" {
		errs = append(errs, checkAddr("metrics address", c.MetricsAddr, c.NoAuth || c.MetricsPresharedKey == "", "--metrics-preshared-key"))
	} else if c.PProf {
		errs = append(errs, errors.New("pprof is served on the metrics address, which is turned off"))
	}
	errs = append(errs, checkTLSPair("grpc", c.GRPCTLSCertPath, c.GRPCTLSKeyPath), checkTLSPair("http", c.HTTPTLSCertPath, c.HTTPTLSKeyPath))
	if c.HTTPAddr == "" && c.HTTPTLSCertPath != "" {
		errs = append(errs, errors.New("an HTTP TLS certificate is set but the HTTP gateway is turned off"))
	}
	for i, k := range c.PresharedKeys {
		if strings.TrimSpace(k) == "" {
			errs = append(errs, fmt.Errorf("preshared key %d is empty", i+1))
		}
	}
	if c.Datastore == nil {
		errs = append(errs, checkEngine(c.DatastoreEngine, c.DatastoreURI))
	}
	if c.MaterializeMaxBytes < 0 && !c.MaterializeDisabled {
		errs = append(errs, fmt.Errorf("--materialize-max-bytes is %d; to turn the index off, use --materialize-enabled=false", c.MaterializeMaxBytes))
	}
	if c.Cluster.Enabled {
		errs = append(errs, c.checkCluster())
	}
	for _, n := range []struct {
		name string
		v    int64
	}{
		{"max depth", int64(c.MaxDepth)},
		{"gc window", int64(c.GCWindow)},
		{"datastore block cache bytes", c.DatastoreBlockCacheBytes},
		{"max updates per write", int64(c.MaxUpdatesPerWrite)},
		{"max preconditions", int64(c.MaxPreconditions)},
		{"max checks per bulk", int64(c.MaxChecksPerBulk)},
		{"max relationship context bytes", int64(c.MaxRelationshipContextBytes)},
		{"read relationships limit", int64(c.ReadRelationshipsLimit)},
		{"max delete limit", int64(c.MaxDeleteLimit)},
		{"max request bytes", int64(c.MaxRequestBytes)},
		{"shutdown grace", int64(c.ShutdownGrace)},
		{"read connections", int64(c.ReadConns)},
		{"write connections", int64(c.WriteConns)},
		{"max inflight cheap requests", int64(c.MaxInflightCheap)},
		{"max inflight expensive requests", int64(c.MaxInflightExpensive)},
		{"max queued cheap requests", int64(c.MaxQueuedCheap)},
		{"max queued expensive requests", int64(c.MaxQueuedExpensive)},
		{"admission wait", int64(c.AdmissionWait)},
		{"stream stall timeout", int64(c.StreamStallTimeout)},
		{"playground max inflight", int64(c.PlaygroundMaxInflight)},
		{"playground max queued", int64(c.PlaygroundMaxQueued)},
		{"playground timeout", int64(c.PlaygroundTimeout)},
		{"max watch streams", int64(c.MaxWatchStreams)},
		{"max tenants", int64(c.MaxTenants)},
		{"OpenFGA max stores", int64(c.OpenFGA.MaxStores)},
		{"OpenFGA max tuples per write", int64(c.OpenFGA.MaxTuplesPerWrite)},
		{"OpenFGA max checks per batch", int64(c.OpenFGA.MaxChecksPerBatch)},
		{"OpenFGA streamed list objects max results", int64(c.OpenFGA.StreamedListObjectsMaxResults)},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", n.name))
		}
	}
	if c.MaxStalenessPercent > 100 {
		errs = append(errs, fmt.Errorf("max staleness percent %d is more than 100", c.MaxStalenessPercent))
	}
	return errors.Join(errs...)
}

// checkAddr validates a listen address; without a preshared key (keyFlag names the
// flag that sets it) only loopback is allowed, because a generated key printed on one
// machine, or no key at all, protects nothing on a network.
func checkAddr(what, addr string, loopbackOnly bool, keyFlag string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", what, addr, err)
	}
	if port == "" {
		return fmt.Errorf("%s %q: missing port", what, addr)
	}
	if loopbackOnly && !isLoopback(host) {
		return fmt.Errorf("%s %q is not a loopback address: set %s to listen beyond this machine", what, addr, keyFlag)
	}
	return nil
}

// checkTLSPair requires a listener's certificate and key to be given together.
func checkTLSPair(listener, cert, key string) error {
	if (cert == "") != (key == "") {
		return fmt.Errorf("--%s-tls-cert-path and --%s-tls-key-path go together: give both or neither", listener, listener)
	}
	return nil
}

// playgroundEnabled says whether the gateway serves the playground: as set, or, by
// default, when the HTTP listener is on loopback only.
func (c Config) playgroundEnabled() bool {
	if c.PlaygroundEnabled != nil {
		return *c.PlaygroundEnabled
	}
	host, _, err := net.SplitHostPort(c.HTTPAddr)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DatastoreEngines are the values DatastoreEngine accepts.
var DatastoreEngines = []string{"pebble", "memory", "postgres", "cockroachdb"}

func checkEngine(engine, uri string) error {
	switch engine {
	case "pebble", "memory":
		return nil
	case "postgres", "cockroachdb":
		if uri == "" {
			return fmt.Errorf("datastore engine %q needs --datastore-conn-uri (e.g. postgres://user:pass@127.0.0.1:5432/latch)", engine)
		}
		return nil
	}
	return fmt.Errorf("unknown datastore engine %q (supported: %s)", engine, strings.Join(DatastoreEngines, ", "))
}
