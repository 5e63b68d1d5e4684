package apierr

import (
	"fmt"
	"strconv"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
)

// The texts here are SpiceDB's own for the errors its users match on (issue 30): a
// failed precondition, a caveat context of the wrong type, schema diagnostics. Where
// latch knows more than SpiceDB says, SpiceDB's text comes first and latch's after it.

// preconditionText is SpiceDB's message for a precondition that does not hold: the
// precondition as protobuf text, as SpiceDB prints its request's message.
func preconditionText(p store.Precondition) string {
	op := v1.Precondition_OPERATION_MUST_MATCH
	if p.Op == store.MustNotMatch {
		op = v1.Precondition_OPERATION_MUST_NOT_MATCH
	}
	f := &v1.RelationshipFilter{ResourceType: p.Filter.ResourceType, OptionalResourceIdPrefix: p.Filter.ResourceIDPrefix, OptionalRelation: p.Filter.Relation}
	if len(p.Filter.ResourceIDs) == 1 {
		f.OptionalResourceId = p.Filter.ResourceIDs[0]
	}
	if sf := p.Filter.Subject; sf != nil {
		f.OptionalSubjectFilter = &v1.SubjectFilter{SubjectType: sf.Type}
		if len(sf.IDs) == 1 {
			f.OptionalSubjectFilter.OptionalSubjectId = sf.IDs[0]
		}
		if sf.RelationSet {
			f.OptionalSubjectFilter.OptionalRelation = &v1.SubjectFilter_RelationFilter{Relation: sf.Relation}
		}
	}
	return "unable to satisfy write precondition `" + protoText(&v1.Precondition{Operation: op, Filter: f}) + "`"
}

// protoText renders m as SpiceDB's messages show a request's message: protobuf text
// format on one line, fields in declaration order separated by two spaces. (Go's
// prototext chooses between one space and two per binary, to keep callers from
// depending on it; SpiceDB's release prints two.)
func protoText(m protoreflect.ProtoMessage) string {
	var b strings.Builder
	writeProtoText(&b, m.ProtoReflect())
	return b.String()
}

func writeProtoText(b *strings.Builder, m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	first := true
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) || fd.IsList() || fd.IsMap() {
			continue
		}
		if !first {
			b.WriteString("  ")
		}
		first = false
		b.WriteString(string(fd.Name()) + ":")
		v := m.Get(fd)
		switch fd.Kind() {
		case protoreflect.MessageKind:
			b.WriteString("{")
			writeProtoText(b, v.Message())
			b.WriteString("}")
		case protoreflect.EnumKind:
			if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
				b.WriteString(string(ev.Name()))
			} else {
				b.WriteString(strconv.Itoa(int(v.Enum())))
			}
		case protoreflect.StringKind:
			b.WriteString(strconv.Quote(v.String()))
		default:
			b.WriteString(v.String())
		}
	}
}

// paramTypeText is SpiceDB's message for a context value that does not fit its
// parameter, at check time (and, where SpiceDB answers UNKNOWN, at write time).
func paramTypeText(e *caveat.ParamTypeError) string {
	return fmt.Sprintf("type error for parameters for caveat `%s`: %v", e.Caveat, e)
}

// diagnosticsMessage renders schema diagnostics as SpiceDB words the first: a parse
// error as "parse error in `schema`, line L, column C: ..." (1-based, as SpiceDB
// counts), a type error as its text with its position after it. The others follow,
// so one round trip shows all that is wrong.
func diagnosticsMessage(e *schema.DiagnosticsError) string {
	if len(e.Diagnostics) == 0 {
		return "error in schema: " + e.Error()
	}
	first := e.Diagnostics[0]
	if i := firstSyntax(e); i >= 0 {
		first = e.Diagnostics[i]
	}
	var msg string
	if first.About == nil {
		msg = fmt.Sprintf("parse error in `schema`, line %d, column %d: %s", first.Pos.Line, first.Pos.Col, first.Msg)
	} else {
		msg = fmt.Sprintf("%s (at line %d, column %d)", first.Msg, first.Pos.Line, first.Pos.Col)
	}
	var more []string
	for _, d := range e.Diagnostics {
		if d.Pos != first.Pos || d.Msg != first.Msg {
			more = append(more, fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, d.Msg))
		}
	}
	if len(more) == 0 {
		return msg
	}
	return fmt.Sprintf("%s; and %d more: %s", msg, len(more), strings.Join(more, "; "))
}
