package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/latch-authz/latch/internal/buildinfo"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	"github.com/authzed/authzed-go/pkg/responsemeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/engine"
)

// Response metadata, as SpiceDB sends it (keys from authzed-go's responsemeta): every
// call's request id (the client's x-request-id, or one made up for the call); on every
// call of the authzed API, its work counts: how many subproblems the engine evaluated
// and how many it took from its cache; to a client that asks (zed version does), the
// server's version. SpiceDB sends all of them as trailers and no response header, and
// so does latch, even for a call whose handler panicked.
//
// The work counts are SpiceDB's "dispatched operations", which its hosted service bills
// by. A call that evaluates permissions reports the engine's counts, and at least one
// dispatch when it succeeds; any other call reports one dispatch when it succeeds. A
// failed call reports what it counted before failing: nothing, for one refused before
// its work (SpiceDB also counts one for a write its datastore refuses).

// countKind says what a method's trailers report of its work.
type countKind uint8

const (
	countsNone   countKind = iota // no work counts: calls outside the authzed API
	countsCall                    // one dispatch when the call succeeds
	countsEngine                  // the engine's counts
)

// engineMethods are the calls whose work counts the engine keeps.
var engineMethods = map[string]bool{
	v1.PermissionsService_CheckPermission_FullMethodName:      true,
	v1.PermissionsService_CheckBulkPermissions_FullMethodName: true,
	v1.ExperimentalService_BulkCheckPermission_FullMethodName: true,
	v1.PermissionsService_LookupResources_FullMethodName:      true,
	v1.PermissionsService_LookupSubjects_FullMethodName:       true,
	v1.PermissionsService_ExpandPermissionTree_FullMethodName: true,
}

// countsOf returns what method's trailers report of its work.
func countsOf(method string) countKind {
	switch {
	case engineMethods[method]:
		return countsEngine
	case strings.HasPrefix(method, "/authzed.api.v1."):
		return countsCall
	default:
		return countsNone
	}
}

type callMetaCtxKey struct{}

// serverVersion is the version of the latch module this binary was built from:
// "(devel)" for a build from a source tree, as SpiceDB's own such builds report.
var serverVersion = buildinfo.Read().Version

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
	version bool // the client asked for the server's version
	counts  countKind
	stats   engine.Stats // the engine's counts, or the handler's (countDispatches)
}

// newCallMeta settles the call's request id and returns the context that carries it
// with the call's work counts (for the logs and spans of the call, for the engine and
// for handlers that count their own work).
func newCallMeta(ctx context.Context, c countKind) (context.Context, *callMeta) {
	m := &callMeta{
		id:      requestID(ctx),
		version: len(metadata.ValueFromIncomingContext(ctx, string(requestmeta.RequestServerVersion))) > 0,
		counts:  c,
	}
	ctx = context.WithValue(ctx, callMetaCtxKey{}, m)
	if c == countsEngine {
		ctx = engine.WithStats(ctx, &m.stats)
	}
	return ctx, m
}

// callMetaFrom returns the callMeta of the call ctx belongs to, or nil.
func callMetaFrom(ctx context.Context) *callMeta {
	m, _ := ctx.Value(callMetaCtxKey{}).(*callMeta)
	return m
}

// countDispatches reports n dispatches for the call ctx belongs to, for a handler
// whose work SpiceDB counts by what it handled (WriteSchema: one per definition and
// caveat).
func countDispatches(ctx context.Context, n int) {
	if m := callMetaFrom(ctx); m != nil {
		m.stats.Dispatched.Store(int64(n))
	}
}

// sendTrailer hands to setTrailer the trailer of a call that ended with err.
func (m *callMeta) sendTrailer(err error, setTrailer func(metadata.MD)) {
	t := respMDs.Get().(*respMD)
	t.set(string(responsemeta.RequestID), m.id)
	if m.version {
		t.set(string(responsemeta.ServerVersion), serverVersion)
	}
	if m.counts != countsNone {
		dispatched, cached := m.stats.Dispatched.Load(), m.stats.Cached.Load()
		if err == nil && dispatched == 0 && cached == 0 {
			dispatched = 1
		}
		t.set(string(responsemeta.DispatchedOperationsCount), strconv.FormatInt(dispatched, 10))
		t.set(string(responsemeta.CachedOperationsCount), strconv.FormatInt(cached, 10))
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
