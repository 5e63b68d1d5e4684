package permify

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/server/apierr"
)

// apiError is an error with its Permify shape: a gRPC code, Permify's ERROR_CODE_*
// reason (which Permify puts in "message"), and a sentence for people.
type apiError struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *apiError) Error() string { return e.reason + ": " + e.msg }

// NewError builds an error in Permify's shape, for the server's Authorize hook.
func NewError(code codes.Code, reason, msg string) error {
	return &apiError{code: code, reason: reason, msg: msg}
}

// Overloaded is the answer to a request the server's admission control refused.
// Permify's own limiter answers that with gRPC's RESOURCE_EXHAUSTED (HTTP 429) and a
// sentence, not one of its ERROR_CODE_* names, and so does this.
func Overloaded(msg string) error { return &overloadedError{msg} }

type overloadedError struct{ msg string }

func (e *overloadedError) Error() string { return e.msg }

func invalid(reason, msg string) error {
	return &apiError{code: codes.InvalidArgument, reason: reason, msg: msg}
}

func notFound(reason, msg string) error {
	return &apiError{code: codes.NotFound, reason: reason, msg: msg}
}

func quote(s string) string { return strconv.Quote(s) }

// toAPI renders err in Permify's shape: an error this adapter raised as it is, a
// domain error as apierr classifies it, anything else as INTERNAL without detail, so
// internals do not leak to clients.
func toAPI(err error) *apiError {
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae
	}
	c, ok := apierr.Classify(err, nil)
	switch {
	case !ok:
		return &apiError{codes.Internal, "ERROR_CODE_INTERNAL", "internal error"}
	case c.Permify.Name != "":
		return &apiError{c.Permify.Code, c.Permify.Name, c.Message}
	}
	return &apiError{c.Code, permifyCode(c.Code), c.Message}
}

// permifyCode is Permify's error code for an error it has no more specific code for.
func permifyCode(code codes.Code) string {
	switch code {
	case codes.NotFound:
		return "ERROR_CODE_NOT_FOUND"
	case codes.AlreadyExists:
		return "ERROR_CODE_UNIQUE_CONSTRAINT"
	case codes.Unimplemented:
		return "ERROR_CODE_NOT_IMPLEMENTED"
	case codes.Unavailable:
		return "ERROR_CODE_DATASTORE"
	case codes.Canceled, codes.DeadlineExceeded:
		return "ERROR_CODE_CANCELLED"
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return "ERROR_CODE_INTERNAL"
	}
	return "ERROR_CODE_INVALID_ARGUMENT"
}

// WriteError answers with err in Permify's error shape, for the server's wrappers.
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }

// writeError answers with Permify's error body: {"code", "message", "details"}.
func writeError(w http.ResponseWriter, err error) {
	status, body := errorBody(err)
	writeJSON(w, status, body)
}

// errorBody is err's HTTP status and Permify's error body for it, which a stream also
// sends, as {"error": body}.
func errorBody(err error) (int, map[string]any) {
	e, message := toAPI(err), ""
	if o, ok := errors.AsType[*overloadedError](err); ok {
		e, message = &apiError{codes.ResourceExhausted, "RESOURCE_EXHAUSTED", o.msg}, apierr.Bound(o.msg)
	} else {
		message = e.reason
	}
	return runtime.HTTPStatusFromCode(e.code), map[string]any{
		"code":    e.code,
		"message": message,
		"details": []any{map[string]any{
			"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
			"reason":   e.reason,
			"domain":   "latch",
			"metadata": map[string]string{"detail": apierr.Bound(e.msg)},
		}},
	}
}
