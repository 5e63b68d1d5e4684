package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/authzed/authzed-go/pkg/responsemeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/logging"
	"github.com/latch-authz/latch/internal/server/apierr"
	"github.com/latch-authz/latch/internal/server/playground"
)

// newGateway builds the HTTP/JSON gateway on SpiceDB's paths (POST /v1/permissions/check,
// /v1/schema/read, ...). It forwards over a loopback gRPC connection to this server,
// so auth, validation, limits and error mapping are exactly the gRPC ones, and
// streaming calls (ReadRelationships) work, which the in-process handlers cannot do.
// The Authorization header is forwarded as gRPC metadata.
func (s *Server) newGateway() error {
	creds := insecure.NewCredentials()
	if s.grpcTLS != nil {
		creds = credentials.NewTLS(s.grpcTLS.Self())
	}
	conn, err := grpc.NewClient(s.grpcLis.Addr().String(),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(s.cfg.MaxRequestBytes+1<<10)),
	)
	if err != nil {
		return err
	}
	s.gwConn = conn
	mux := runtime.NewServeMux(runtime.WithHealthzEndpoint(healthpb.NewHealthClient(conn)),
		runtime.WithIncomingHeaderMatcher(forwardHeader), runtime.WithOutgoingHeaderMatcher(returnHeader), runtime.WithErrorHandler(boundedErrors),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, strictJSON))
	ctx := context.Background()
	if err := v1.RegisterSchemaServiceHandlerClient(ctx, mux, v1.NewSchemaServiceClient(conn)); err != nil {
		return err
	}
	if err := v1.RegisterPermissionsServiceHandlerClient(ctx, mux, v1.NewPermissionsServiceClient(conn)); err != nil {
		return err
	}
	if err := v1.RegisterExperimentalServiceHandlerClient(ctx, mux, v1.NewExperimentalServiceClient(conn)); err != nil {
		return err
	}
	if err := v1.RegisterWatchServiceHandlerClient(ctx, mux, v1.NewWatchServiceClient(conn)); err != nil {
		return err
	}
	handler, closePermify, err := s.withPermify(mux)
	if err != nil {
		return err
	}
	s.closePermify = closePermify
	if handler, err = s.withOpenFGA(handler); err != nil {
		return err
	}
	if s.cfg.playgroundEnabled() {
		s.playground = playground.New(playground.Config{MaxDepth: s.cfg.MaxDepth, Timeout: s.cfg.PlaygroundTimeout, Key: s.cfg.PlaygroundPresharedKey})
		handler = withPlayground(s.adm.guard(playgroundSurface, s.playground), handler)
	}
	s.http = &http.Server{
		Handler:           httpRequestIDs(s.limitBody(handler)),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logging.StdLogger(s.cfg.Logger),
	}
	return nil
}

// withPlayground serves the playground page and its API under /playground, and the
// gateway's OpenAPI document at /openapi.json, beside next. Neither needs an API key (the
// playground may have a key of its own): the playground runs on scratch stores of its
// own and never reads this server's data, and the document describes the API, as
// SpiceDB's does without a key.
func withPlayground(pg http.Handler, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/playground", pg)
	mux.Handle("/playground/", pg)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	mux.Handle("/", next)
	return mux
}

// strictJSON is grpc-gateway's default JSON, but refusing a field the message does not
// have: a misspelled "consistncy" is named in a 400 rather than silently dropped, which
// would run the request with the default it was meant to override.
var strictJSON = &runtime.HTTPBodyMarshaler{Marshaler: &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
}}

// playgroundSurface admits the playground's evaluations in their own small class,
// which yields to the API; its page and assets are files, served without a turn.
var playgroundSurface = httpSurface{
	classOf: func(r *http.Request) admissionClass {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/playground/api/") {
			return classPlayground
		}
		return ""
	},
	overloaded: func(w http.ResponseWriter, err *overloadError) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "the playground is busy: " + err.Error()})
	},
}

// boundedErrors is grpc-gateway's error handler with the message cut to a bounded
// prefix: a body the gateway cannot decode comes back quoting the offending value,
// however large.
func boundedErrors(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if st, ok := status.FromError(err); ok {
		if msg := apierr.Bound(st.Message()); msg != st.Message() {
			p := st.Proto()
			p.Message = msg
			err = status.ErrorProto(p)
		}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
}

// limitBody bounds request bodies like gRPC's MaxRecvMsgSize bounds messages. A body
// of unknown length (chunked) is read here, up to the limit, so that one too large is
// answered 413 like a sized one, not with whatever error the handler's decoder makes
// of a cut-off body (the gateway's 400, the Permify API's 429).
func (s *Server) limitBody(next http.Handler) http.Handler {
	limit := int64(s.cfg.MaxRequestBytes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tooLarge(w, r.ContentLength, s.cfg.MaxRequestBytes)
			return
		}
		if r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if int64(len(body)) > limit {
				tooLarge(w, -1, s.cfg.MaxRequestBytes)
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// tooLarge answers an oversized body the way the gateway answers errors: a JSON
// google.rpc.Status, here RESOURCE_EXHAUSTED, with HTTP 413.
func tooLarge(w http.ResponseWriter, size int64, limit int) {
	msg := fmt.Sprintf("request body of %d bytes is larger than the maximum of %d bytes", size, limit)
	if size < 0 {
		msg = fmt.Sprintf("request body is larger than the maximum of %d bytes", limit)
	}
	body, _ := json.Marshal(map[string]any{"code": int(codes.ResourceExhausted), "message": msg, "details": []any{}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write(body)
}

// forwardHeader passes the gateway's default headers and X-Request-Id to the gRPC call,
// so a request id set by an HTTP client reaches the logs.
func forwardHeader(key string) (string, bool) {
	if strings.EqualFold(key, "X-Request-Id") {
		return "x-request-id", true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// returnHeader passes gRPC response headers back as Grpc-Metadata-* headers, as the
// gateway does by default, except the request id: httpRequestIDs already returns it as
// X-Request-Id, the one header SpiceDB's gateway sends.
func returnHeader(key string) (string, bool) {
	if key == string(responsemeta.RequestID) {
		return "", false
	}
	return runtime.MetadataHeaderPrefix + key, true
}
