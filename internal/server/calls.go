package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Every gRPC call takes the same way through the server, outermost first:
//  1. recover, so nothing below can take the process down;
//  2. response metadata: the call's trailers (respmeta.go);
//  3. metrics: the call's latency, by method and status code;
//  4. auth, so unauthenticated callers learn nothing about request shape;
//  5. admission;
//  6. validation of the request (of each message a stream receives).
//
// One interceptor of each kind takes every step, with what a method needs decided
// once per method (its route): grpc-go's interceptor chains make a closure per step
// for every call, and looking up a call's limiter and latency series by name each
// time showed in a check's profile.

// route is what the way through the server needs to know about one method.
type route struct {
	method  string
	exempt  bool      // served without a key
	counts  countKind // what the trailers report of the call's work
	limiter *limiter  // nil: not admitted
	// latency holds the method's latency series by status code, made at first use
	// so that /metrics lists only the codes a method has answered with.
	latency [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Observer]
}

// calls is the way through the server: its steps' state and each method's route.
type calls struct {
	log     *slog.Logger
	metrics *metrics
	auth    *authenticator
	adm     *admission
	routes  map[string]*route // every registered method; filled before serving, then only read
	// stallTimeout is how long an admitted stream's send may wait on its client
	// (stall.go).
	stallTimeout time.Duration
}

func newCalls(log *slog.Logger, m *metrics, auth *authenticator, adm *admission, stallTimeout time.Duration) *calls {
	return &calls{log: log, metrics: m, auth: auth, adm: adm, routes: map[string]*route{}, stallTimeout: stallTimeout}
}

// register adds the routes of every method g serves. It runs after the services are
// registered and before g serves.
func (c *calls) register(g *grpc.Server) {
	for svc, info := range g.GetServiceInfo() {
		for _, m := range info.Methods {
			method := "/" + svc + "/" + m.Name
			c.routes[method] = c.newRoute(method)
		}
	}
}

func (c *calls) newRoute(method string) *route {
	return &route{
		method:  method,
		exempt:  isExempt(method),
		counts:  countsOf(method),
		limiter: c.adm.limiterFor(method),
	}
}

// route returns method's route. A method the server does not serve never reaches the
// interceptors; one made up here serves all the same.
func (c *calls) route(method string) *route {
	if r, ok := c.routes[method]; ok {
		return r
	}
	return c.newRoute(method)
}

func (c *calls) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	r := c.route(info.FullMethod)
	ctx, meta := newCallMeta(ctx, r.counts)
	// The trailer goes after recoverCall has turned a panic into the call's error.
	defer func() { meta.sendTrailer(err, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }) }() // fails only when the call's stream is gone
	defer c.recoverCall(info.FullMethod, &err)
	start := time.Now()
	resp, err = c.serveUnary(ctx, r, req, handler)
	c.observe(ctx, r, start, err)
	return resp, err
}

// serveUnary takes a unary call through auth, admission and validation to its handler.
func (c *calls) serveUnary(ctx context.Context, r *route, req any, handler grpc.UnaryHandler) (any, error) {
	if err := c.admit(ctx, r); err != nil {
		return nil, err
	}
	if r.limiter != nil {
		defer r.limiter.release()
	}
	if err := validateMessage(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *calls) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	r := c.route(info.FullMethod)
	ctx, meta := newCallMeta(ss.Context(), r.counts)
	defer func() { meta.sendTrailer(err, ss.SetTrailer) }()
	defer c.recoverCall(info.FullMethod, &err)
	ss = &ctxStream{ServerStream: ss, ctx: ctx}
	start := time.Now()
	err = c.serveStream(ctx, r, srv, ss, handler)
	c.observe(ctx, r, start, err)
	return err
}

// serveStream takes a stream through auth and admission to its handler, which
// receives only valid messages.
func (c *calls) serveStream(ctx context.Context, r *route, srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	if err := c.admit(ctx, r); err != nil {
		return err
	}
	if r.limiter == nil {
		return handler(srv, &validatingStream{ServerStream: ss})
	}
	g := newStallGuard(ss, c.stallTimeout, r.limiter.release)
	defer g.finish()
	if err := handler(srv, &validatingStream{ServerStream: g}); !g.stalled {
		return err
	}
	return g.stallError() // whatever the handler made of it
}

// admit authenticates a call and takes its admission slot, if its method has a
// limiter; the caller releases the slot.
func (c *calls) admit(ctx context.Context, r *route) error {
	if !r.exempt {
		if err := c.auth.check(ctx); err != nil {
			return err
		}
	}
	if r.limiter == nil {
		return nil
	}
	if err := r.limiter.acquire(ctx); err != nil {
		return admissionStatus(err)
	}
	return nil
}

// observe records a finished call's latency and, when debug logs or the call's span
// want it, the call with its request id.
func (c *calls) observe(ctx context.Context, r *route, start time.Time, err error) {
	elapsed := time.Since(start)
	code := status.Code(err)
	c.latencyOf(r, code).Observe(elapsed.Seconds())
	c.metrics.traceCall(ctx, r.method, code, elapsed)
}

func (c *calls) latencyOf(r *route, code codes.Code) prometheus.Observer {
	if int(code) >= len(r.latency) {
		return c.metrics.latency.WithLabelValues(r.method, code.String())
	}
	if o := r.latency[code].Load(); o != nil {
		return *o
	}
	o := c.metrics.latency.WithLabelValues(r.method, code.String())
	r.latency[code].Store(&o) // two first calls may both store: the same series
	return o
}

// recoverCall, deferred, turns a panic in method's call into INTERNAL in *err and
// logs it with its stack. It is the last line of defence: handlers are written not to
// panic.
func (c *calls) recoverCall(method string, err *error) {
	if p := recover(); p != nil {
		c.log.Error("panic in request handler", "method", method, "panic", p, "stack", string(debug.Stack()))
		*err = status.Error(codes.Internal, "internal error")
	}
}

// exempt lists method prefixes served without a key: probes and tooling discovery,
// which SpiceDB also serves without one.
var exempt = []string{"/grpc.health.v1.Health/", "/grpc.reflection."}

func isExempt(method string) bool {
	for _, p := range exempt {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// validatingStream validates each message the handler receives.
type validatingStream struct{ grpc.ServerStream }

func (s *validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validateMessage(m)
}

// ctxStream is a server stream with a context of the interceptor's making.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
