// Package permdata holds Permify's data model over latch's relationships, apart from
// any wire format: which tuples a Permify schema accepts, how attribute values and the
// arguments of rule calls are lowered into caveated wildcard relationships (and read
// back, and deleted), and how engine answers read as Permify's. The Permify HTTP API
// (server/permify) and Permify validation files (validationfile) both go through it.
package permdata

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/store"
)

// Schema is a compiled schema with its Permify reading: attributes, rule calls and the
// synthetic relations that carry them.
type Schema struct {
	IR   *ir.Schema
	Info *perm.Info
}

// NewSchema reads s the way Permify sees it.
func NewSchema(s *ir.Schema) *Schema { return &Schema{IR: s, Info: perm.Inspect(s)} }

// CheckTuple reports why the schema does not accept r as a Permify tuple, if it does
// not: its entity type is unknown (*ir.UnknownDefinitionError), it has no such
// relation, or not one Permify can write (*ir.UnknownRelationError), its subject type
// is not allowed, or an id breaks the syntax rules.
func (s *Schema) CheckTuple(r rel.Relationship) error {
	def := s.IR.Definition(r.Resource.Type)
	if def == nil {
		return s.IR.UnknownDefinition(r.Resource.Type)
	}
	rl := def.Relation(r.Relation)
	if rl == nil || rl.IsPermission() || s.Info.IsSynthetic(def.Name, rl.Name) {
		return &ir.UnknownRelationError{Definition: def.Name, Name: r.Relation}
	}
	// Permify tuples carry no caveat and no expiration, so the type list must accept
	// the subject bare, as the SpiceDB API requires of such a write.
	if !s.IR.AllowsSubject(def.Name, rl.Name, r.Subject, "", false) {
		return fmt.Errorf("relation %q of entity %q does not allow subject %s", rl.Name, def.Name, subjectString(r.Subject))
	}
	// Names were checked against the schema above; only the ids remain.
	if err := rel.ValidateObjectID(r.Resource.ID); err != nil {
		return err
	}
	return rel.ValidateSubjectID(r.Subject.Object.ID)
}

func subjectString(s rel.SubjectRef) string {
	out := s.Object.Type + ":" + s.Object.ID
	if s.Relation != "" {
		out += "#" + s.Relation
	}
	return out
}

// Batch collects a write's updates; a later update of the same relationship replaces
// an earlier one, since Permify accepts repeated tuples in one write.
type Batch struct {
	Updates []store.Update
	index   map[rel.Key]int
	// reads are the stored attribute values the updates were computed from.
	reads []storedRead
}

// ErrAttributeChanged refuses a write whose rule-call arguments were completed from
// an attribute value that another write changed before this one committed. Nothing
// was written; lowering the write again at a newer head and retrying loses neither
// write.
var ErrAttributeChanged = errors.New("an attribute this write read was changed by a concurrent write")

// Unchanged returns the validator that makes a write of b a compare-and-swap: it
// fails with ErrAttributeChanged unless every attribute value b was computed from is
// still stored (or still absent) at the revision the write commits on. Nil when b
// read nothing: a write that sets every argument of its rule calls depends on no
// stored value.
func (b *Batch) Unchanged() store.Validator {
	if len(b.reads) == 0 {
		return nil
	}
	reads := slices.Clone(b.reads)
	return func(ctx context.Context, r store.Reader) error {
		for _, was := range reads {
			now, err := readStored(ctx, r, was.entity, was.attr)
			if err != nil {
				return err
			}
			if now.found != was.found || !reflect.DeepEqual(now.stored, was.stored) {
				return fmt.Errorf("%w: %s:%s %s", ErrAttributeChanged, was.entity.Type, was.entity.ID, was.attr)
			}
		}
		return nil
	}
}

// Add appends an update of r, or replaces the earlier update of the same relationship.
func (b *Batch) Add(op store.Op, r rel.Relationship) {
	if b.index == nil {
		b.index = map[rel.Key]int{}
	}
	u := store.Update{Op: op, Relationship: r}
	if i, ok := b.index[r.Key()]; ok {
		b.Updates[i] = u
		return
	}
	b.index[r.Key()] = len(b.Updates)
	b.Updates = append(b.Updates, u)
}

// Check results, as Permify's API names them.
const (
	Allowed = "CHECK_RESULT_ALLOWED"
	Denied  = "CHECK_RESULT_DENIED"
)

// Result is Permify's answer to a check the engine answered with m. A rule that lacks
// request data is CONDITIONAL in the engine; Permify answers such a check DENIED.
func Result(m engine.Membership) string {
	if m == engine.HasPermission {
		return Allowed
	}
	return Denied
}

// RequestContext is the caveat context the engine evaluates rules with, given a
// request's data: rules read request values as `context.data.x`.
func RequestContext(data map[string]any) map[string]any {
	if data == nil {
		return nil
	}
	return map[string]any{"context": map[string]any{"data": data}}
}
