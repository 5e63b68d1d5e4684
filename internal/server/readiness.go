package server

import (
	"context"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// readinessInterval is how often the datastore is probed for health reporting, and
// how long one probe may take before the datastore counts as unreachable.
const readinessInterval = time.Second

// probeDatastore reports the health services NOT_SERVING while the datastore cannot
// answer for its newest revision, and SERVING again once it can, so that a load
// balancer (gRPC health checks, or the gateway's /healthz) sends traffic elsewhere
// during an outage. It returns when ctx is done.
func (s *Server) probeDatastore(ctx context.Context) {
	tick := time.NewTicker(readinessInterval)
	defer tick.Stop()
	serving := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		probe, cancel := context.WithTimeout(ctx, readinessInterval)
		_, err := s.store.HeadRevision(probe)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if up := err == nil; up != serving {
			serving = up
			st := healthpb.HealthCheckResponse_SERVING
			if up {
				s.cfg.Logger.Info("datastore reachable again: serving")
			} else {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				s.cfg.Logger.Warn("datastore unreachable: reporting NOT_SERVING", "err", err)
			}
			for _, name := range healthServices {
				s.health.SetServingStatus(name, st)
			}
		}
	}
}
