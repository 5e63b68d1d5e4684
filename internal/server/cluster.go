package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/cluster"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/tlsconfig"
)

// checkCluster reports what keeps the cluster configuration from working.
func (c Config) checkCluster() error {
	var errs []error
	if c.Cluster.Addr == "" {
		errs = append(errs, errors.New("--dispatch-cluster-enabled needs --dispatch-cluster-addr, the address this node's dispatch service listens on"))
	} else if host, _, err := net.SplitHostPort(c.Cluster.Addr); err != nil {
		errs = append(errs, fmt.Errorf("--dispatch-cluster-addr %q: %v", c.Cluster.Addr, err))
	} else if !isLoopback(host) && c.Cluster.TLSCertPath == "" && !c.Cluster.InsecurePlaintext {
		errs = append(errs, fmt.Errorf("--dispatch-cluster-addr %q is not a loopback address and the dispatch service has no TLS, so the cluster key would cross the network in clear: "+
			"set --dispatch-cluster-tls-cert-path and --dispatch-cluster-tls-key-path, or --dispatch-cluster-insecure-plaintext on a network only the nodes can reach", c.Cluster.Addr))
	}
	if c.Cluster.Upstream == "" {
		errs = append(errs, errors.New("--dispatch-cluster-enabled needs --dispatch-upstream-addr, the members: static:///host:port,... or dns:///name:port"))
	}
	if c.clusterKey() == "" {
		errs = append(errs, errors.New("--dispatch-cluster-enabled needs --dispatch-cluster-preshared-key (or --grpc-preshared-key, which it defaults to): dispatches are authenticated"))
	}
	errs = append(errs, checkTLSPair("dispatch-cluster", c.Cluster.TLSCertPath, c.Cluster.TLSKeyPath))
	if c.Datastore == nil && c.DatastoreEngine != "postgres" && c.DatastoreEngine != "cockroachdb" {
		errs = append(errs, fmt.Errorf("--dispatch-cluster-enabled needs a datastore the nodes share (postgres or cockroachdb), not %s", c.DatastoreEngine))
	}
	return errors.Join(errs...)
}

// joinCluster joins the cluster and binds the dispatch service's listener.
func (s *Server) joinCluster() error {
	cc := s.cfg.Cluster
	ccfg := cluster.Config{
		Addr: cc.Addr, Upstream: cc.Upstream, PresharedKey: s.cfg.clusterKey(), ConcurrencyLimit: cc.ConcurrencyLimit,
		Timeout: cc.Timeout, Registerer: s.metrics.registry, Logger: s.cfg.Logger,
	}
	if cc.TLSCertPath != "" {
		pair, err := tlsconfig.Load(cc.TLSCertPath, cc.TLSKeyPath, func(err error) { s.cfg.Logger.Warn("dispatch TLS certificate", "err", err) })
		if err != nil {
			return fmt.Errorf("dispatch listener: %w", err)
		}
		ccfg.ServerTLS = pair.Server()
	}
	if cc.TLSCertPath != "" || cc.UpstreamCAPath != "" {
		ccfg.ClientTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if cc.UpstreamCAPath != "" {
			pem, err := os.ReadFile(cc.UpstreamCAPath)
			if err != nil {
				return fmt.Errorf("--dispatch-upstream-ca-path: %w", err)
			}
			ccfg.ClientTLS.RootCAs = x509.NewCertPool()
			if !ccfg.ClientTLS.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--dispatch-upstream-ca-path %s holds no PEM certificate", cc.UpstreamCAPath)
			}
		}
	}
	cl, err := cluster.New(ccfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.Cluster.Addr)
	if err != nil {
		cl.Close()
		return fmt.Errorf("listening for dispatches on %s: %w", s.cfg.Cluster.Addr, err)
	}
	s.cluster, s.clusterLis = cl, lis
	s.clusterGRPC = cl.NewServer(s.answerDispatched, cluster.ServiceOptions{Delay: s.cfg.Cluster.TestDelay})
	return nil
}

// answerDispatched answers a subproblem another node sent, at exactly its revision.
func (s *Server) answerDispatched(ctx context.Context, sp *engine.Subproblem) (*engine.Answers, error) {
	r, err := s.store.Reader(ctx, sp.Revision)
	if err != nil {
		return nil, s.dispatchStatus(err)
	}
	r = s.timed(ctx, r)
	sch, err := s.schemas.atRevision(ctx, r)
	if err != nil {
		return nil, s.dispatchStatus(err)
	}
	return s.engine.AnswerDispatched(ctx, sch, r, sp)
}

// dispatchStatus gives a store's or schema's error the API's code (a revision from the
// future OutOfRange, an outage Unavailable) and a message of its own, as the API's
// would speak of the client's zedtoken; an ended context stays as it is, for the
// dispatch service to tell its caller's cancellation from a joined one's.
func (s *Server) dispatchStatus(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code := status.Code(s.status(err))
	if code == codes.Internal {
		return status.Error(code, "dispatch: internal error")
	}
	return status.Error(code, "dispatch: "+err.Error())
}

// ClusterAddr returns the bound address of the dispatch service ("" outside a cluster).
func (s *Server) ClusterAddr() string {
	if s.clusterLis == nil {
		return ""
	}
	return s.clusterLis.Addr().String()
}
