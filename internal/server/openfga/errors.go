package openfga

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store"
)

// OpenFGA answers errors with its own codes in the gRPC status code (2000 and up for
// bad input, 5002 for an unknown store, ...), and its HTTP gateway renders them as
// {"code":"validation_error","message":"..."} with a status by range. This file
// makes both.

// fgaError is a status carrying one of OpenFGA's error codes.
func fgaError[C ~int32](code C, format string, args ...any) error {
	return status.Error(codes.Code(code), fmt.Sprintf(format, args...))
}

func validationError(format string, args ...any) error {
	return fgaError(openfgav1.ErrorCode_validation_error, format, args...)
}

func storeNotFound() error {
	return fgaError(openfgav1.NotFoundErrorCode_store_id_not_found, "Store ID not found")
}

func invalidContinuationToken() error {
	return fgaError(openfgav1.ErrorCode_invalid_continuation_token, "Invalid continuation token")
}

// validated runs a request's protoc-gen-validate rules (the openfga/api protos carry
// them; latch's middleware checks only buf.validate rules), answering a violation
// with OpenFGA's code for the field, as its server does.
func validated(m interface{ Validate() error }) error {
	err := m.Validate()
	if err == nil {
		return nil
	}
	return fgaError(fieldErrorCode(err.Error()), "%s", err.Error())
}

// fieldErrorCode picks OpenFGA's specific code for a rule violation on a field
// ("invalid CheckRequestTupleKey.User: value length must be at most 512 bytes"), or
// validation_error.
func fieldErrorCode(msg string) openfgav1.ErrorCode {
	msg, _ = strings.CutPrefix(msg, "invalid ")
	where, reason, ok := strings.Cut(msg, ": ")
	if !ok {
		return openfgav1.ErrorCode_validation_error
	}
	_, field, _ := strings.Cut(where, ".")
	if i := strings.IndexByte(field, '['); i >= 0 {
		field = field[:i]
	}
	for _, r := range fieldRules {
		if r.field == field && strings.HasPrefix(reason, r.reason) {
			return r.code
		}
	}
	return openfgav1.ErrorCode_validation_error
}

var fieldRules = []struct {
	field, reason string
	code          openfgav1.ErrorCode
}{
	{"Assertions", "value must contain no more than", openfgav1.ErrorCode_assertions_too_many_items},
	{"AuthorizationModelId", "value length must be at most", openfgav1.ErrorCode_authorization_model_id_too_long},
	{"Id", "value length must be at most", openfgav1.ErrorCode_id_too_long},
	{"Object", "value length must be at most", openfgav1.ErrorCode_object_too_long},
	{"Object", "value does not match regex pattern", openfgav1.ErrorCode_object_invalid_pattern},
	{"PageSize", "value must be inside range", openfgav1.ErrorCode_page_size_invalid},
	{"Relation", "value length must be at most", openfgav1.ErrorCode_relation_too_long},
	{"Relations", "value must contain at least", openfgav1.ErrorCode_relations_too_few_items},
	{"StoreId", "value length must be", openfgav1.ErrorCode_store_id_invalid_length},
	{"StoreId", "value does not match regex pattern", openfgav1.ErrorCode_store_id_invalid_length},
	{"TupleKey", "value is required", openfgav1.ErrorCode_tuple_key_value_not_specified},
	{"TupleKeys", "value must contain between", openfgav1.ErrorCode_tuple_keys_too_many_or_too_few_items},
	{"Type", "value length must be at", openfgav1.ErrorCode_type_invalid_length},
	{"Type", "value does not match regex pattern", openfgav1.ErrorCode_type_invalid_pattern},
	{"TypeDefinitions", "value must contain at least", openfgav1.ErrorCode_type_definitions_too_few_items},
}

// storeError maps what the datastore reports to OpenFGA's codes; a status passes
// through. Nothing internal is quoted to the client.
func storeError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fgaError(openfgav1.ErrorCode_cancelled, "Request Cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return fgaError(openfgav1.InternalErrorCode_deadline_exceeded, "Request Deadline Exceeded")
	case errors.Is(err, store.ErrUnavailable):
		return fgaError(openfgav1.InternalErrorCode_unavailable, "the datastore is unavailable; retry once it is back")
	case errors.Is(err, store.ErrCommitUnknown):
		return fgaError(openfgav1.InternalErrorCode_aborted, "%s", store.ErrCommitUnknown.Error())
	case errors.Is(err, store.ErrRevisionGone):
		return fgaError(openfgav1.ErrorCode_invalid_continuation_token, "the continuation token is older than the datastore's history; start again")
	}
	return fgaError(openfgav1.InternalErrorCode_internal_error, "Internal Server Error")
}

// errorBody is the JSON of an OpenFGA error.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// httpError renders a gRPC status the way OpenFGA's HTTP API does: its code's name
// and HTTP status. Latch's own statuses (auth, admission, gateway decoding) take the
// OpenFGA code OpenFGA gives the same condition.
func httpError(st *status.Status, hadBearer bool) (int, errorBody) {
	code := int32(st.Code())
	msg := st.Message()
	if code < 1000 {
		code = int32(fromGRPC(st.Code(), hadBearer))
		if st.Code() == codes.InvalidArgument {
			msg = strings.TrimSpace(strings.TrimPrefix(msg, "proto:"))
		}
	}
	switch {
	case code < 2000:
		name := openfgav1.AuthErrorCode(code).String()
		if code == int32(openfgav1.AuthErrorCode_forbidden) {
			return http.StatusForbidden, errorBody{name, msg}
		}
		return http.StatusUnauthorized, errorBody{name, msg}
	case code < 3000:
		return http.StatusBadRequest, errorBody{openfgav1.ErrorCode(code).String(), msg}
	case code < 4000:
		return http.StatusUnprocessableEntity, errorBody{openfgav1.UnprocessableContentErrorCode(code).String(), msg}
	case code < 5000:
		return internalStatus(openfgav1.InternalErrorCode(code)), errorBody{openfgav1.InternalErrorCode(code).String(), msg}
	}
	if code == int32(openfgav1.NotFoundErrorCode_unimplemented) {
		return http.StatusNotImplemented, errorBody{openfgav1.NotFoundErrorCode(code).String(), msg}
	}
	return http.StatusNotFound, errorBody{openfgav1.NotFoundErrorCode(code).String(), msg}
}

func internalStatus(c openfgav1.InternalErrorCode) int {
	switch c {
	case openfgav1.InternalErrorCode_resource_exhausted:
		return http.StatusTooManyRequests
	case openfgav1.InternalErrorCode_unavailable:
		return http.StatusServiceUnavailable
	case openfgav1.InternalErrorCode_deadline_exceeded:
		return http.StatusGatewayTimeout
	case openfgav1.InternalErrorCode_aborted, openfgav1.InternalErrorCode_already_exists:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// fromGRPC is OpenFGA's code for a standard gRPC status.
func fromGRPC(c codes.Code, hadBearer bool) int32 {
	switch c {
	case codes.Unauthenticated:
		if !hadBearer {
			return int32(openfgav1.AuthErrorCode_bearer_token_missing)
		}
		return int32(openfgav1.AuthErrorCode_unauthenticated)
	case codes.PermissionDenied:
		return int32(openfgav1.AuthErrorCode_forbidden)
	case codes.InvalidArgument:
		return int32(openfgav1.ErrorCode_validation_error)
	case codes.Canceled:
		return int32(openfgav1.ErrorCode_cancelled)
	case codes.DeadlineExceeded:
		return int32(openfgav1.InternalErrorCode_deadline_exceeded)
	case codes.NotFound:
		return int32(openfgav1.NotFoundErrorCode_undefined_endpoint)
	case codes.Unimplemented:
		return int32(openfgav1.NotFoundErrorCode_unimplemented)
	case codes.AlreadyExists:
		return int32(openfgav1.InternalErrorCode_already_exists)
	case codes.ResourceExhausted:
		return int32(openfgav1.InternalErrorCode_resource_exhausted)
	case codes.FailedPrecondition:
		return int32(openfgav1.InternalErrorCode_failed_precondition)
	case codes.Aborted:
		return int32(openfgav1.InternalErrorCode_aborted)
	case codes.OutOfRange:
		return int32(openfgav1.InternalErrorCode_out_of_range)
	case codes.Unavailable:
		return int32(openfgav1.InternalErrorCode_unavailable)
	case codes.DataLoss:
		return int32(openfgav1.InternalErrorCode_data_loss)
	}
	return int32(openfgav1.InternalErrorCode_internal_error)
}

// gatewayErrors is the HTTP gateway's error handler: OpenFGA's JSON error body.
func gatewayErrors(_ context.Context, _ *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st, _ := status.FromError(err)
	code, body := httpError(st, r.Header.Get("Authorization") != "")
	writeJSON(w, code, body)
}
