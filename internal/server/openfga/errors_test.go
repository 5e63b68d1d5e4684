package openfga

import (
	"net/http"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHTTPErrors holds the HTTP rendering of OpenFGA's codes and of latch's own
// statuses to OpenFGA's: its status by range, its code's name.
func TestHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		st        *status.Status
		hadBearer bool
		code      int
		name      string
	}{
		{status.New(codes.Code(openfgav1.ErrorCode_validation_error), "bad"), true, http.StatusBadRequest, "validation_error"},
		{status.New(codes.Code(openfgav1.NotFoundErrorCode_store_id_not_found), "gone"), true, http.StatusNotFound, "store_id_not_found"},
		{status.New(codes.Code(openfgav1.InternalErrorCode_internal_error), "oops"), true, http.StatusInternalServerError, "internal_error"},
		{status.New(codes.Unauthenticated, "no key"), false, http.StatusUnauthorized, "bearer_token_missing"},
		{status.New(codes.Unauthenticated, "wrong key"), true, http.StatusUnauthorized, "unauthenticated"},
		{status.New(codes.PermissionDenied, "wrong key"), true, http.StatusForbidden, "forbidden"},
		{status.New(codes.ResourceExhausted, "overloaded"), true, http.StatusTooManyRequests, "resource_exhausted"},
		{status.New(codes.InvalidArgument, "proto: syntax error"), true, http.StatusBadRequest, "validation_error"},
		{status.New(codes.Unimplemented, "off"), true, http.StatusNotImplemented, "unimplemented"},
	} {
		code, body := httpError(c.st, c.hadBearer)
		if code != c.code || body.Code != c.name {
			t.Errorf("%v: %d %s, want %d %s", c.st, code, body.Code, c.code, c.name)
		}
	}
}

func TestFieldErrorCodes(t *testing.T) {
	for msg, want := range map[string]openfgav1.ErrorCode{
		"invalid CheckRequestTupleKey.Object: value length must be at most 256 bytes":                  openfgav1.ErrorCode_object_too_long,
		"invalid ListStoresRequest.PageSize: value must be inside range [1, 100]":                      openfgav1.ErrorCode_page_size_invalid,
		"invalid WriteRequestWrites.TupleKeys[0]: embedded message failed validation":                  openfgav1.ErrorCode_validation_error,
		"invalid GetStoreRequest.StoreId: value does not match regex pattern \"^[ABCDEFGHJKMNP]{26}\"": openfgav1.ErrorCode_validation_error,
		"not a rule violation": openfgav1.ErrorCode_validation_error,
	} {
		if got := fieldErrorCode(msg); got != want {
			t.Errorf("%s: %v, want %v", msg, got, want)
		}
	}
}
