package permify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// TestErrorsRenderTheSharedClassification: domain errors reach Permify clients as
// server/apierr classifies them, in Permify's body, with grpc-gateway's HTTP status.
func TestErrorsRenderTheSharedClassification(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   codes.Code
		reason string
	}{
		{&ir.UnknownDefinitionError{Name: "doc"}, http.StatusNotFound, codes.NotFound, "ERROR_CODE_SCHEMA_NOT_FOUND"},
		{fmt.Errorf("check: %w", engine.ErrMaxDepth), http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_DEPTH_NOT_ENOUGH"},
		{store.ErrRevisionGone, http.StatusBadRequest, codes.FailedPrecondition, "ERROR_CODE_SNAP_TOKEN_EXPIRED"},
		{fmt.Errorf("query: %w", store.ErrUnavailable), http.StatusServiceUnavailable, codes.Unavailable, "ERROR_CODE_DATASTORE"},
		{&store.AlreadyExistsError{Relationship: rel.Relationship{}}, http.StatusConflict, codes.AlreadyExists, "ERROR_CODE_UNIQUE_CONSTRAINT"},
		{&engine.CaveatEvalError{Caveat: "c", Err: errors.New("boom")}, http.StatusBadRequest, codes.InvalidArgument, "ERROR_CODE_INVALID_ARGUMENT"},
		{errors.New("dial tcp 10.1.2.3: secret"), http.StatusInternalServerError, codes.Internal, "ERROR_CODE_INTERNAL"},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, tc.err)
		var body struct {
			Code    codes.Code `json:"code"`
			Message string     `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || body.Code != tc.code || body.Message != tc.reason {
			t.Errorf("%v: HTTP %d code %s %s, want %d %s %s", tc.err, rec.Code, body.Code, body.Message, tc.status, tc.code, tc.reason)
		}
	}
}
