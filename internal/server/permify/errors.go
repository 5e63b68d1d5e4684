package permify

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// gRPC status codes, as numbers: Permify's HTTP errors are grpc-gateway's JSON
// google.rpc.Status, whose "code" is the gRPC code.
const (
	codeCanceled          = 1
	codeInvalidArgument   = 3
	codeDeadlineExceeded  = 4
	codeNotFound          = 5
	codeAlreadyExists     = 6
	codePermissionDenied  = 7
	codeResourceExhausted = 8
	codeFailedPrecond     = 9
	codeUnimplemented     = 12
	codeInternal          = 13
	codeUnavailable       = 14
	codeUnauthenticated   = 16
)

// httpStatus is grpc-gateway's mapping from gRPC code to HTTP status.
var httpStatus = map[int]int{
	codeCanceled: 499, codeInvalidArgument: http.StatusBadRequest, codeDeadlineExceeded: http.StatusGatewayTimeout,
	codeNotFound: http.StatusNotFound, codeAlreadyExists: http.StatusConflict, codePermissionDenied: http.StatusForbidden,
	codeResourceExhausted: http.StatusTooManyRequests, codeFailedPrecond: http.StatusBadRequest,
	codeUnimplemented: http.StatusNotImplemented, codeInternal: http.StatusInternalServerError,
	codeUnavailable: http.StatusServiceUnavailable, codeUnauthenticated: http.StatusUnauthorized,
}

// apiError is an error with its Permify shape: a gRPC code, Permify's ERROR_CODE_*
// reason (which Permify puts in "message"), and a sentence for people.
type apiError struct {
	code   int
	reason string
	msg    string
}

func (e *apiError) Error() string { return e.reason + ": " + e.msg }

// NewError builds an error in Permify's shape, for the server's Authorize hook.
func NewError(grpcCode int, reason, msg string) error {
	return &apiError{code: grpcCode, reason: reason, msg: msg}
}

func invalid(reason, msg string) error {
	return &apiError{code: codeInvalidArgument, reason: reason, msg: msg}
}

func notFound(reason, msg string) error {
	return &apiError{code: codeNotFound, reason: reason, msg: msg}
}

func quote(s string) string { return strconv.Quote(s) }

// toAPI maps domain errors to Permify errors; anything unknown is INTERNAL, without
// detail, so internals do not leak to clients.
func toAPI(err error) *apiError {
	var (
		ae    *apiError
		udef  *engine.UnknownDefinitionError
		urel  *engine.UnknownRelationError
		cav   *engine.CaveatEvalError
		diags *schema.DiagnosticsError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &udef):
		return &apiError{codeNotFound, "ERROR_CODE_ENTITY_DEFINITION_NOT_FOUND", udef.Error()}
	case errors.As(err, &urel):
		return &apiError{codeNotFound, "ERROR_CODE_PERMISSION_DEFINITION_NOT_FOUND", urel.Error()}
	case errors.As(err, &cav):
		return &apiError{codeInvalidArgument, "ERROR_CODE_INVALID_ARGUMENT", cav.Error()}
	case errors.As(err, &diags):
		return &apiError{codeInvalidArgument, "ERROR_CODE_SCHEMA_COMPILE", diags.Error()}
	case errors.Is(err, engine.ErrMaxDepth):
		return &apiError{codeInvalidArgument, "ERROR_CODE_DEPTH_NOT_ENOUGH", "the check recursed deeper than the depth limit"}
	case errors.Is(err, zedtoken.ErrMalformed):
		return &apiError{codeInvalidArgument, "ERROR_CODE_INVALID_ARGUMENT", err.Error()}
	case errors.Is(err, store.ErrRevisionGone):
		return &apiError{codeFailedPrecond, "ERROR_CODE_SNAP_TOKEN_EXPIRED", err.Error()}
	case errors.Is(err, store.ErrRevisionInFuture):
		return &apiError{codeInvalidArgument, "ERROR_CODE_INVALID_ARGUMENT", "snap token or schema version names a revision this server has not reached"}
	case errors.Is(err, store.ErrUnavailable):
		return &apiError{codeUnavailable, "ERROR_CODE_DATASTORE", err.Error()}
	case errors.Is(err, context.Canceled):
		return &apiError{codeCanceled, "ERROR_CODE_CANCELLED", "the request was cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{codeDeadlineExceeded, "ERROR_CODE_CANCELLED", "the request deadline passed"}
	}
	return &apiError{codeInternal, "ERROR_CODE_INTERNAL", "internal error"}
}

// writeError answers with Permify's error body: {"code", "message", "details"}.
func writeError(w http.ResponseWriter, err error) {
	e := toAPI(err)
	status, ok := httpStatus[e.code]
	if !ok {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{
		"code":    e.code,
		"message": e.reason,
		"details": []any{map[string]any{
			"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
			"reason":   e.reason,
			"domain":   "latch",
			"metadata": map[string]string{"detail": e.msg},
		}},
	})
}
