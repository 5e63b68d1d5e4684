package permdata

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// An attribute value is stored as a wildcard relationship on the attribute's
// (synthetic) relation, the value in its caveat context under "value"; a rule call's
// arguments likewise, on the call's relation, by the rule's parameter names.

// Attribute is one attribute value to write, as the client sent it.
type Attribute struct {
	Entity rel.ObjectRef
	Name   string
	Value  json.RawMessage
}

// AttributeProblem says what was wrong with an attribute of a write.
type AttributeProblem int

const (
	// UnknownEntity: the schema defines no entity type of that name.
	UnknownEntity AttributeProblem = iota + 1
	// UnknownAttribute: the entity type has no attribute of that name.
	UnknownAttribute
	// InvalidEntityID: the entity id breaks the syntax rules.
	InvalidEntityID
	// ValueTypeMismatch: the value does not have the attribute's type.
	ValueTypeMismatch
)

// AttributeError refuses attribute Index of a write.
type AttributeError struct {
	Index     int
	Entity    rel.ObjectRef
	Attribute string
	Problem   AttributeProblem
	Err       error // the id or value error; nil for UnknownEntity and UnknownAttribute
}

func (e *AttributeError) Error() string {
	switch e.Problem {
	case UnknownEntity:
		return fmt.Sprintf("attributes[%d]: entity type %q is not defined in the schema", e.Index, e.Entity.Type)
	case UnknownAttribute:
		return fmt.Sprintf("attributes[%d]: entity %q has no attribute %q", e.Index, e.Entity.Type, e.Attribute)
	case ValueTypeMismatch:
		return fmt.Sprintf("attributes[%d] (%s.%s): %v", e.Index, e.Entity.Type, e.Attribute, e.Err)
	}
	return fmt.Sprintf("attributes[%d]: %v", e.Index, e.Err)
}

func (e *AttributeError) Unwrap() error { return e.Err }

// AttributeUpdates adds to b the relationships that carry attrs: the value on every
// wildcard subject the attribute's relation allows, and the arguments of every rule
// call that reads a changed attribute, completed from the values stored at r (or
// Permify's zero values) for the attributes the write does not set.
func (s *Schema) AttributeUpdates(ctx context.Context, r store.Reader, attrs []Attribute, b *Batch) error {
	changed := map[rel.ObjectRef]map[string]any{}
	var order []rel.ObjectRef
	for i, a := range attrs {
		obj := a.Entity
		if s.IR.Definition(obj.Type) == nil {
			return &AttributeError{Index: i, Entity: obj, Attribute: a.Name, Problem: UnknownEntity}
		}
		typ, ok := s.Info.Attributes[obj.Type][a.Name]
		if !ok {
			return &AttributeError{Index: i, Entity: obj, Attribute: a.Name, Problem: UnknownAttribute}
		}
		if err := rel.ValidateObjectID(obj.ID); err != nil {
			return &AttributeError{Index: i, Entity: obj, Attribute: a.Name, Problem: InvalidEntityID, Err: err}
		}
		val, err := ParseValue(a.Value, typ)
		if err != nil {
			return &AttributeError{Index: i, Entity: obj, Attribute: a.Name, Problem: ValueTypeMismatch, Err: err}
		}
		if changed[obj] == nil {
			changed[obj] = map[string]any{}
			order = append(order, obj)
		}
		changed[obj][a.Name] = val
		rl := s.IR.Definition(obj.Type).Relation(a.Name)
		for _, al := range rl.Allowed {
			b.Add(store.Touch, valueRel(obj, rl.Name, al, map[string]any{"value": val}))
		}
	}
	for _, obj := range order {
		if err := s.callUpdates(ctx, r, obj, changed[obj], b); err != nil {
			return err
		}
	}
	return nil
}

func valueRel(obj rel.ObjectRef, relation string, al ir.AllowedSubject, ctx map[string]any) rel.Relationship {
	return rel.Relationship{
		Resource: obj, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: al.Type, ID: rel.Wildcard}},
		Caveat:  &rel.Caveat{Name: al.Caveat, Context: ctx},
	}
}

// callUpdates adds the values of the rule calls that read an attribute in set. The
// arguments it completes from r are recorded in b, so the write can insist they are
// still the stored ones when it commits (Batch.Unchanged).
func (s *Schema) callUpdates(ctx context.Context, r store.Reader, obj rel.ObjectRef, set map[string]any, b *Batch) error {
	for _, c := range s.Info.Calls[obj.Type] {
		if !slices.ContainsFunc(c.Args, func(a string) bool { _, ok := set[a]; return ok }) {
			continue
		}
		rule, ok := s.Info.Rules[c.Rule]
		if !ok || len(rule.Params) != len(c.Args) {
			continue
		}
		args := map[string]any{}
		for i, a := range c.Args {
			val, ok := set[a]
			if !ok {
				read, err := readStored(ctx, r, obj, a)
				if err != nil {
					return err
				}
				b.reads = append(b.reads, read)
				val = read.value(s)
			}
			args[rule.Params[i].Name] = val
		}
		rl := s.IR.Definition(obj.Type).Relation(c.Relation)
		for _, al := range rl.Allowed {
			b.Add(store.Touch, valueRel(obj, rl.Name, al, args))
		}
	}
	return nil
}

// storedRead is an attribute value a write read to complete a rule call's arguments.
type storedRead struct {
	entity rel.ObjectRef
	attr   string
	found  bool
	stored any // the stored value when found
}

// value is the argument the read gives: the stored value, or Permify's zero value
// when the attribute was never written.
func (sr storedRead) value(s *Schema) any {
	if sr.found {
		return sr.stored
	}
	return zeroValue(s.Info.Attributes[sr.entity.Type][sr.attr])
}

// readStored reads attr of obj at r.
func readStored(ctx context.Context, r store.Reader, obj rel.ObjectRef, attr string) (storedRead, error) {
	out := storedRead{entity: obj, attr: attr}
	f := store.Filter{
		ResourceType: obj.Type, ResourceIDs: []string{obj.ID}, Relation: attr,
		Subject: &store.SubjectFilter{Type: obj.Type, IDs: []string{rel.Wildcard}},
	}
	for it, err := range r.Query(ctx, f, store.QueryOptions{Limit: 1}) {
		if err != nil {
			return out, err
		}
		if c := it.Relationship.Caveat; c != nil {
			out.stored, out.found = c.Context["value"]
		}
	}
	return out, nil
}

// AttributeFilter selects attribute values: of entities of Type (every type when
// empty) with one of IDs (any when empty), of the named Attributes (all when empty).
type AttributeFilter struct {
	Type       string
	IDs        []string
	Attributes []string
}

func (s *Schema) filterTypes(f AttributeFilter) []string {
	if f.Type != "" {
		return []string{f.Type}
	}
	return s.Info.Entities
}

// AttributeDeletes adds to b the deletes of the attribute values matching f and of the
// rule call values built from them, so a rule over a deleted attribute is false until
// the entity's attributes are written again.
func (s *Schema) AttributeDeletes(ctx context.Context, r store.Reader, f AttributeFilter, b *Batch) error {
	for _, typ := range s.filterTypes(f) {
		var rels []string
		for name := range s.Info.Attributes[typ] {
			if len(f.Attributes) == 0 || slices.Contains(f.Attributes, name) {
				rels = append(rels, name)
			}
		}
		for _, c := range s.Info.Calls[typ] {
			if slices.ContainsFunc(c.Args, func(a string) bool { return slices.Contains(rels, a) }) {
				rels = append(rels, c.Relation)
			}
		}
		for _, name := range rels {
			sf := store.Filter{ResourceType: typ, ResourceIDs: f.IDs, Relation: name}
			for it, err := range r.Query(ctx, sf, store.QueryOptions{}) {
				if err != nil {
					return err
				}
				if it.Relationship.Subject.Object.ID == rel.Wildcard {
					b.Add(store.Delete, it.Relationship)
				}
			}
		}
	}
	return nil
}

// AttributeValue is one stored attribute value.
type AttributeValue struct {
	Entity    rel.ObjectRef
	Attribute string
	Type      string // the attribute's Permify type: boolean, integer[], ...
	Value     any
}

// Attributes reads the attribute values matching f.
func (s *Schema) Attributes(ctx context.Context, r store.Reader, f AttributeFilter) ([]AttributeValue, error) {
	var out []AttributeValue
	for _, typ := range s.filterTypes(f) {
		sf := store.Filter{ResourceType: typ, ResourceIDs: f.IDs, Subject: &store.SubjectFilter{Type: typ, IDs: []string{rel.Wildcard}}}
		for it, err := range r.Query(ctx, sf, store.QueryOptions{}) {
			if err != nil {
				return nil, err
			}
			rl := it.Relationship
			at, ok := s.Info.Attributes[typ][rl.Relation]
			if !ok || len(f.Attributes) > 0 && !slices.Contains(f.Attributes, rl.Relation) || rl.Caveat == nil {
				continue
			}
			out = append(out, AttributeValue{Entity: rl.Resource, Attribute: rl.Relation, Type: at, Value: rl.Caveat.Context["value"]})
		}
	}
	return out, nil
}
