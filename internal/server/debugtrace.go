package server

import (
	"strconv"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// traceWriter converts the engine's check traces of one request to SpiceDB's
// DebugInformation, in the shape SpiceDB gives it: a batched step lists its resources
// comma-separated, with one answer for all of them; a step that was not evaluated is
// was_cached_result, as is a leaf (SpiceDB marks its leaves was_cached_result false
// rather than giving them an empty sub_problems).
type traceWriter struct {
	schema string
	// ops numbers steps: a step shared by several items of a bulk check keeps one
	// trace_operation_id in each of their traces, as in SpiceDB.
	ops map[*engine.TraceNode]string
}

// newTraceWriter starts the traces of one request evaluated under sch, which SpiceDB
// returns beside them (schema_used) in its canonical form (what `zed permission check
// --explain --schema` prints), not as it was written.
func newTraceWriter(sch *ir.Schema) *traceWriter {
	return &traceWriter{schema: schema.Format(sch), ops: map[*engine.TraceNode]string{}}
}

func (w *traceWriter) info(subject *v1.SubjectReference, n *engine.TraceNode) *v1.DebugInformation {
	return &v1.DebugInformation{Check: w.step(subject, n), SchemaUsed: w.schema}
}

func (w *traceWriter) step(subject *v1.SubjectReference, n *engine.TraceNode) *v1.CheckDebugTrace {
	op, ok := w.ops[n]
	if !ok {
		op = strconv.Itoa(len(w.ops) + 1)
		w.ops[n] = op
	}
	out := &v1.CheckDebugTrace{
		Resource:         &v1.ObjectReference{ObjectType: n.Type, ObjectId: strings.Join(n.IDs, ",")},
		Permission:       n.Relation,
		PermissionType:   v1.CheckDebugTrace_PERMISSION_TYPE_RELATION,
		Subject:          subject,
		Result:           v1.CheckDebugTrace_PERMISSIONSHIP_UNSPECIFIED,
		Duration:         durationpb.New(n.Duration),
		TraceOperationId: op,
	}
	if n.Permission {
		out.PermissionType = v1.CheckDebugTrace_PERMISSION_TYPE_PERMISSION
	}
	if m, ok := n.Summary(); ok {
		out.Result = traceResultToV1(m)
	}
	if n.ExpiresAt != nil {
		out.OptionalExpiresAt = timestamppb.New(*n.ExpiresAt)
	}
	if n.Cached || len(n.Children) == 0 {
		out.Resolution = &v1.CheckDebugTrace_WasCachedResult{WasCachedResult: n.Cached}
	} else {
		sub := make([]*v1.CheckDebugTrace, len(n.Children))
		for i, c := range n.Children {
			sub[i] = w.step(subject, c)
		}
		out.Resolution = &v1.CheckDebugTrace_SubProblems_{SubProblems: &v1.CheckDebugTrace_SubProblems{Traces: sub}}
	}
	out.CaveatEvaluationInfo = caveatInfo(n, out)
	// SpiceDB reports a step granted through a caveat that evaluated true as
	// CONDITIONAL_PERMISSION beside the caveat's TRUE (and zed then prints no subject
	// line under it, as it does under a step granted outright).
	if grantedByCaveat(out) {
		out.Result = v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION
	}
	return out
}

func traceResultToV1(m engine.Membership) v1.CheckDebugTrace_Permissionship {
	switch m {
	case engine.HasPermission:
		return v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION
	case engine.Conditional:
		return v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION
	default:
		return v1.CheckDebugTrace_PERMISSIONSHIP_NO_PERMISSION
	}
}

// caveatInfo is the one caveat evaluation a step's answer rests on, if there is one:
// SpiceDB gives a step at most one. It is the step's own evaluation (the one that left
// the answer conditional, when it is), else, for a step that evaluated none, the one
// its only child with the same answer and a caveat carries: SpiceDB shows a caveat on
// every step its answer passed through.
func caveatInfo(n *engine.TraceNode, out *v1.CheckDebugTrace) *v1.CaveatEvalInfo {
	var pick *engine.CaveatTrace
	for i := range n.Caveats {
		c := &n.Caveats[i]
		if out.Result == v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION && c.Result != engine.CaveatMissingContext {
			continue
		}
		if pick != nil {
			return nil
		}
		pick = c
	}
	if pick != nil {
		return caveatTraceToV1(pick)
	}
	if len(n.Caveats) > 0 {
		return nil
	}
	var inherited *v1.CaveatEvalInfo
	for _, c := range out.GetSubProblems().GetTraces() {
		granted := out.Result == v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION && grantedByCaveat(c)
		if c.CaveatEvaluationInfo == nil || (c.Result != out.Result && !granted) {
			continue
		}
		if inherited != nil {
			return nil
		}
		inherited = c.CaveatEvaluationInfo
	}
	return inherited
}

// grantedByCaveat reports a step granted with a caveat that evaluated true.
func grantedByCaveat(t *v1.CheckDebugTrace) bool {
	switch t.Result {
	case v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION, v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION:
		return t.GetCaveatEvaluationInfo().GetResult() == v1.CaveatEvalInfo_RESULT_TRUE
	}
	return false
}

func caveatTraceToV1(c *engine.CaveatTrace) *v1.CaveatEvalInfo {
	out := &v1.CaveatEvalInfo{Expression: c.Expression, CaveatName: c.Caveat, Result: v1.CaveatEvalInfo_RESULT_FALSE}
	switch c.Result {
	case engine.CaveatTrue:
		out.Result = v1.CaveatEvalInfo_RESULT_TRUE
	case engine.CaveatMissingContext:
		out.Result = v1.CaveatEvalInfo_RESULT_MISSING_SOME_CONTEXT
		out.PartialCaveatInfo = &v1.PartialCaveatInfo{MissingRequiredContext: c.Missing}
	case engine.CaveatFailed:
		// Neither true nor false: SpiceDB has no result for a caveat that failed to
		// evaluate (its check fails), latch's only where the failure decides the answer.
		out.Result = v1.CaveatEvalInfo_RESULT_UNSPECIFIED
	}
	// Context values come from JSON (the request's or the stored relationship's), which
	// a Struct holds; one that does not convert is left out rather than failing the check.
	if ctx, err := structpb.NewStruct(c.Context); err == nil {
		out.Context = ctx
	}
	return out
}
