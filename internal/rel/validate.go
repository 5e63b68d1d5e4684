package rel

import (
	"errors"
	"fmt"
)

// Limits from SpiceDB's wire validation (authzed.api.v1 core.proto).
const (
	maxTypeLen       = 128
	maxObjectIDLen   = 1024
	maxCaveatNameLen = 128
	minNameLen       = 3  // type segments and relation names
	maxNameLen       = 64 // a type's last segment and relation names
	maxPrefixLen     = 63 // a type's prefix segments ("org/" in "org/document")
)

// ValidateType checks an object type name: lowercase identifiers of 3 to 64 characters,
// optionally behind prefixes separated by '/', 128 characters in all.
func ValidateType(name string) error {
	if name == "" {
		return errors.New("object type is empty")
	}
	if len(name) > maxTypeLen {
		return fmt.Errorf("object type %q is %d characters long, more than the maximum of %d", clip(name), len(name), maxTypeLen)
	}
	for start := 0; ; {
		end := start
		for end < len(name) && name[end] != '/' {
			end++
		}
		limit := maxNameLen
		if end < len(name) {
			limit = maxPrefixLen
		}
		if err := checkName(name[start:end], limit); err != nil {
			return fmt.Errorf("object type %q: %w", clip(name), err)
		}
		if end == len(name) {
			return nil
		}
		start = end + 1
	}
}

// ValidateRelationName checks a relation or permission name: a lowercase identifier of 3
// to 64 characters.
func ValidateRelationName(name string) error {
	if name == "" {
		return errors.New("relation name is empty")
	}
	if err := checkName(name, maxNameLen); err != nil {
		return fmt.Errorf("relation %q: %w", clip(name), err)
	}
	return nil
}

// checkName applies SpiceDB's identifier rule, [a-z][a-z0-9_]*[a-z0-9], with a length of
// minNameLen to limit.
func checkName(s string, limit int) error {
	switch {
	case s == "":
		return errors.New("empty name segment")
	case len(s) < minNameLen:
		return fmt.Errorf("%q is shorter than %d characters", s, minNameLen)
	case len(s) > limit:
		return fmt.Errorf("%q is longer than %d characters", clip(s), limit)
	case s[0] < 'a' || s[0] > 'z':
		return fmt.Errorf("%q must start with a lowercase letter", clip(s))
	case s[len(s)-1] == '_':
		return fmt.Errorf("%q must not end with '_'", clip(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '_' {
			return fmt.Errorf("%q contains %s; only lowercase letters, digits and '_' are allowed", clip(s), describe(s, i))
		}
	}
	return nil
}

// ValidateObjectID checks a resource object id: 1 to 1024 characters from
// [a-zA-Z0-9/_|-=+]. The wildcard is not a valid resource id.
func ValidateObjectID(id string) error {
	if id == Wildcard {
		return errors.New("object id \"*\" (wildcard) is only allowed for subjects")
	}
	return checkObjectID(id)
}

// ValidateSubjectID checks a subject object id: as ValidateObjectID, but the wildcard
// "*" is allowed.
func ValidateSubjectID(id string) error {
	if id == Wildcard {
		return nil
	}
	return checkObjectID(id)
}

func checkObjectID(id string) error {
	if id == "" {
		return errors.New("object id is empty")
	}
	if len(id) > maxObjectIDLen {
		return fmt.Errorf("object id %q is %d characters long, more than the maximum of %d", clip(id), len(id), maxObjectIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !isIDByte(id[i]) {
			return fmt.Errorf("object id %q contains %s; allowed are letters, digits and / _ | - = +", clip(id), describe(id, i))
		}
	}
	return nil
}

// ValidateCaveatName checks a caveat name as it appears on a relationship.
func ValidateCaveatName(name string) error {
	if name == "" {
		return errors.New("caveat name is empty")
	}
	if len(name) > maxCaveatNameLen {
		return fmt.Errorf("caveat name %q is longer than %d characters", clip(name), maxCaveatNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := isLower(c) || isUpper(c) || isDigit(c) || c == '_' || i > 0 && (c == '/' || c == '|' || c == '-')
		if !ok {
			return fmt.Errorf("caveat name %q contains %s", clip(name), describe(name, i))
		}
	}
	return nil
}

// ValidateObject checks a resource object reference.
func ValidateObject(o ObjectRef) error {
	if err := ValidateType(o.Type); err != nil {
		return err
	}
	return ValidateObjectID(o.ID)
}

// ValidateSubject checks a subject reference; a wildcard subject cannot have a relation.
func ValidateSubject(s SubjectRef) error {
	if err := ValidateType(s.Object.Type); err != nil {
		return err
	}
	if err := ValidateSubjectID(s.Object.ID); err != nil {
		return err
	}
	if s.Relation == "" {
		return nil
	}
	if s.Object.ID == Wildcard {
		return fmt.Errorf("wildcard subject %s cannot have a relation (found #%s)", s.Object, s.Relation)
	}
	return ValidateRelationName(s.Relation)
}

// Validate checks every part of r against SpiceDB's rules: names, ids, the caveat name and
// that neither the resource id is a wildcard nor a wildcard subject has a relation.
func Validate(r Relationship) error {
	if err := ValidateObject(r.Resource); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	if err := ValidateRelationName(r.Relation); err != nil {
		return err
	}
	if err := ValidateSubject(r.Subject); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	if r.Caveat != nil {
		if err := ValidateCaveatName(r.Caveat.Name); err != nil {
			return err
		}
	}
	return nil
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIDByte(c byte) bool {
	return isLower(c) || isUpper(c) || isDigit(c) || c == '/' || c == '_' || c == '|' || c == '-' || c == '=' || c == '+'
}

// describe names the character at s[i] for an error message, decoding UTF-8 so a
// multi-byte character is shown whole.
func describe(s string, i int) string {
	r := []rune(s[i:])[0]
	return fmt.Sprintf("%q at position %d", r, i+1)
}

// clip shortens very long values in error messages.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
