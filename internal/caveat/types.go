package caveat

import (
	"fmt"
	"strings"
)

// Kind is the shape of a caveat parameter type.
type Kind int

// The parameter kinds SpiceDB's caveat language accepts.
const (
	Any Kind = iota
	Bool
	String
	Int
	Uint
	Double
	Bytes
	Duration
	Timestamp
	List
	Map
	IPAddress
)

var kindNames = [...]string{
	Any: "any", Bool: "bool", String: "string", Int: "int", Uint: "uint", Double: "double",
	Bytes: "bytes", Duration: "duration", Timestamp: "timestamp", List: "list", Map: "map",
	IPAddress: "ipaddress",
}

// String returns the kind as the schema language spells it.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Type is a caveat parameter type. Elem is set for list<T> and map<T>; map keys are
// always strings, as in SpiceDB.
type Type struct {
	Kind Kind
	Elem *Type
}

// String returns the type as the schema language spells it: "int", "list<string>".
func (t Type) String() string {
	if t.Kind == List || t.Kind == Map {
		elem := "any"
		if t.Elem != nil {
			elem = t.Elem.String()
		}
		return t.Kind.String() + "<" + elem + ">"
	}
	return t.Kind.String()
}

// ParseType parses a caveat parameter type: any, bool, string, int, uint, double, bytes,
// duration, timestamp, list<T>, map<T> or ipaddress.
func ParseType(s string) (Type, error) {
	text := strings.TrimSpace(s)
	t, rest, err := parseType(text)
	if err != nil {
		return Type{}, err
	}
	if rest = strings.TrimSpace(rest); rest != "" {
		return Type{}, fmt.Errorf("unexpected %q after type %s in %q", rest, t, text)
	}
	return t, nil
}

func parseType(s string) (Type, string, error) {
	s = strings.TrimLeft(s, " \t")
	end := 0
	for end < len(s) && isIdentByte(s[end]) {
		end++
	}
	name, rest := s[:end], s[end:]
	if name == "" {
		return Type{}, "", fmt.Errorf("expected a type name, found %q", s)
	}
	kind, ok := kindByName(name)
	if !ok {
		return Type{}, "", fmt.Errorf("unknown type `%s`; expected one of %s", name, typeList())
	}
	if kind != List && kind != Map {
		if strings.HasPrefix(strings.TrimLeft(rest, " \t"), "<") {
			return Type{}, "", fmt.Errorf("type %s does not take a type argument", name)
		}
		return Type{Kind: kind}, rest, nil
	}
	return parseGeneric(kind, rest)
}

func parseGeneric(kind Kind, rest string) (Type, string, error) {
	rest = strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(rest, "<") {
		return Type{}, "", fmt.Errorf("type %s needs an element type, as in %s<string>", kind, kind)
	}
	elem, rest, err := parseType(rest[1:])
	if err != nil {
		return Type{}, "", err
	}
	rest = strings.TrimLeft(rest, " \t")
	if !strings.HasPrefix(rest, ">") {
		if strings.HasPrefix(rest, ",") && kind == Map {
			return Type{}, "", fmt.Errorf("map takes one type argument, its value type (keys are strings), as in map<int>")
		}
		return Type{}, "", fmt.Errorf("expected '>' to close %s<%s", kind, elem)
	}
	return Type{Kind: kind, Elem: &elem}, rest[1:], nil
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func kindByName(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return Kind(k), true
		}
	}
	return 0, false
}

func typeList() string {
	return "any, bool, string, int, uint, double, bytes, duration, timestamp, list<T>, map<T>, ipaddress"
}
