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

// respMD is response metadata of up to three keys, pooled: grpc-go copies what it is
// given to send, so the maps and their values are reused from call to call.
type respMD struct {
	md   metadata.MD
	vals [3]string
	n    int
}

var respMDs = sync.Pool{New: func() any { return &respMD{md: make(metadata.MD, 3)} }}

// set adds key, which must be lower case, with the one value v.
func (r *respMD) set(key, v string) {
	r.vals[r.n] = v
	r.md[key] = r.vals[r.n : r.n+1 : r.n+1]
	r.n++
}

// send hands the metadata to send (grpc-go's SetHeader or SetTrailer, which copy
// it) and returns it to the pool.
func (r *respMD) send(send func(*respMD)) {
	send(r)
	clear(r.md)
	r.vals, r.n = [3]string{}, 0
	respMDs.Put(r)
}

// withRequestID settles the call's request id, sends it in the header, and returns
// the context that carries it (for the logs and spans of the call).
func withRequestID(ctx context.Context, setHeader func(*respMD)) (context.Context, string) {
	id := requestID(ctx)
	h := respMDs.Get().(*respMD)
	h.set(string(responsemeta.RequestID), id)
	if v := metadata.ValueFromIncomingContext(ctx, string(requestmeta.RequestServerVersion)); len(v) > 0 {
		h.set(string(responsemeta.ServerVersion), serverVersion)
	}
	h.send(setHeader)
	return context.WithValue(ctx, requestIDCtxKey{}, id), id
}

// sendTrailer sends the response trailer of a call with request id id and, when st
// is not nil, the engine's work counts.
func sendTrailer(id string, st *engine.Stats, setTrailer func(*respMD)) {
	t := respMDs.Get().(*respMD)
	t.set(string(responsemeta.RequestID), id)
	if st != nil {
		t.set(string(responsemeta.DispatchedOperationsCount), strconv.FormatInt(st.Dispatched.Load(), 10))
		t.set(string(responsemeta.CachedOperationsCount), strconv.FormatInt(st.Cached.Load(), 10))
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
