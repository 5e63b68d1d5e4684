package permify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// Wire shapes shared by the data and permission endpoints.

type entityRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type subjectRef struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Relation string `json:"relation,omitempty"`
}

type tupleJSON struct {
	Entity   entityRef  `json:"entity"`
	Relation string     `json:"relation"`
	Subject  subjectRef `json:"subject"`
}

type attributeJSON struct {
	Entity    entityRef       `json:"entity"`
	Attribute string          `json:"attribute"`
	Value     json.RawMessage `json:"value"`
}

func (s subjectRef) rel() rel.SubjectRef {
	r := s.Relation
	if r == "..." {
		r = ""
	}
	return rel.SubjectRef{Object: rel.ObjectRef{Type: s.Type, ID: s.ID}, Relation: r}
}

func tupleOf(r rel.Relationship) tupleJSON {
	return tupleJSON{
		Entity: entityRef{r.Resource.Type, r.Resource.ID}, Relation: r.Relation,
		Subject: subjectRef{r.Subject.Object.Type, r.Subject.Object.ID, r.Subject.Relation},
	}
}

// batch collects a write's updates; a later update of the same relationship replaces
// an earlier one, since Permify accepts repeated tuples in one write.
type batch struct {
	updates []store.Update
	index   map[rel.Key]int
}

func (b *batch) add(op store.Op, r rel.Relationship) {
	if b.index == nil {
		b.index = map[rel.Key]int{}
	}
	u := store.Update{Op: op, Relationship: r}
	if i, ok := b.index[r.Key()]; ok {
		b.updates[i] = u
		return
	}
	b.index[r.Key()] = len(b.updates)
	b.updates = append(b.updates, u)
}

func (h *Handler) dataWrite(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata   metadata        `json:"metadata"`
		Tuples     []tupleJSON     `json:"tuples"`
		Attributes []attributeJSON `json:"attributes"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if n := len(req.Tuples) + len(req.Attributes); n > h.cfg.MaxBatch {
		return nil, invalid("ERROR_CODE_MAX_DATA_PER_WRITE_EXCEEDED", fmt.Sprintf("%d tuples and attributes in one write; the maximum is %d", n, h.cfg.MaxBatch))
	}
	r, err := h.reader(ctx, t, "")
	if err != nil {
		return nil, err
	}
	v, err := h.schemaAt(ctx, t, r, req.Metadata.SchemaVersion)
	if err != nil {
		return nil, err
	}
	var b batch
	for i, tp := range req.Tuples {
		rl, err := v.tuple(tp)
		if err != nil {
			return nil, invalid("ERROR_CODE_VALIDATION", fmt.Sprintf("tuples[%d]: %v", i, err))
		}
		b.add(store.Touch, rl)
	}
	if err := v.attributeUpdates(ctx, r, req.Attributes, &b); err != nil {
		return nil, err
	}
	rev, err := t.store.Write(ctx, nil, b.updates, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"snap_token": zedtoken.Encode(rev)}, nil
}

// tuple validates a wire tuple against the schema.
func (v *view) tuple(tp tupleJSON) (rel.Relationship, error) {
	r := rel.Relationship{Resource: rel.ObjectRef{Type: tp.Entity.Type, ID: tp.Entity.ID}, Relation: tp.Relation, Subject: tp.Subject.rel()}
	def := v.s.Definition(r.Resource.Type)
	if def == nil {
		return r, fmt.Errorf("entity type %q is not defined in the schema", r.Resource.Type)
	}
	rl := def.Relation(r.Relation)
	if rl == nil || rl.IsPermission() || v.info.IsSynthetic(def.Name, rl.Name) {
		return r, fmt.Errorf("entity %q has no relation %q", def.Name, r.Relation)
	}
	// Permify tuples carry no caveat and no expiration, so the type list must accept
	// the subject bare, as the SpiceDB API requires of such a write.
	if !v.s.AllowsSubject(def.Name, rl.Name, r.Subject, "", false) {
		return r, fmt.Errorf("relation %q of entity %q does not allow subject %s", rl.Name, def.Name, subjectString(r.Subject))
	}
	// Names were checked against the schema above; only the ids remain.
	if err := rel.ValidateObjectID(r.Resource.ID); err != nil {
		return r, err
	}
	return r, rel.ValidateSubjectID(r.Subject.Object.ID)
}

func subjectString(s rel.SubjectRef) string {
	out := s.Object.Type + ":" + s.Object.ID
	if s.Relation != "" {
		out += "#" + s.Relation
	}
	return out
}

// attributeUpdates turns attribute values into the relationships that carry them:
// the value on every wildcard subject the attribute's relation allows, and the
// arguments of every rule call that reads a changed attribute, completed from stored
// values (or Permify's zero values) for the attributes the write does not set.
func (v *view) attributeUpdates(ctx context.Context, r store.Reader, attrs []attributeJSON, b *batch) error {
	changed := map[rel.ObjectRef]map[string]any{}
	var order []rel.ObjectRef
	for i, a := range attrs {
		obj := rel.ObjectRef{Type: a.Entity.Type, ID: a.Entity.ID}
		typ, ok := v.info.Attributes[obj.Type][a.Attribute]
		if !ok {
			return notFound("ERROR_CODE_ATTRIBUTE_DEFINITION_NOT_FOUND", fmt.Sprintf("attributes[%d]: entity %q has no attribute %q", i, obj.Type, a.Attribute))
		}
		if err := rel.ValidateObjectID(obj.ID); err != nil {
			return invalid("ERROR_CODE_VALIDATION", fmt.Sprintf("attributes[%d]: %v", i, err))
		}
		val, err := parseValue(a.Value, typ)
		if err != nil {
			return invalid("ERROR_CODE_ATTRIBUTE_TYPE_MISMATCH", fmt.Sprintf("attributes[%d] (%s.%s): %v", i, obj.Type, a.Attribute, err))
		}
		if changed[obj] == nil {
			changed[obj] = map[string]any{}
			order = append(order, obj)
		}
		changed[obj][a.Attribute] = val
		rl := v.s.Definition(obj.Type).Relation(a.Attribute)
		for _, al := range rl.Allowed {
			b.add(store.Touch, valueRel(obj, rl.Name, al, map[string]any{"value": val}))
		}
	}
	for _, obj := range order {
		if err := v.callUpdates(ctx, r, obj, changed[obj], b); err != nil {
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

func (v *view) callUpdates(ctx context.Context, r store.Reader, obj rel.ObjectRef, set map[string]any, b *batch) error {
	for _, c := range v.info.Calls[obj.Type] {
		if !slices.ContainsFunc(c.Args, func(a string) bool { _, ok := set[a]; return ok }) {
			continue
		}
		rule, ok := v.info.Rules[c.Rule]
		if !ok || len(rule.Params) != len(c.Args) {
			continue
		}
		args := map[string]any{}
		for i, a := range c.Args {
			val, ok := set[a]
			if !ok {
				var err error
				if val, err = v.storedValue(ctx, r, obj, a); err != nil {
					return err
				}
			}
			args[rule.Params[i].Name] = val
		}
		rl := v.s.Definition(obj.Type).Relation(c.Relation)
		for _, al := range rl.Allowed {
			b.add(store.Touch, valueRel(obj, rl.Name, al, args))
		}
	}
	return nil
}

// storedValue reads attr of obj, or Permify's zero value when it was never written.
func (v *view) storedValue(ctx context.Context, r store.Reader, obj rel.ObjectRef, attr string) (any, error) {
	f := store.Filter{
		ResourceType: obj.Type, ResourceIDs: []string{obj.ID}, Relation: attr,
		Subject: &store.SubjectFilter{Type: obj.Type, IDs: []string{rel.Wildcard}},
	}
	for it, err := range r.Query(ctx, f, store.QueryOptions{Limit: 1}) {
		if err != nil {
			return nil, err
		}
		if c := it.Relationship.Caveat; c != nil {
			if val, ok := c.Context["value"]; ok {
				return val, nil
			}
		}
	}
	return zeroValue(v.info.Attributes[obj.Type][attr]), nil
}
