package cluster

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
)

// Handler answers a subproblem another node dispatched here, at its revision.
type Handler func(ctx context.Context, sp *engine.Subproblem) (*engine.Answers, error)

// ServiceOptions tune the dispatch service.
type ServiceOptions struct {
	// Delay holds every dispatch this long before answering it: a test hook that makes
	// this node a slow peer. Zero in production.
	Delay time.Duration
}

// NewServer returns the dispatch service's gRPC server, answering with h. Dispatches
// must carry the cluster's preshared key; identical dispatches arriving together are
// answered once.
func (c *Cluster) NewServer(h Handler, opts ServiceOptions) *grpc.Server {
	s := &service{h: h, key: "Bearer " + c.cfg.PresharedKey, m: c.metrics, delay: opts.Delay}
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodec(codec{}),
		// Reused goroutines keep the stacks a subproblem's evaluation grew; a fresh one per
		// dispatch grows its stack again each time (as the API server found).
		grpc.NumStreamWorkers(uint32(c.cfg.ConcurrencyLimit)),
		// A peer sends at most the limit's dispatches at once (its own bound); a
		// connection that sends more has the rest wait for a stream, not run at once.
		grpc.MaxConcurrentStreams(uint32(c.cfg.ConcurrencyLimit)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveTime / 2}),
	}
	if c.cfg.ServerTLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(c.cfg.ServerTLS)))
	}
	g := grpc.NewServer(gopts...)
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Check", Handler: s.check}, {MethodName: "Health", Handler: s.health}},
	}, s)
	return g
}

type service struct {
	h      Handler
	key    string
	m      *metrics
	delay  time.Duration
	flight singleflight.Group
}

func (s *service) check(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (resp any, err error) {
	s.m.received.Inc()
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, status.Errorf(codes.Internal, "dispatch panicked: %v", p)
		}
		if err != nil && !callerGone(ctx, err) {
			s.m.receivedErrs.Inc()
		}
	}()
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	var req frame
	if err := dec(&req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dispatch: %v", err)
	}
	sp, err := decodeSubproblem(req)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dispatch: %v", err)
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	answer := func() (any, error) {
		a, err := s.h(ctx, sp)
		if err != nil {
			return nil, err
		}
		out := encodeAnswers(a)
		return &out, nil
	}
	// The whole request names the subproblem, revision and depth included, so equal
	// bytes are one question. A recursion that comes back here is at a lower depth,
	// never the same bytes: it cannot wait on itself.
	v, err, _ := s.flight.Do(string(req), answer)
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The dispatch this one joined was abandoned by its caller; this one was not.
		v, err = answer()
	}
	if err != nil {
		return nil, answerError(err)
	}
	return v, nil
}

// answerError is the status a failed answer is sent back with: the handler's own
// status, InvalidArgument for a subproblem this node refuses, Unknown otherwise.
func answerError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, engine.ErrBadSubproblem) {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("dispatch: %v", err))
	}
	return status.Error(codes.Unknown, fmt.Sprintf("dispatch: %v", err))
}

// health answers a probe: the service is serving and the caller has the key.
func (s *service) health(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	var req frame
	if err := dec(&req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dispatch health: %v", err)
	}
	return &frame{}, nil
}

// callerGone reports whether a dispatch failed only because its caller stopped
// waiting: a hedge the caller's local answer won, or a client's own cancellation. The
// caller has its answer (or no longer wants one), so this node failed nothing.
func callerGone(ctx context.Context, err error) bool {
	return ctx.Err() != nil || status.Code(err) == codes.Canceled
}

// authorize requires the cluster's preshared key, compared in constant time.
func (s *service) authorize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if len(v) == len(s.key) && strings.EqualFold(v[:7], s.key[:7]) && subtle.ConstantTimeCompare([]byte(v[7:]), []byte(s.key[7:])) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "dispatch: missing or wrong cluster preshared key")
}
