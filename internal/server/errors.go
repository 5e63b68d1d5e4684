package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/server/apierr"
	"github.com/latch-authz/latch/internal/server/zedtoken"
)

// errorDomain is the ErrorInfo domain SpiceDB clients look for.
const errorDomain = "authzed.com"

// requestRules classify the errors this package raises about a request itself;
// apierr's table classifies everything from the layers below. Codes and reasons
// follow SpiceDB. First match wins.
var requestRules = []apierr.Rule{
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_TOO_MANY_UPDATES_IN_REQUEST, Match: tooMany(tooManyUpdates)},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_TOO_MANY_PRECONDITIONS_IN_REQUEST, Match: tooMany(tooManyPreconditions)},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_TOO_MANY_CHECKS_IN_REQUEST, Match: tooMany(tooManyChecks)},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP, Match: apierr.As(func(e *duplicateUpdateError) map[string]string {
		return map[string]string{"definition_name": e.rel.Resource.Type, "relationship": rel.String(e.rel)}
	})},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_MAX_RELATIONSHIP_CONTEXT_SIZE, Match: apierr.As(func(e *contextTooLargeError) map[string]string {
		return map[string]string{"relationship": rel.String(e.rel), "max_allowed_size": strconv.Itoa(e.max), "context_size": strconv.Itoa(e.size)}
	})},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT, Match: apierr.As(func(e *limitTooLargeError) map[string]string {
		return map[string]string{"limit_provided": strconv.Itoa(e.limit), "maximum_limit_allowed": strconv.Itoa(e.max)}
	})},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_INVALID_FILTER, Match: apierr.As(func(e *invalidFilterError) map[string]string {
		return map[string]string{"filter": e.filter}
	})},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE, Match: apierr.As(func(e *tooManyToDeleteError) map[string]string {
		return e.meta()
	})},
	// SpiceDB checks a precondition's filter as any other and finds it empty.
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_INVALID_FILTER, Match: apierr.As[*emptyPreconditionError](nil)},
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION, Match: apierr.As(func(e *notAPermissionError) map[string]string {
		return map[string]string{"definition_name": e.definition, "relation_or_permission_name": e.relation}
	})},
	{Code: codes.FailedPrecondition, Reason: v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR, Match: apierr.As(func(e *reflectUnknownDefinitionError) map[string]string {
		return map[string]string{"definition_name": e.name}
	})},
	{Code: codes.InvalidArgument, Match: apierr.As[*invalidTokenError](nil)},
	{Code: codes.FailedPrecondition, Match: apierr.As[*foreignTokenError](nil)},
	// SpiceDB answers a cursor it cannot decode with INVALID_ARGUMENT.
	{Code: codes.InvalidArgument, Reason: v1.ErrorReason_ERROR_REASON_INVALID_CURSOR, Match: apierr.As(func(e *invalidCursorError) map[string]string {
		return map[string]string{"reason": e.reason}
	})},
	{Code: codes.Unimplemented, Match: apierr.As[*unsupportedError](nil)},
	{Code: codes.InvalidArgument, Match: apierr.As[*counterNameError](nil)},
	{Code: codes.InvalidArgument, Match: apierr.As[*watchRequestError](nil)},
	{Code: codes.InvalidArgument, Match: apierr.As[*lookupRequestError](nil)},
	{Code: codes.FailedPrecondition, Match: apierr.As[*notConfiguredError](nil)},
	{Code: codes.FailedPrecondition, Match: apierr.As[*roaringIDError](nil)},
	{Code: codes.FailedPrecondition, Match: apierr.As[downloadUnavailableError](nil)},
	{Code: codes.NotFound, Match: apierr.As[*noSchemaError](nil)},
	// Relationship syntax, checked before the schema is consulted.
	{Code: codes.InvalidArgument, Match: apierr.As[*malformedRelationshipError](nil)},
}

// toStatus turns err into a gRPC status error. Errors that already carry a status
// pass unchanged; errors no rule knows become INTERNAL without their text (which
// may hold internal detail) and are logged.
func toStatus(log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if c, ok := apierr.Classify(err, requestRules); ok {
		if c.Code == codes.Unavailable {
			log.Warn("datastore unavailable", "err", err)
		}
		return newStatus(c).Err()
	}
	log.Error("internal error", "err", err)
	return status.Error(codes.Internal, "internal error")
}

// newStatus renders a class as SpiceDB does: the code and message, and an
// ErrorInfo in the authzed.com domain when there is a reason.
func newStatus(c apierr.Class) *status.Status {
	st := status.New(c.Code, c.Message)
	if c.Reason == v1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return st
	}
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: c.Reason.String(), Domain: errorDomain, Metadata: c.Meta})
	if err != nil {
		return st
	}
	return withInfo
}

// Errors this package raises about a request itself.

type tooManyKind string

const (
	tooManyUpdates       tooManyKind = "update"
	tooManyPreconditions tooManyKind = "precondition"
	tooManyChecks        tooManyKind = "check"
)

// tooManyError: a request carries more items than the server allows.
type tooManyError struct {
	kind       tooManyKind
	count, max int
}

func (e *tooManyError) Error() string {
	return fmt.Sprintf("%s count of %d is greater than maximum allowed of %d", e.kind, e.count, e.max)
}

// tooMany matches a tooManyError of one kind only, so each kind has its own reason.
func tooMany(kind tooManyKind) func(error) (map[string]string, bool) {
	return func(err error) (map[string]string, bool) {
		e, ok := errors.AsType[*tooManyError](err)
		if !ok || e.kind != kind {
			return nil, false
		}
		return map[string]string{string(kind) + "_count": strconv.Itoa(e.count), "maximum_" + string(kind) + "s_allowed": strconv.Itoa(e.max)}, true
	}
}

type duplicateUpdateError struct{ rel rel.Relationship }

func (e *duplicateUpdateError) Error() string {
	return fmt.Sprintf("found more than one update with relationship `%s` in this request; a relationship can only be specified in an update once per overall WriteRelationships request", rel.String(withoutCaveat(e.rel)))
}

type contextTooLargeError struct {
	rel       rel.Relationship
	size, max int
}

func (e *contextTooLargeError) Error() string {
	return fmt.Sprintf("relationship `%s` has a caveat context of %d bytes, more than the maximum allowed of %d", rel.String(withoutCaveat(e.rel)), e.size, e.max)
}

type limitTooLargeError struct{ limit, max int }

func (e *limitTooLargeError) Error() string {
	return fmt.Sprintf("provided limit %d is greater than maximum allowed of %d", e.limit, e.max)
}

type invalidFilterError struct{ filter, reason string }

func (e *invalidFilterError) Error() string {
	return "the relationship filter provided is not valid: " + e.reason
}

// tooManyToDeleteError: a delete matched more than its limit and partial deletion
// was not asked for.
type tooManyToDeleteError struct {
	filter *v1.RelationshipFilter
	limit  int
}

func (e *tooManyToDeleteError) Error() string {
	return fmt.Sprintf("found more than %d relationships to be deleted and partial deletion was not requested: raise optional_limit or set optional_allow_partial_deletions", e.limit)
}

// meta names the filter's fields as SpiceDB does (which leaves out an id prefix).
func (e *tooManyToDeleteError) meta() map[string]string {
	m := map[string]string{"limit": strconv.Itoa(e.limit)}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	f := e.filter
	put("filter_resource_type", f.GetResourceType())
	put("filter_resource_id", f.GetOptionalResourceId())
	put("filter_relation", f.GetOptionalRelation())
	put("filter_subject_type", f.GetOptionalSubjectFilter().GetSubjectType())
	put("filter_subject_id", f.GetOptionalSubjectFilter().GetOptionalSubjectId())
	put("filter_subject_relation", f.GetOptionalSubjectFilter().GetOptionalRelation().GetRelation())
	return m
}

type emptyPreconditionError struct{}

func (*emptyPreconditionError) Error() string {
	return "the relationship filter provided is not valid: at least one field must be set (in a precondition)"
}

// invalidTokenError: a token that is neither this server's nor SpiceDB's. The message
// starts as SpiceDB's does: for a watch's start cursor "failed to decode start
// revision", for a read's consistency "invalid revision requested".
type invalidTokenError struct {
	err   error
	watch bool
}

func (e *invalidTokenError) Error() string {
	if e.watch {
		return "failed to decode start revision: " + e.err.Error()
	}
	return "invalid revision requested: " + e.err.Error()
}
func (e *invalidTokenError) Unwrap() error { return e.err }

// foreignTokenError: a read at the exact snapshot of, or a watch from, a token
// SpiceDB issued, whose revision is not in this server's history.
type foreignTokenError struct{ err *zedtoken.ForeignError }

func (e *foreignTokenError) Error() string {
	return "cannot use a zedtoken issued by SpiceDB for an exact snapshot or a watch start: " + e.err.Error() +
		"; read with at_least_as_fresh (answered at the newest revision) or fully_consistent, or watch from a token this server issued"
}
func (e *foreignTokenError) Unwrap() error { return e.err }

type invalidCursorError struct{ reason string }

func (e *invalidCursorError) Error() string { return "error decoding cursor: " + e.reason }

type unsupportedError struct{ what string }

func (e *unsupportedError) Error() string { return e.what + " is not supported by this server" }

type noSchemaError struct{}

func (*noSchemaError) Error() string {
	return "no schema has been defined; please call WriteSchema to start"
}

// malformedRelationshipError: a relationship's names or ids break the syntax rules.
type malformedRelationshipError struct{ err error }

func (e *malformedRelationshipError) Error() string { return e.err.Error() }
func (e *malformedRelationshipError) Unwrap() error { return e.err }

func withoutCaveat(r rel.Relationship) rel.Relationship {
	r.Caveat = nil
	r.Expiration = nil
	return r
}
