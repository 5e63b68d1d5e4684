package server

import (
	"context"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	"github.com/authzed/authzed-go/pkg/responsemeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/engine"
)

// Response metadata, as SpiceDB sends it (keys from authzed-go's responsemeta): every
// call's request id (the client's x-request-id, or one made up for the call) and, on
// checks, how many subproblems the engine evaluated and how many it took from its
// cache; to a client that asks (zed version does), the server's version. SpiceDB
// sends all of them as trailers and no response header, and so does latch, even for
// a call whose handler panicked.

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

// respMD is response metadata of up to four keys, pooled: grpc-go copies what it is
// given to send, so the maps and their values are reused from call to call.
type respMD struct {
	md   metadata.MD
	vals [4]string
	n    int
}

var respMDs = sync.Pool{New: func() any { return &respMD{md: make(metadata.MD, 4)} }}

// set adds key, which must be lower case, with the one value v.
func (r *respMD) set(key, v string) {
	r.vals[r.n] = v
	r.md[key] = r.vals[r.n : r.n+1 : r.n+1]
	r.n++
}

// send hands the metadata to send (grpc-go's SetTrailer, which copies it) and
// returns it to the pool.
func (r *respMD) send(send func(metadata.MD)) {
	send(r.md)
	clear(r.md)
	r.vals, r.n = [4]string{}, 0
	respMDs.Put(r)
}

// callMeta is what a call's trailers report.
type callMeta struct {
	id      string
	version bool          // the client asked for the server's version
	stats   *engine.Stats // nil: the call reports no work counts
}

// newCallMeta settles the call's request id and, for a call that reports the engine's
// work counts, its Stats, and returns the context that carries them (for the logs and
// spans of the call, and for the engine).
func newCallMeta(ctx context.Context, counted bool) (context.Context, *callMeta) {
	m := &callMeta{
		id:      requestID(ctx),
		version: len(metadata.ValueFromIncomingContext(ctx, string(requestmeta.RequestServerVersion))) > 0,
	}
	ctx = context.WithValue(ctx, requestIDCtxKey{}, m.id)
	if counted {
		m.stats = new(engine.Stats)
		ctx = engine.WithStats(ctx, m.stats)
	}
	return ctx, m
}

// sendTrailer hands the call's trailer to setTrailer.
func (m *callMeta) sendTrailer(setTrailer func(metadata.MD)) {
	t := respMDs.Get().(*respMD)
	t.set(string(responsemeta.RequestID), m.id)
	if m.version {
		t.set(string(responsemeta.ServerVersion), serverVersion)
	}
	if m.stats != nil {
		t.set(string(responsemeta.DispatchedOperationsCount), strconv.FormatInt(m.stats.Dispatched.Load(), 10))
		t.set(string(responsemeta.CachedOperationsCount), strconv.FormatInt(m.stats.Cached.Load(), 10))
	}
	t.send(setTrailer)
}

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
