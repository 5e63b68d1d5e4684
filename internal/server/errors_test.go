package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

func TestErrorTable(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	r := rel.Relationship{Resource: rel.ObjectRef{Type: "document", ID: "d"}, Relation: "viewer", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}}}
	for _, tc := range []struct {
		err    error
		code   codes.Code
		reason v1.ErrorReason
	}{
		{&ir.UnknownDefinitionError{Name: "x"}, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION},
		{fmt.Errorf("wrapped: %w", &ir.UnknownRelationError{Definition: "x", Name: "y"}), codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION},
		{engine.ErrMaxDepth, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED},
		{fmt.Errorf("query: %w", store.ErrUnavailable), codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{&engine.CaveatEvalError{Caveat: "c", Err: errors.New("bad")}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_EVALUATION_ERROR},
		{engine.ErrWildcardSubject, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED},
		{&store.AlreadyExistsError{Relationship: r}, codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP},
		{&store.PreconditionFailedError{Precondition: store.Precondition{Op: store.MustMatch, Filter: store.Filter{ResourceType: "document"}}}, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE},
		{&store.DuplicateUpdateError{Relationship: r}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP},
		{store.ErrTooManyToDelete, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE},
		{store.ErrInvalidCursor, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR},
		{store.ErrRevisionGone, codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{&tooManyError{tooManyUpdates, 5, 4}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_UPDATES_IN_REQUEST},
		{&tooManyError{tooManyPreconditions, 5, 4}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_PRECONDITIONS_IN_REQUEST},
		{&tooManyError{tooManyChecks, 5, 4}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_CHECKS_IN_REQUEST},
		{context.Canceled, codes.Canceled, v1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{status.Error(codes.Aborted, "as is"), codes.Aborted, v1.ErrorReason_ERROR_REASON_UNSPECIFIED},
	} {
		t.Run(fmt.Sprintf("%T", tc.err), func(t *testing.T) {
			wantCode(t, toStatus(log, tc.err), tc.code, tc.reason)
		})
	}
}

func TestUnknownErrorsDoNotLeak(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	for _, err := range []error{
		errors.New("dial tcp 10.1.2.3:5432: secret detail"),
		internalError{&ir.UnknownDefinitionError{Name: "hidden"}},
	} {
		st, _ := status.FromError(toStatus(log, err))
		if st.Code() != codes.Internal || st.Message() != "internal error" {
			t.Errorf("%v became %s %q, want INTERNAL without detail", err, st.Code(), st.Message())
		}
	}
	if !strings.Contains(logged.String(), "secret detail") {
		t.Error("the internal error was not logged")
	}
	if toStatus(log, nil) != nil {
		t.Error("toStatus(nil) is not nil")
	}
}
