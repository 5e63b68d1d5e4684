package apierr

import (
	"context"
	"errors"
	"strconv"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relcounter"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schemachange"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// Permify's codes for the errors where its API answers differently from SpiceDB's;
// for the rest, server/permify renders the gRPC code.
var (
	// Permify looks an entity up by name among the stored schema's definitions, and a
	// name that is no relation, permission or attribute of the entity up as a rule:
	// an unknown entity type or permission is a schema definition not found.
	permifyUnknownName   = Permify{"ERROR_CODE_SCHEMA_NOT_FOUND", codes.NotFound}
	permifySchemaCompile = Permify{"ERROR_CODE_SCHEMA_COMPILE", codes.InvalidArgument}
	permifyDepth         = Permify{"ERROR_CODE_DEPTH_NOT_ENOUGH", codes.InvalidArgument}
	permifyTokenExpired  = Permify{"ERROR_CODE_SNAP_TOKEN_EXPIRED", codes.FailedPrecondition}
	permifyInvalid       = Permify{"ERROR_CODE_INVALID_ARGUMENT", codes.InvalidArgument}
)

const (
	ia = codes.InvalidArgument
	fp = codes.FailedPrecondition
)

// domain is THE table for errors of the layers below the APIs. Codes, reasons and
// metadata keys follow SpiceDB v1.56 as observed on the wire, so client code
// written for SpiceDB branches the same way. First match wins: a typed error that
// wraps another comes before the one it wraps.
var domain = []Rule{
	// Schema compiler: SpiceDB reports what its parser finds (syntax, names,
	// duplicate definitions, caveat expressions) as a parse error and what its type
	// system finds (names that resolve to nothing, duplicate relations, illegal uses)
	// as a type error; a schema with both is a parse error, as its parser runs first.
	{ia, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR, permifySchemaCompile, func(err error) (map[string]string, bool) {
		d, ok := errors.AsType[*schema.DiagnosticsError](err)
		if !ok {
			return nil, false
		}
		i := firstSyntax(d)
		if i < 0 {
			return nil, false
		}
		return parseMeta(d, i), true
	}},
	{fp, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR, permifySchemaCompile, As(func(e *schema.DiagnosticsError) map[string]string {
		if len(e.Diagnostics) == 0 {
			return nil
		}
		return e.Diagnostics[0].About
	})},

	// Relationships checked against the schema.
	{fp, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION, permifyUnknownName, As(func(e *ir.UnknownDefinitionError) map[string]string {
		return map[string]string{"definition_name": e.Name}
	})},
	{fp, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION, permifyUnknownName, As(func(e *ir.UnknownRelationError) map[string]string {
		return map[string]string{"definition_name": e.Definition, "relation_or_permission_name": e.Name}
	})},
	{ia, v1.ErrorReason_ERROR_REASON_CANNOT_UPDATE_PERMISSION, Permify{}, As(func(e *ir.CannotWritePermissionError) map[string]string {
		return map[string]string{"definition_name": e.Definition, "permission_name": e.Permission}
	})},
	// SpiceDB treats a caveat missing from the schema as a subject type the relation
	// does not allow (`user with nope`).
	{ia, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, Permify{}, As(func(e *ir.UnknownCaveatError) map[string]string {
		return subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
	})},
	{ia, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, Permify{}, As(func(e *ir.SubjectNotAllowedError) map[string]string {
		return subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
	})},
	{ia, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, Permify{}, As(func(e *ir.WildcardNotAllowedError) map[string]string {
		return subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
	})},
	{ia, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, Permify{}, As(func(e *ir.CaveatRequiredError) map[string]string {
		m := subjectTypeMeta(e.Definition, e.Relation, e.SubjectType)
		m["allowed_caveats"] = strings.Join(e.Caveats, ",")
		return m
	})},
	// A context value of the wrong type, at write or at check time.
	{ia, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR, Permify{}, As(func(e *caveat.ParamTypeError) map[string]string {
		return map[string]string{"caveat_name": e.Caveat, "parameter_name": e.Param}
	})},
	{ia, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR, Permify{}, As(func(e *ir.CaveatContextError) map[string]string {
		return map[string]string{"caveat_name": e.Caveat}
	})},

	// Engine.
	{ia, v1.ErrorReason_ERROR_REASON_CAVEAT_EVALUATION_ERROR, Permify{}, As(func(e *engine.CaveatEvalError) map[string]string {
		return map[string]string{"caveat_name": e.Caveat}
	})},
	{ia, v1.ErrorReason_ERROR_REASON_CAVEAT_EVALUATION_ERROR, Permify{}, Is(caveat.ErrCostExceeded)},
	{ia, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED, Permify{}, func(err error) (map[string]string, bool) {
		return map[string]string{"field": "subject.object_id"}, errors.Is(err, engine.ErrWildcardSubject)
	}},
	// A permanent answer for this data, so not a code clients retry.
	{fp, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED, permifyDepth, Is(engine.ErrMaxDepth)},
	// OpenFGA's rules only (its API maps them to its own codes first; AuthZEN on its
	// stores too): a request past the subproblem budget is as permanent as a depth
	// error, and a subjects lookup missing a condition's parameters is the request's.
	{fp, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED, permifyDepth, Is(engine.ErrTooComplex)},
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As(func(e *engine.MissingParamsError) map[string]string {
		return map[string]string{"missing_parameters": strings.Join(e.Missing, ",")}
	})},
	// A peer's dispatch this node refuses (the cluster's dispatch service answers it;
	// no client request can cause it).
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(engine.ErrBadSubproblem)},

	// Store.
	{codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP, Permify{}, As(func(e *store.AlreadyExistsError) map[string]string {
		return relationshipMeta(e.Relationship)
	})},
	{fp, v1.ErrorReason_ERROR_REASON_WRITE_OR_DELETE_PRECONDITION_FAILURE, Permify{}, As(func(e *store.PreconditionFailedError) map[string]string {
		return preconditionMeta(e.Precondition)
	})},
	{ia, v1.ErrorReason_ERROR_REASON_UPDATES_ON_SAME_RELATIONSHIP, Permify{}, As(func(e *store.DuplicateUpdateError) map[string]string {
		return map[string]string{"definition_name": e.Relationship.Resource.Type, "relationship": rel.String(e.Relationship)}
	})},
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As[*store.InvalidUpdateError](nil)},
	{ia, v1.ErrorReason_ERROR_REASON_TOO_MANY_RELATIONSHIPS_FOR_TRANSACTIONAL_DELETE, Permify{}, Is(store.ErrTooManyToDelete)},
	{ia, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR, Permify{}, Is(store.ErrInvalidCursor)},
	{codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, permifyTokenExpired, Is(store.ErrRevisionGone)},
	{codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, permifyInvalid, Is(store.ErrRevisionInFuture)},
	// A watcher that does not read fast enough is cut off; SpiceDB uses this code too.
	{codes.ResourceExhausted, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(store.ErrWatchLagging)},
	// A commit whose outcome was lost with its connection, for a write that is not
	// safe to repeat: UNKNOWN, which clients do not retry on their own, unlike
	// UNAVAILABLE.
	{codes.Unknown, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(store.ErrCommitUnknown)},
	// An outage: nothing was written (or the write may be repeated safely), and the
	// request may be retried.
	{codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(store.ErrUnavailable)},

	// Schema changes that would orphan stored relationships: SpiceDB answers
	// INVALID_ARGUMENT with SCHEMA_TYPE_ERROR.
	{ia, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR, permifySchemaCompile, As(func(e *schemachange.Error) map[string]string { return e.Details })},

	// Relationship counters (ExperimentalService): FAILED_PRECONDITION with a reason, as
	// SpiceDB answers a name taken or not registered.
	{fp, v1.ErrorReason_ERROR_REASON_COUNTER_ALREADY_REGISTERED, Permify{}, As[*relcounter.ExistsError](nil)},
	{fp, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED, Permify{}, As[*relcounter.UnknownError](nil)},
	{fp, v1.ErrorReason_ERROR_REASON_COUNTER_ALREADY_REGISTERED, Permify{}, Is(store.ErrCounterExists)},
	{fp, v1.ErrorReason_ERROR_REASON_COUNTER_NOT_REGISTERED, Permify{}, Is(store.ErrCounterUnknown)},

	// Materialize: a configured permission the schema cannot stream (an unknown type
	// or permission matched the schema's rules above, as SpiceDB answers those).
	{fp, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As[*materialize.TargetError](nil)},
	{fp, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As[*materialize.BreakingError](nil)},
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As[*materialize.TargetSyntaxError](nil)},

	// Zedtokens and snap tokens.
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(zedtoken.ErrMalformed)},
	// A SpiceDB token where no SpiceDB token can be read (a Permify snap token); the
	// SpiceDB API reads or refuses it by consistency before it gets here.
	{ia, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, As[*zedtoken.ForeignError](nil)},

	// Cancellation.
	{codes.Canceled, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(context.Canceled)},
	{codes.DeadlineExceeded, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, Permify{}, Is(context.DeadlineExceeded)},
}

// relationshipMeta is SpiceDB's metadata naming one relationship.
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

// preconditionMeta is SpiceDB's metadata naming a precondition: the operation as
// its enum value name, and each field of the filter that is set.
func preconditionMeta(p store.Precondition) map[string]string {
	op := v1.Precondition_OPERATION_MUST_MATCH
	if p.Op == store.MustNotMatch {
		op = v1.Precondition_OPERATION_MUST_NOT_MATCH
	}
	m := map[string]string{"precondition_operation": op.String()}
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

func subjectTypeMeta(def, relation, subjectType string) map[string]string {
	return map[string]string{"definition_name": def, "relation_name": relation, "subject_type": subjectType}
}

// firstSyntax is the index of the first diagnostic that is not a type error, or -1.
func firstSyntax(e *schema.DiagnosticsError) int {
	for i, d := range e.Diagnostics {
		if d.About == nil {
			return i
		}
	}
	return -1
}

// parseMeta gives diagnostic i's position, 0-based as SpiceDB's ErrorInfo documents
// it, and the source text it points at.
func parseMeta(e *schema.DiagnosticsError, i int) map[string]string {
	p := e.Diagnostics[i].Pos
	code := e.SourceAt(p)
	line, col := max(p.Line-1, 0), max(p.Col-1, 0)
	return map[string]string{
		"start_line_number":     strconv.Itoa(line),
		"start_column_position": strconv.Itoa(col),
		"end_line_number":       strconv.Itoa(line),
		"end_column_position":   strconv.Itoa(col + max(len(code)-1, 0)),
		"source_code":           code,
	}
}
