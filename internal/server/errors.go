package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relcounter"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schemachange"
	"github.com/latch-authz/latch/internal/store"
)

// errorDomain is the ErrorInfo domain SpiceDB clients look for.
const errorDomain = "authzed.com"

// rule maps one kind of error to a gRPC code and an ErrorReason. match returns the
// ErrorInfo metadata when err is of its kind.
type rule struct {
	code   codes.Code
	reason v1.ErrorReason
	match  func(error) (map[string]string, bool)
}

// as matches errors of type T anywhere in the chain.
func as[T error](meta func(T) map[string]string) func(error) (map[string]string, bool) {
	return func(err error) (map[string]string, bool) {
		t, ok := errors.AsType[T](err)
		if !ok {
			return nil, false
		}
		if meta == nil {
			return nil, true
		}
		return meta(t), true
	}
}

// is matches a sentinel error anywhere in the chain.
func is(target error) func(error) (map[string]string, bool) {
	return func(err error) (map[string]string, bool) { return nil, errors.Is(err, target) }
}

// rules is THE error-mapping table: every error a lower layer (engine, store, schema,
// rel, caveat) or this package returns is translated here and nowhere else. Codes and
// reasons follow SpiceDB, so clients written for it branch the same way. First match wins.
var rules = []rule{
	// Request shape, checked by this package.
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_UPDATES_IN_REQUEST, tooMany(tooManyUpdates)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_PRECONDITIONS_IN_REQUEST, tooMany(tooManyPreconditions)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_CHECKS_IN_REQUEST, tooMany(tooManyChecks)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP, as(func(e *duplicateUpdateError) map[string]string {
		return map[string]string{"definition_name": e.rel.Resource.Type, "relationship": rel.String(e.rel)}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_MAX_RELATIONSHIP_CONTEXT_SIZE, as(func(e *contextTooLargeError) map[string]string {
		return map[string]string{"relationship": rel.String(e.rel), "max_allowed_size": strconv.Itoa(e.max), "context_size": strconv.Itoa(e.size)}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_EXCEEDS_MAXIMUM_ALLOWABLE_LIMIT, as(func(e *limitTooLargeError) map[string]string {
		return map[string]string{"limit_provided": strconv.Itoa(e.limit), "maximum_limit_allowed": strconv.Itoa(e.max)}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_FILTER, as(func(e *invalidFilterError) map[string]string {
		return map[string]string{"filter": e.filter}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_EMPTY_PRECONDITION, as[*emptyPreconditionError](nil)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*notAPermissionError](nil)},
	{codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*relcounter.ExistsError](nil)},
	{codes.NotFound, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*relcounter.UnknownError](nil)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*invalidTokenError](nil)},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR, as(func(e *invalidCursorError) map[string]string {
		return map[string]string{"reason": e.reason}
	})},
	{codes.Unimplemented, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*unsupportedError](nil)},
	{codes.NotFound, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*noSchemaError](nil)},
	// SpiceDB refuses a schema that would orphan data with INVALID_ARGUMENT and
	// SCHEMA_TYPE_ERROR; so do we.
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR, as(func(e *schemachange.Error) map[string]string { return e.Details })},

	// Relationship syntax, checked before the schema is consulted.
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*malformedRelationshipError](nil)},

	// Schema validation of relationships and filters.
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION, as(func(e *ir.UnknownDefinitionError) map[string]string {
		return map[string]string{"definition_name": e.Name}
	})},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION, as(func(e *ir.UnknownRelationError) map[string]string {
		return map[string]string{"definition_name": e.Definition, "relation_or_permission_name": e.Name}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CANNOT_UPDATE_PERMISSION, as(func(e *ir.CannotWritePermissionError) map[string]string {
		return map[string]string{"definition_name": e.Definition, "permission_name": e.Permission}
	})},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_CAVEAT, as(func(e *ir.UnknownCaveatError) map[string]string {
		return map[string]string{"caveat_name": e.Name}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, as(func(e *ir.SubjectNotAllowedError) map[string]string {
		return subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, as(func(e *ir.WildcardNotAllowedError) map[string]string {
		return subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, as(func(e *ir.CaveatRequiredError) map[string]string {
		m := subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
		m["allowed_caveats"] = strings.Join(e.Caveats, ",")
		return m
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR, as(func(e *ir.CaveatContextError) map[string]string {
		return map[string]string{"caveat_name": e.Caveat}
	})},

	// Schema compiler.
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR, as(diagnosticsMeta)},

	// Engine.
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION, as(func(e *engine.UnknownDefinitionError) map[string]string {
		return map[string]string{"definition_name": e.Name}
	})},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION, as(func(e *engine.UnknownRelationError) map[string]string {
		return map[string]string{"definition_name": e.Definition, "relation_or_permission_name": e.Name}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_EVALUATION_ERROR, as(func(e *engine.CaveatEvalError) map[string]string {
		return map[string]string{"caveat_name": e.Caveat}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED, func(err error) (map[string]string, bool) {
		return map[string]string{"disallowed_field": "subject_id"}, errors.Is(err, engine.ErrWildcardSubject)
	}},
	{codes.ResourceExhausted, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED, is(engine.ErrMaxDepth)},

	// Store.
	{codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP, as(func(e *store.AlreadyExistsError) map[string]string {
		return relationshipMeta(e.Relationship)
	})},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE, as(func(e *store.PreconditionFailedError) map[string]string {
		return preconditionMeta(e.Precondition)
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP, as(func(e *store.DuplicateUpdateError) map[string]string {
		return map[string]string{"definition_name": e.Relationship.Resource.Type, "relationship": rel.String(e.Relationship)}
	})},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, as[*store.InvalidUpdateError](nil)},
	{codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE, is(store.ErrTooManyToDelete)},
	{codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR, is(store.ErrInvalidCursor)},
	{codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, is(store.ErrRevisionGone)},
	{codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, is(store.ErrRevisionInFuture)},
	// A watcher that does not read fast enough is cut off; SpiceDB uses this code too.
	{codes.ResourceExhausted, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, is(store.ErrWatchLagging)},

	// Cancellation.
	{codes.Canceled, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, is(context.Canceled)},
	{codes.DeadlineExceeded, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, is(context.DeadlineExceeded)},
}

// toStatus turns err into a gRPC status error through rules. Errors that already carry
// a status pass unchanged; errors no rule knows become INTERNAL without their text
// (which may hold internal detail) and are logged.
func toStatus(log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if st := statusOf(err); st != nil {
		return st.Err()
	}
	log.Error("internal error", "err", err)
	return status.Error(codes.Internal, "internal error")
}

// statusOf returns the status rules give err, or nil when no rule matches.
func statusOf(err error) *status.Status {
	for _, r := range rules {
		meta, ok := r.match(err)
		if !ok {
			continue
		}
		return newStatus(r.code, r.reason, messageFor(r, err), meta)
	}
	return nil
}

// messageFor adds, where SpiceDB does, advice on what to do next.
func messageFor(r rule, err error) string {
	if d, ok := errors.AsType[*schema.DiagnosticsError](err); ok {
		return diagnosticsMessage(d)
	}
	switch r.reason {
	case v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED:
		return err.Error() + ": this usually means the data has a cycle or nests deeper than the server's max depth"
	case v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE:
		return err.Error() + ": raise optional_limit or set optional_allow_partial_deletions"
	}
	if r.code == codes.OutOfRange {
		return "invalid zedtoken: " + err.Error()
	}
	return err.Error()
}

func newStatus(code codes.Code, reason v1.ErrorReason, msg string, meta map[string]string) *status.Status {
	st := status.New(code, msg)
	if reason == v1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return st
	}
	if meta == nil {
		meta = map[string]string{}
	}
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain, Metadata: meta})
	if err != nil {
		return st
	}
	return withInfo
}

func relationshipMeta(r rel.Relationship) map[string]string {
	return map[string]string{
		"relationship":       rel.String(r),
		"resource_type":      r.Resource.Type,
		"resource_object_id": r.Resource.ID,
		"resource_relation":  r.Relation,
		"subject_type":       r.Subject.Object.Type,
		"subject_object_id":  r.Subject.Object.ID,
		"subject_relation":   r.Subject.Relation,
	}
}

func preconditionMeta(p store.Precondition) map[string]string {
	op := "MUST_MATCH"
	if p.Op == store.MustNotMatch {
		op = "MUST_NOT_MATCH"
	}
	m := map[string]string{"precondition_operation": op}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("precondition_resource_type", p.Filter.ResourceType)
	if len(p.Filter.ResourceIDs) == 1 {
		put("precondition_resource_id", p.Filter.ResourceIDs[0])
	}
	put("precondition_resource_id_prefix", p.Filter.ResourceIDPrefix)
	put("precondition_relation", p.Filter.Relation)
	if sf := p.Filter.Subject; sf != nil {
		put("precondition_subject_type", sf.Type)
		if len(sf.IDs) == 1 {
			put("precondition_subject_id", sf.IDs[0])
		}
		if sf.RelationSet {
			put("precondition_subject_relation", sf.Relation)
		}
	}
	return m
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

type emptyPreconditionError struct{}

func (*emptyPreconditionError) Error() string {
	return "one of the specified preconditions is empty: give its filter at least a resource type"
}

type invalidTokenError struct{ err error }

func (e *invalidTokenError) Error() string { return "invalid zedtoken: " + e.err.Error() }
func (e *invalidTokenError) Unwrap() error { return e.err }

type invalidCursorError struct{ reason string }

func (e *invalidCursorError) Error() string { return "the cursor provided is not valid: " + e.reason }

type unsupportedError struct{ what string }

func (e *unsupportedError) Error() string { return e.what + " is not supported by this server" }

type noSchemaError struct{}

func (*noSchemaError) Error() string {
	return "No schema has been defined; please call WriteSchema to start"
}

// malformedRelationshipError: a relationship's names or ids break the syntax rules.
type malformedRelationshipError struct{ err error }

func (e *malformedRelationshipError) Error() string { return e.err.Error() }
func (e *malformedRelationshipError) Unwrap() error { return e.err }

func subjectTypeMeta(def, relation, subjectType string) map[string]string {
	return map[string]string{"definition_name": def, "relation_name": relation, "subject_type": subjectType}
}

func withoutCaveat(r rel.Relationship) rel.Relationship {
	r.Caveat = nil
	r.Expiration = nil
	return r
}

// diagnosticsMessage lists every schema diagnostic with its position, so one round
// trip shows all that is wrong.
func diagnosticsMessage(e *schema.DiagnosticsError) string {
	if len(e.Diagnostics) == 0 {
		return "error in schema: " + e.Error()
	}
	parts := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		parts[i] = fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, d.Msg)
	}
	noun := "error"
	if len(parts) > 1 {
		noun = "errors"
	}
	return fmt.Sprintf("schema has %d %s: %s", len(parts), noun, strings.Join(parts, "; "))
}

// diagnosticsMeta gives the first diagnostic's position, 0-based as SpiceDB's
// ErrorInfo documents it.
func diagnosticsMeta(e *schema.DiagnosticsError) map[string]string {
	if len(e.Diagnostics) == 0 {
		return nil
	}
	p := e.Diagnostics[0].Pos
	line, col := strconv.Itoa(max(p.Line-1, 0)), strconv.Itoa(max(p.Col-1, 0))
	return map[string]string{"start_line_number": line, "start_column_position": col, "end_line_number": line, "end_column_position": col}
}
