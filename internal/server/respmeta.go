package server

import (
	"context"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	"github.com/authzed/authzed-go/pkg/responsemeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/engine"
)

// Response metadata, as SpiceDB sends it (keys from authzed-go's responsemeta): every
// call's request id (the client's x-request-id, or one made up for the call) and, on
// checks, how many subproblems the engine evaluated and how many it took from its
// cache. SpiceDB sends all of them as trailers; the request id also goes in the
// header, so that a stream's client (and a call that panicked) has it before the call
// ends. A client that asks (zed does) gets the server's version in the header.

// countedMethods are the calls whose trailers carry the engine's work counts.
var countedMethods = map[string]bool{
	v1.PermissionsService_CheckPermission_FullMethodName:      true,
	v1.PermissionsService_CheckBulkPermissions_FullMethodName: true,
	v1.ExperimentalService_BulkCheckPermission_FullMethodName: true,
}

type requestIDCtxKey struct{}

// serverVersion is the version of the latch module this binary was built from:
// "(devel)" for a build from a source tree, as SpiceDB's own such builds report.
var serverVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}()

// withRequestID settles the call's request id, sends it in the header, and returns
// the context that carries it (for the logs and spans of the call).
func withRequestID(ctx context.Context, setHeader func(metadata.MD) error) (context.Context, string) {
	id := requestID(ctx)
	header := metadata.Pairs(string(responsemeta.RequestID), id)
	if v := metadata.ValueFromIncomingContext(ctx, string(requestmeta.RequestServerVersion)); len(v) > 0 {
		header.Set(string(responsemeta.ServerVersion), serverVersion)
	}
	_ = setHeader(header) // fails only once the header is sent, not yet
	return context.WithValue(ctx, requestIDCtxKey{}, id), id
}

// trailer is the response trailer of a call with request id id and, when st is not
// nil, the engine's work counts.
func trailer(id string, st *engine.Stats) metadata.MD {
	md := metadata.Pairs(string(responsemeta.RequestID), id)
	if st != nil {
		md[string(responsemeta.DispatchedOperationsCount)] = []string{strconv.FormatInt(st.Dispatched.Load(), 10)}
		md[string(responsemeta.CachedOperationsCount)] = []string{strconv.FormatInt(st.Cached.Load(), 10)}
	}
	return md
}

func respMetaUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, id := withRequestID(ctx, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
	var st *engine.Stats
	if countedMethods[info.FullMethod] {
		st = new(engine.Stats)
		ctx = engine.WithStats(ctx, st)
	}
	resp, err := handler(ctx, req)
	_ = grpc.SetTrailer(ctx, trailer(id, st)) // fails only when the call's stream is gone
	return resp, err
}

func respMetaStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, id := withRequestID(ss.Context(), ss.SetHeader)
	err := handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	ss.SetTrailer(trailer(id, nil))
	return err
}

// ctxStream is a server stream with a context of the interceptor's making.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// httpRequestIDs gives every HTTP request a request id, as SpiceDB's gateway does: the
// client's X-Request-Id or a new one, passed on to the gRPC call (forwardHeader) and
// returned in the response's X-Request-Id header.
func httpRequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" {
			id = newRequestID()
			r.Header.Set("X-Request-Id", id)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}
