// Package server owns latch's network face: the SpiceDB-compatible authzed.api.v1
// gRPC services and their HTTP/JSON gateway, the Permify HTTP API (server/permify)
// mounted beside them, preshared-key auth, request validation, admission control,
// panic recovery, metrics and tracing, and rendering domain errors, as server/apierr
// classifies them, as gRPC statuses with ErrorReasons. It translates wire types to
// calls of the packages that own the rules and back: permissions are the engine's, the
// revision a read runs at is picked by consistency.go from the request's token and
// revision.Quantizer, schema writes are checked by schemachange, counters are
// relcounter's (registered in the store), and preconditions and writes are the
// store's. It decides nothing about permissions itself.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/latch-authz/latch/internal/cluster"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/logging"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/revision"
	"github.com/latch-authz/latch/internal/server/openfga"
	"github.com/latch-authz/latch/internal/server/playground"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
	"github.com/latch-authz/latch/internal/store/crdb"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/tlsconfig"
)

// Server is a running (or ready to run) latch server. New binds its listeners, so
// Addrs is known before Serve.
type Server struct {
	cfg       Config
	store     store.Store
	ownsStore bool
	engine    *engine.Engine
	schemas   *schemaCache
	quantizer *revision.Quantizer
	cache     *cache.Cache // the engine's subproblem cache; nil when caching is off
	// index is the engine's index of nested sets, and stopIndex ends its upkeep; nil
	// when it is off. It and the Permify tenants' indexes (tenantIndexes, for their
	// metrics) draw on indexBudget (--materialize-max-bytes).
	index         *materialize.Index
	stopIndex     func()
	indexBudget   *materialize.Budget
	tenantIndexes tenantIndexes
	// permsets answers the Materialize API (materialize_api.go); signKey, made once,
	// signs its download URLs.
	permsets        *materialize.PermissionSets
	downloadKeyOnce sync.Once
	signKey         []byte
	tracer          trace.Tracer
	generated       string
	// generatedPath is the file that keeps the generated key; "" when nothing keeps it.
	generatedPath string
	auth          *authenticator // the API keys, shared by gRPC, the gateway and Permify's API
	adm           *admission     // the limiters every API surface's calls go through
	// watchSlots holds a place per open Watch stream (--max-watch-streams); hub, made
	// once (hubOnce), is the one watch of the store they all share.
	watchSlots chan struct{}
	hubOnce    sync.Once
	hub        *changefeed.Hub

	grpc    *grpc.Server
	health  *health.Server
	grpcLis net.Listener

	http    *http.Server // nil when the gateway is disabled
	httpLis net.Listener

	// grpcTLS and httpTLS are the listeners' certificates; nil serves plaintext.
	grpcTLS, httpTLS *tlsconfig.Pair

	// cluster, clusterGRPC and clusterLis are this node's place in a cluster and its
	// dispatch service; nil outside one.
	cluster     *cluster.Cluster
	clusterGRPC *grpc.Server
	clusterLis  net.Listener

	metrics    *metrics
	metricsSrv *http.Server // nil when metrics are disabled
	metricsLis net.Listener
	gwConn     *grpc.ClientConn
	// closePermify closes the stores of Permify tenants; nil without the gateway.
	closePermify func()
	// fga serves OpenFGA's API; nil when it is disabled.
	fga *openfga.Service
	// playground serves /playground on the gateway's listener; nil without the gateway.
	playground *playground.Handler

	mu     sync.Mutex
	served bool // guarded by mu
	closed bool // guarded by mu
}

// healthServices are reported SERVING while the server runs.
var healthServices = []string{"", v1.SchemaService_ServiceDesc.ServiceName, v1.PermissionsService_ServiceDesc.ServiceName, v1.WatchService_ServiceDesc.ServiceName, v1.ExperimentalService_ServiceDesc.ServiceName}

// New validates cfg, opens the datastore and binds the listeners. Call Serve to run
// the server, or Close to release what New acquired without serving.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, schemas: newSchemaCache(), metrics: newMetrics(cfg.Logger), tracer: cfg.tracer(), watchSlots: make(chan struct{}, cfg.MaxWatchStreams)}
	s.cache = newDispatchCache(cfg.DispatchCacheMaxBytes, s.metrics)
	ecfg := engine.Config{MaxDepth: cfg.MaxDepth, Cache: s.cache}
	if cfg.Cluster.Enabled {
		if err := s.joinCluster(); err != nil {
			return nil, err
		}
		ecfg.Dispatcher = s.cluster
	}
	if err := s.loadCertificates(); err != nil {
		return nil, err
	}
	if err := s.openStore(); err != nil {
		return nil, err
	}
	// The key is generated after the store opens: pebble's directory must exist first.
	switch {
	case cfg.NoAuth:
		s.auth = openAuthenticator()
	case len(cfg.PresharedKeys) == 0:
		key, path, err := cfg.generatedKey()
		if err != nil {
			s.Close()
			return nil, err
		}
		s.generated, s.generatedPath = key, path
		s.auth = newAuthenticator([]string{key})
		s.auth.keyFile = path
	default:
		s.auth = newAuthenticator(cfg.PresharedKeys)
	}
	if err := s.bootstrap(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	if !cfg.MaterializeDisabled {
		ecfg.Index = s.startIndex()
	}
	if err := s.startPermissionSets(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	s.engine = engine.New(ecfg)
	s.metrics.registerReads(s.store)
	s.quantizer = revision.NewQuantizer(cfg.QuantizationWindow, cfg.MaxStalenessPercent, s.store.HeadRevision)
	if err := s.openFGA(); err != nil {
		s.Close()
		return nil, fmt.Errorf("opening the OpenFGA stores: %w", err)
	}
	if err := s.listen(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// loadCertificates loads the TLS certificates the configuration names.
func (s *Server) loadCertificates() error {
	warn := func(err error) { s.cfg.Logger.Warn("TLS certificate", "err", err) }
	var err error
	if s.cfg.GRPCTLSCertPath != "" {
		if s.grpcTLS, err = tlsconfig.Load(s.cfg.GRPCTLSCertPath, s.cfg.GRPCTLSKeyPath, warn); err != nil {
			return fmt.Errorf("gRPC listener: %w", err)
		}
	}
	if s.cfg.HTTPTLSCertPath != "" && s.cfg.HTTPAddr != "" {
		if s.httpTLS, err = tlsconfig.Load(s.cfg.HTTPTLSCertPath, s.cfg.HTTPTLSKeyPath, warn); err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
	}
	return nil
}

func (s *Server) openStore() error {
	if s.cfg.Datastore != nil {
		s.store = s.cfg.Datastore
		return nil
	}
	st, err := OpenDatastore(context.Background(), s.cfg)
	if err != nil {
		return err
	}
	s.store, s.ownsStore = st, true
	return nil
}

// OpenDatastore opens the store cfg names. The caller closes it.
func OpenDatastore(ctx context.Context, cfg Config) (store.Store, error) {
	cfg = cfg.WithDefaults()
	switch cfg.DatastoreEngine {
	case "memory":
		return memory.New(memory.Options{GCWindow: cfg.GCWindow}), nil
	case "pebble":
		dir := cfg.DatastoreURI
		if dir == "" {
			dir = DefaultDataDir
		}
		st, err := pebble.Open(dir, pebble.Options{GCWindow: cfg.GCWindow, CacheSize: cfg.DatastoreBlockCacheBytes})
		if err != nil {
			return nil, fmt.Errorf("opening the pebble data directory %s: %w", dir, err)
		}
		return st, nil
	case "postgres":
		st, err := postgres.Open(ctx, cfg.DatastoreURI, postgres.Options{
			ReadConns: int32(cfg.ReadConns), WriteConns: int32(cfg.WriteConns),
			GCWindow: cfg.GCWindow, ReplicaURIs: cfg.ReplicaURIs,
		})
		if err != nil {
			return nil, fmt.Errorf("opening the postgres datastore: %w", err)
		}
		return st, nil
	case "cockroachdb":
		st, err := crdb.Open(ctx, cfg.DatastoreURI, crdb.Options{
			ReadConns: int32(cfg.ReadConns), WriteConns: int32(cfg.WriteConns), GCWindow: cfg.GCWindow,
		})
		if err != nil {
			return nil, fmt.Errorf("opening the cockroachdb datastore: %w", err)
		}
		return st, nil
	}
	return nil, checkEngine(cfg.DatastoreEngine, cfg.DatastoreURI)
}

func (s *Server) listen() error {
	lis, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listening for gRPC on %s: %w", s.cfg.GRPCAddr, err)
	}
	s.grpcLis = lis
	s.grpc = s.newGRPCServer()
	if s.cfg.MetricsAddr != "" {
		ml, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listening for metrics on %s: %w", s.cfg.MetricsAddr, err)
		}
		s.metricsLis = ml
		s.metricsSrv = &http.Server{
			Handler: s.metrics.handler(s.cfg.MetricsPresharedKey, s.cfg.PProf), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: logging.StdLogger(s.cfg.Logger),
		}
	}
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	hl, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening for HTTP on %s: %w", s.cfg.HTTPAddr, err)
	}
	s.httpLis = hl
	return s.newGateway()
}

func (s *Server) newGRPCServer() *grpc.Server {
	s.adm = newAdmission(s.cfg, s.metrics)
	calls := newCalls(s.cfg.Logger, s.metrics, s.auth, s.adm, s.cfg.StreamStallTimeout)
	opts := s.cfg.tracingOptions()
	if s.grpcTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.grpcTLS.Server())))
	}
	g := grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(s.cfg.MaxRequestBytes),
		grpc.ForceServerCodecV2(newDecodeCodec()),
		// Calls run on long-lived workers, as many as admission lets execute or wait at
		// once: a goroutine per call would grow a fresh stack through the store's deep
		// iterator calls every time (a fifth of the CPU of a check load, in copystack).
		// Calls past that get a goroutine of their own, to be shed by admission.
		grpc.NumStreamWorkers(uint32(s.cfg.MaxInflightCheap+s.cfg.MaxInflightExpensive+s.cfg.MaxQueuedCheap+s.cfg.MaxQueuedExpensive)),
		grpc.UnaryInterceptor(calls.unary),
		grpc.StreamInterceptor(calls.stream),
	)...)
	perms := &permissionsService{s: s}
	g.RegisterService(invalidOnDecodeError(&v1.PermissionsService_ServiceDesc), perms)
	schemas := &schemaService{s: s}
	g.RegisterService(invalidOnDecodeError(&v1.SchemaService_ServiceDesc), schemas)
	g.RegisterService(invalidOnDecodeError(&v1.ExperimentalService_ServiceDesc), &experimentalService{perms: perms, schema: schemas})
	g.RegisterService(invalidOnDecodeError(&v1.WatchService_ServiceDesc), &watchService{s: s})
	s.registerMaterialize(g)
	s.health = health.NewServer()
	for _, name := range healthServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	if s.fga != nil {
		g.RegisterService(invalidOnDecodeError(&openfgav1.OpenFGAService_ServiceDesc), s.fga)
		s.health.SetServingStatus(openfgav1.OpenFGAService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	calls.register(g)
	return g
}

// FixedHeapBytes is the heap that lives as long as the server and never holds
// pointers, for gcpace: the dispatch cache, allocated whole at start, and the tables
// of a store that keeps its data in the process (the memory store).
func (s *Server) FixedHeapBytes() int64 {
	var n int64
	if s.cache != nil {
		n = s.cache.Stats().Bytes
	}
	if t, ok := s.store.(interface{ TableBytes() int64 }); ok {
		n += t.TableBytes()
	}
	return n
}

// Addrs returns the bound gRPC address and the HTTP gateway address ("" when disabled).
func (s *Server) Addrs() (grpcAddr, httpAddr string) {
	grpcAddr = s.grpcLis.Addr().String()
	if s.httpLis != nil {
		httpAddr = s.httpLis.Addr().String()
	}
	return grpcAddr, httpAddr
}

// MetricsAddr returns the bound address of /metrics and /debug/pprof ("" when disabled).
func (s *Server) MetricsAddr() string {
	if s.metricsLis == nil {
		return ""
	}
	return s.metricsLis.Addr().String()
}

// GeneratedKey returns the preshared key generated because none was configured, or "".
func (s *Server) GeneratedKey() string { return s.generated }

// GeneratedKeyPath returns the file that keeps the generated key across restarts, or ""
// when none does (a key was configured, or the store has no data directory).
func (s *Server) GeneratedKeyPath() string { return s.generatedPath }

// Serve runs the server until ctx is done or a listener fails, then stops gracefully:
// health (which meanwhile follows the datastore's reachability) turns NOT_SERVING,
// in-flight requests get ShutdownGrace to finish, and everything New acquired is
// released. It returns nil after a clean stop.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.served || s.closed {
		s.mu.Unlock()
		return errors.New("server: Serve called twice or after Close")
	}
	s.served = true
	s.mu.Unlock()

	errc := make(chan error, 2)
	running := 1
	go func() { errc <- s.grpc.Serve(s.grpcLis) }()
	if s.http != nil {
		running++
		go func() {
			if s.httpTLS != nil {
				s.http.TLSConfig = s.httpTLS.Server()
				errc <- ignoreClosed(s.http.ServeTLS(s.httpLis, "", ""))
				return
			}
			errc <- ignoreClosed(s.http.Serve(s.httpLis))
		}()
	}
	if s.metricsSrv != nil {
		running++
		go func() { errc <- ignoreClosed(s.metricsSrv.Serve(s.metricsLis)) }()
	}
	if s.clusterGRPC != nil {
		running++
		go func() { errc <- s.clusterGRPC.Serve(s.clusterLis) }()
	}
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		s.probeDatastore(probeCtx)
		close(probed)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		running--
	}
	stopProbe()
	<-probed
	s.shutdown()
	for ; running > 0; running-- {
		if e := <-errc; err == nil {
			err = ignoreClosed(e)
		}
	}
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// shutdown stops serving, waiting up to ShutdownGrace for requests in flight.
func (s *Server) shutdown() {
	s.health.Shutdown()
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	for _, h := range []*http.Server{s.http, s.metricsSrv} {
		if h != nil {
			if err := h.Shutdown(grace); err != nil {
				_ = h.Close()
			}
		}
	}
	// The API stops first: its requests may still dispatch to this node's peers, and
	// their dispatches to this node's service are answered until it stops too.
	for _, g := range []*grpc.Server{s.grpc, s.clusterGRPC} {
		if g != nil {
			stopGracefully(grace, g)
		}
	}
	s.Close()
}

// stopGracefully stops g, waiting for its calls in flight until grace is done.
func stopGracefully(grace context.Context, g *grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-grace.Done():
		g.Stop()
		<-stopped
	}
}

// Close releases the listeners, the gateway's connection and a store the server
// opened. Serve calls it; call it yourself only when Serve was never called.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if !s.served {
		if s.grpc != nil {
			s.grpc.Stop()
		}
		if s.grpcLis != nil {
			_ = s.grpcLis.Close()
		}
		if s.httpLis != nil {
			_ = s.httpLis.Close()
		}
		if s.metricsLis != nil {
			_ = s.metricsLis.Close()
		}
		if s.clusterGRPC != nil {
			s.clusterGRPC.Stop()
		}
		if s.clusterLis != nil {
			_ = s.clusterLis.Close()
		}
	}
	if s.cluster != nil {
		s.cluster.Close()
	}
	if s.gwConn != nil {
		_ = s.gwConn.Close()
	}
	if s.closePermify != nil {
		s.closePermify()
	}
	if s.playground != nil {
		s.playground.Close()
	}
	if s.fga != nil {
		s.fga.Close()
	}
	if s.stopIndex != nil {
		s.stopIndex()
	}
	if s.ownsStore && s.store != nil {
		if err := s.store.Close(); err != nil {
			s.cfg.Logger.Warn("closing datastore", "err", err)
		}
	}
}

// status maps err through the error table.
func (s *Server) status(err error) error { return toStatus(s.cfg.Logger, err) }
