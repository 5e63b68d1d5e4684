package authzen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// entity is a subject or resource: AuthZEN's {type, id, properties}.
type entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id,omitempty"`
	Properties map[string]any `json:"properties,omitempty"`
}

// action is AuthZEN's {name, properties}.
type action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

// tuple is the 4-tuple of an access evaluation; any part may be absent where a
// request's defaults or a search leave it out.
type tuple struct {
	Subject  *entity        `json:"subject,omitempty"`
	Action   *action        `json:"action,omitempty"`
	Resource *entity        `json:"resource,omitempty"`
	Context  map[string]any `json:"context,omitempty"`
}

// withDefaults is t with each absent part taken from d (the top level of an access
// evaluations request): a part t has replaces d's whole.
func (t tuple) withDefaults(d tuple) tuple {
	if t.Subject == nil {
		t.Subject = d.Subject
	}
	if t.Action == nil {
		t.Action = d.Action
	}
	if t.Resource == nil {
		t.Resource = d.Resource
	}
	if t.Context == nil {
		t.Context = d.Context
	}
	return t
}

// decode reads a JSON request body into v, naming the field a value of the wrong type
// sits in. Members AuthZEN does not define are ignored: the API may be augmented.
func decode(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return badRequest("the request body is empty; send a JSON object")
	}
	err := json.Unmarshal(body, v)
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return badRequest("%s: expected %s, got a JSON %s", te.Field, te.Type, te.Value)
	}
	if err != nil {
		return badRequest("the request body is not valid JSON: %v", err)
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return &requestError{fmt.Sprintf(format, args...)}
}

// validID checks an object id under d's rules.
func (d Data) validID(id string) error {
	if d.ValidID != nil {
		return d.ValidID(id)
	}
	return rel.ValidateObjectID(id)
}

// subject maps an AuthZEN subject to latch's: type:id, or a subject set with the
// relation after '#' in the id or in properties.relation. withID false is a subject
// search's, whose id is ignored.
func (d Data) subject(e *entity, field string, withID bool) (rel.SubjectRef, error) {
	if e == nil {
		return rel.SubjectRef{}, badRequest("%s is required", field)
	}
	if err := d.validType(e.Type); err != nil {
		return rel.SubjectRef{}, badRequest("%s.type: %v", field, err)
	}
	s := rel.SubjectRef{Object: rel.ObjectRef{Type: e.Type}}
	if r, ok := e.Properties["relation"]; ok {
		name, isString := r.(string)
		if !isString {
			return rel.SubjectRef{}, badRequest("%s.properties.relation: expected a relation name (a string)", field)
		}
		s.Relation = name
	}
	if !withID {
		return s, d.subjectRelation(s, field)
	}
	id, relation, set := strings.Cut(e.ID, "#")
	switch {
	case e.ID == "":
		return rel.SubjectRef{}, badRequest("%s.id is required", field)
	case set && s.Relation != "" && s.Relation != relation:
		return rel.SubjectRef{}, badRequest("%s: the id names relation %q and properties.relation %q; name one", field, relation, s.Relation)
	case set:
		s.Relation = relation
	}
	s.Object.ID = id
	if id != rel.Wildcard {
		if err := d.validID(id); err != nil {
			return rel.SubjectRef{}, badRequest("%s.id: %v", field, err)
		}
	}
	if s.Object.ID == rel.Wildcard && s.Relation != "" {
		return rel.SubjectRef{}, badRequest("%s: the wildcard subject \"*\" cannot have a relation", field)
	}
	return s, d.subjectRelation(s, field)
}

func (d Data) subjectRelation(s rel.SubjectRef, field string) error {
	if s.Relation == "" {
		return nil
	}
	if err := rel.ValidateRelationName(s.Relation); err != nil {
		return badRequest("%s relation: %v", field, err)
	}
	return nil
}

// resource maps an AuthZEN resource to type:id; withID false is a resource search's,
// whose id is ignored.
func (d Data) resource(e *entity, field string, withID bool) (rel.ObjectRef, error) {
	if e == nil {
		return rel.ObjectRef{}, badRequest("%s is required", field)
	}
	if err := d.validType(e.Type); err != nil {
		return rel.ObjectRef{}, badRequest("%s.type: %v", field, err)
	}
	o := rel.ObjectRef{Type: e.Type}
	if !withID {
		return o, nil
	}
	if e.ID == "" {
		return rel.ObjectRef{}, badRequest("%s.id is required", field)
	}
	if err := d.validID(e.ID); err != nil {
		return rel.ObjectRef{}, badRequest("%s.id: %v", field, err)
	}
	o.ID = e.ID
	return o, nil
}

// permission maps an action to the permission or relation it names.
func permission(a *action, field string) (string, error) {
	if a == nil {
		return "", badRequest("%s is required", field)
	}
	if a.Name == "" {
		return "", badRequest("%s.name is required", field)
	}
	if err := rel.ValidateRelationName(a.Name); err != nil {
		return "", badRequest("%s.name: %v", field, err)
	}
	return a.Name, nil
}

// caveatContext is the context a request's checks evaluate caveats with: its context,
// plus each part's properties under the part's prefix (subject_department). A
// property whose name the context already has is refused rather than either one
// silently winning.
func (t tuple) caveatContext(field string) (map[string]any, error) {
	out := make(map[string]any, len(t.Context))
	for k, v := range t.Context {
		out[k] = v
	}
	add := func(part, prefix string, props map[string]any) error {
		for k, v := range props {
			if part == "subject" && k == "relation" {
				continue
			}
			key := prefix + k
			if _, dup := out[key]; dup {
				return badRequest("%s%s.properties.%s: becomes caveat context %q, which the context already has", field, part, k, key)
			}
			out[key] = v
		}
		return nil
	}
	var subj, res, act map[string]any
	if t.Subject != nil {
		subj = t.Subject.Properties
	}
	if t.Resource != nil {
		res = t.Resource.Properties
	}
	if t.Action != nil {
		act = t.Action.Properties
	}
	if err := errors.Join(add("subject", "subject_", subj), add("resource", "resource_", res), add("action", "action_", act)); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// checkRequest maps an access evaluation to a check; field prefixes the names of
// fields in errors ("evaluations[2].").
func (d Data) checkRequest(t tuple, field string) (engine.CheckRequest, error) {
	s, err := d.subject(t.Subject, field+"subject", true)
	if err != nil {
		return engine.CheckRequest{}, err
	}
	r, err := d.resource(t.Resource, field+"resource", true)
	if err != nil {
		return engine.CheckRequest{}, err
	}
	p, err := permission(t.Action, field+"action")
	if err != nil {
		return engine.CheckRequest{}, err
	}
	c, err := t.caveatContext(field)
	if err != nil {
		return engine.CheckRequest{}, err
	}
	return engine.CheckRequest{Resource: r, Permission: p, Subject: s, Context: c}, nil
}

// decision is an access evaluation response.
type decision struct {
	Decision bool           `json:"decision"`
	Context  map[string]any `json:"context,omitempty"`
}

// decisionOf renders a check's result under d.Allowed, or latch's rule: granted,
// denied, or, for a result that depends on caveat context the request did not send,
// denied with the reason and the missing names (AuthZEN decisions are closed).
func (d Data) decisionOf(res engine.Result) (decision, error) {
	if d.Allowed != nil {
		ok, err := d.Allowed(res)
		return decision{Decision: ok}, err
	}
	switch res.Membership {
	case engine.HasPermission:
		return decision{Decision: true}, nil
	case engine.Conditional:
		return decision{Context: map[string]any{
			"id": "conditional",
			"reason_admin": map[string]string{
				"en": "the decision depends on caveat context the request did not supply: " + strings.Join(res.Missing, ", "),
			},
			"missing_context": res.Missing,
		}}, nil
	}
	return decision{}, nil
}

// granted says whether a search lists a result: one d.Allowed grants, or, under
// latch's rule, one that holds without caveat context the request did not send.
func (d Data) granted(res engine.Result) (bool, error) {
	if d.Allowed != nil {
		return d.Allowed(res)
	}
	return res.Membership == engine.HasPermission, nil
}

// validType checks a type name under d's rules.
func (d Data) validType(name string) error {
	if d.ValidType != nil {
		return d.ValidType(name)
	}
	return rel.ValidateType(name)
}
