package rel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ellipsis is SpiceDB's spelling of "no subject relation": `user:tom#...` is `user:tom`.
const ellipsis = "..."

// Parse parses `type:id#relation@type:id[#relation][caveat_name][caveat_name:{json}][expiration:RFC3339]`.
// Surrounding whitespace is ignored; the caveat group and the expiration group are both
// optional, and the caveat comes first. The result passes Validate.
func Parse(s string) (Relationship, error) {
	text := strings.TrimSpace(s)
	var r Relationship
	head, tail := text, ""
	if i := strings.IndexByte(text, '['); i >= 0 {
		head, tail = text[:i], text[i:]
	}
	resRel, subj, ok := strings.Cut(head, "@")
	if !ok {
		return r, fmt.Errorf("relationship %q: missing '@' between the resource and the subject", clip(text))
	}
	resText, relation, ok := strings.Cut(resRel, "#")
	if !ok {
		return r, fmt.Errorf("relationship %q: missing '#relation' after the resource", clip(text))
	}
	var err error
	if r.Resource, err = ParseObject(resText); err != nil {
		return r, fmt.Errorf("relationship %q: resource: %w", clip(text), err)
	}
	if err := ValidateRelationName(relation); err != nil {
		return r, fmt.Errorf("relationship %q: %w", clip(text), err)
	}
	r.Relation = relation
	if r.Subject, err = ParseSubject(subj); err != nil {
		return r, fmt.Errorf("relationship %q: subject: %w", clip(text), err)
	}
	if err := parseGroups(&r, tail); err != nil {
		return r, fmt.Errorf("relationship %q: %w", clip(text), err)
	}
	return r, nil
}

// parseGroups reads the optional `[caveat...]` and `[expiration:...]` groups.
func parseGroups(r *Relationship, s string) error {
	for s != "" {
		if s[0] != '[' {
			return fmt.Errorf("unexpected %q after the subject; expected [caveat] or [expiration:...]", clip(s))
		}
		rest, err := parseGroup(r, s[1:])
		if err != nil {
			return err
		}
		s = rest
	}
	return nil
}

// parseGroup reads one bracket group (after its '[') and returns the text after its ']'.
func parseGroup(r *Relationship, s string) (string, error) {
	if when, ok := strings.CutPrefix(s, "expiration:"); ok && !strings.HasPrefix(when, "{") {
		return parseExpiration(r, when)
	}
	if r.Expiration != nil {
		return "", errors.New("the caveat must come before the expiration")
	}
	if r.Caveat != nil {
		return "", fmt.Errorf("more than one caveat (already have [%s])", r.Caveat.Name)
	}
	end := strings.IndexAny(s, ":]")
	if end < 0 {
		return "", fmt.Errorf("missing ']' after caveat %q", clip(s))
	}
	name := s[:end]
	if err := ValidateCaveatName(name); err != nil {
		return "", err
	}
	r.Caveat = &Caveat{Name: name}
	if s[end] == ']' {
		return s[end+1:], nil
	}
	ctx, rest, err := parseJSONObject(s[end+1:])
	if err != nil {
		return "", fmt.Errorf("context of caveat %q: %w", name, err)
	}
	if !strings.HasPrefix(rest, "]") {
		return "", fmt.Errorf("missing ']' after the context of caveat %q", name)
	}
	if len(ctx) > 0 {
		r.Caveat.Context = ctx
	}
	return rest[1:], nil
}

func parseExpiration(r *Relationship, s string) (string, error) {
	if r.Expiration != nil {
		return "", errors.New("more than one [expiration:...]")
	}
	when, rest, ok := strings.Cut(s, "]")
	if !ok {
		return "", errors.New("missing ']' after the expiration")
	}
	t, err := time.Parse(time.RFC3339Nano, when)
	if err != nil {
		return "", fmt.Errorf("expiration %q is not an RFC 3339 time like 2030-01-02T15:04:05Z", clip(when))
	}
	r.Expiration = &t
	return rest, nil
}

// parseJSONObject decodes one JSON object at the start of s and returns it with the text
// that follows. Numbers decode as float64, as they do from structpb.
func parseJSONObject(s string) (map[string]any, string, error) {
	if !strings.HasPrefix(s, "{") {
		return nil, "", fmt.Errorf("expected a JSON object starting with '{', found %q", clip(s))
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, "", errors.New("unterminated JSON object")
		}
		return nil, "", fmt.Errorf("invalid JSON: %v", err)
	}
	return m, s[dec.InputOffset():], nil
}

// ParseObject parses "type:id"; the id may not be the wildcard.
func ParseObject(s string) (ObjectRef, error) {
	typ, id, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return ObjectRef{}, fmt.Errorf("object %q: expected type:id", clip(s))
	}
	o := ObjectRef{Type: typ, ID: id}
	return o, ValidateObject(o)
}

// ParseSubject parses "type:id", "type:id#relation" (a subject set), "type:id#..." (the
// object itself) or "type:*" (a wildcard).
func ParseSubject(s string) (SubjectRef, error) {
	objText, relation, hasRel := strings.Cut(strings.TrimSpace(s), "#")
	typ, id, ok := strings.Cut(objText, ":")
	if !ok {
		return SubjectRef{}, fmt.Errorf("subject %q: expected type:id or type:id#relation", clip(s))
	}
	if hasRel && relation == ellipsis {
		relation = ""
	} else if hasRel && relation == "" {
		return SubjectRef{}, fmt.Errorf("subject %q: empty relation after '#'", clip(s))
	}
	sub := SubjectRef{Object: ObjectRef{Type: typ, ID: id}, Relation: relation}
	return sub, ValidateSubject(sub)
}

// ParseCheck parses a validation-file assertion, `type:id#permission@type:id[#relation]`,
// optionally followed by ` with {json context}`. context is nil without a `with` clause.
func ParseCheck(s string) (resource ObjectRef, permission string, subject SubjectRef, context map[string]any, err error) {
	text := strings.TrimSpace(s)
	head, tail := text, ""
	if i := strings.IndexAny(text, " \t\r\n"); i >= 0 {
		head, tail = text[:i], strings.TrimSpace(text[i:])
	}
	resPerm, subj, ok := strings.Cut(head, "@")
	if !ok {
		return resource, "", subject, nil, fmt.Errorf("check %q: missing '@' between the resource and the subject", clip(text))
	}
	resText, permission, ok := strings.Cut(resPerm, "#")
	if !ok {
		return resource, "", subject, nil, fmt.Errorf("check %q: missing '#permission' after the resource", clip(text))
	}
	if resource, err = ParseObject(resText); err != nil {
		return resource, "", subject, nil, fmt.Errorf("check %q: resource: %w", clip(text), err)
	}
	if err = ValidateRelationName(permission); err != nil {
		return resource, "", subject, nil, fmt.Errorf("check %q: permission: %w", clip(text), err)
	}
	if subject, err = ParseSubject(subj); err != nil {
		return resource, "", subject, nil, fmt.Errorf("check %q: subject: %w", clip(text), err)
	}
	if context, err = parseWith(tail); err != nil {
		return resource, "", subject, nil, fmt.Errorf("check %q: %w", clip(text), err)
	}
	return resource, permission, subject, context, nil
}

// parseWith parses the optional `with {json}` clause of an assertion.
func parseWith(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(s, "with")
	if !ok || rest != "" && rest[0] != '{' && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' && rest[0] != '\r' {
		return nil, fmt.Errorf("unexpected %q after the subject; expected `with {json context}`", clip(s))
	}
	ctx, after, err := parseJSONObject(strings.TrimSpace(rest))
	if err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	if strings.TrimSpace(after) != "" {
		return nil, fmt.Errorf("unexpected %q after the context", clip(strings.TrimSpace(after)))
	}
	return ctx, nil
}

// String returns r in canonical form, the inverse of Parse: no `#...` ellipsis, caveat
// context as JSON with sorted keys, expiration in UTC.
func String(r Relationship) string {
	var b strings.Builder
	b.Grow(len(r.Resource.Type) + len(r.Resource.ID) + len(r.Relation) + len(r.Subject.Object.Type) + len(r.Subject.Object.ID) + len(r.Subject.Relation) + 8)
	b.WriteString(r.Resource.String())
	b.WriteByte('#')
	b.WriteString(r.Relation)
	b.WriteByte('@')
	b.WriteString(r.Subject.String())
	if r.Caveat != nil {
		b.WriteByte('[')
		b.WriteString(r.Caveat.Name)
		if len(r.Caveat.Context) > 0 {
			b.WriteByte(':')
			b.WriteString(contextJSON(r.Caveat.Context))
		}
		b.WriteByte(']')
	}
	if r.Expiration != nil {
		b.WriteString("[expiration:")
		b.WriteString(r.Expiration.UTC().Format(time.RFC3339Nano))
		b.WriteByte(']')
	}
	return b.String()
}

// contextJSON encodes a caveat context with sorted keys and without HTML escaping, so
// the text reads as it was written.
func contextJSON(ctx map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ctx); err != nil {
		return fmt.Sprintf("{%q: %q}", "<unencodable context>", err.Error())
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// String returns "type:id".
func (o ObjectRef) String() string { return o.Type + ":" + o.ID }

// String returns "type:id" or "type:id#relation".
func (s SubjectRef) String() string {
	if s.Relation == "" {
		return s.Object.String()
	}
	return s.Object.String() + "#" + s.Relation
}
