package openfga

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Gateway serves OpenFGA's HTTP API (/stores/...) through client, a connection to
// the gRPC service, as OpenFGA's own server does: its JSON (the protos' JSON names, every
// field), its error bodies, 201 for what creates.
func Gateway(ctx context.Context, client openfgav1.OpenFGAServiceClient) (http.Handler, error) {
	mux := runtime.NewServeMux(
		runtime.WithErrorHandler(gatewayErrors),
		runtime.WithRoutingErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, status int) {
			writeJSON(w, http.StatusNotFound, errorBody{openfgav1.NotFoundErrorCode_undefined_endpoint.String(), "Not Found"})
		}),
		runtime.WithIncomingHeaderMatcher(func(key string) (string, bool) {
			if strings.EqualFold(key, "X-Request-Id") {
				return "x-request-id", true
			}
			return runtime.DefaultHeaderMatcher(key)
		}),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(httpCode),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{Marshaler: &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}}),
	)
	if err := openfgav1.RegisterOpenFGAServiceHandlerClient(ctx, mux, client); err != nil {
		return nil, err
	}
	return mux, nil
}

// httpCodeKey is the response header by which a call asks the gateway for an HTTP
// status other than 200 (OpenFGA answers 201 to CreateStore and
// WriteAuthorizationModel).
const httpCodeKey = "x-http-code"

func setHTTPCode(ctx context.Context, code int) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(httpCodeKey, strconv.Itoa(code))) // fails only outside a call
}

func httpCode(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return nil
	}
	if v := md.HeaderMD.Get(httpCodeKey); len(v) > 0 {
		if code, err := strconv.Atoi(v[0]); err == nil {
			w.WriteHeader(code)
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
