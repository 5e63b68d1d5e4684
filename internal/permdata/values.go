package permdata

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// typeURLs are the canonical Any type URLs of Permify's attribute values, by type.
var typeURLs = map[string]string{
	"boolean": "type.googleapis.com/base.v1.BooleanValue", "boolean[]": "type.googleapis.com/base.v1.BooleanArrayValue",
	"string": "type.googleapis.com/base.v1.StringValue", "string[]": "type.googleapis.com/base.v1.StringArrayValue",
	"integer": "type.googleapis.com/base.v1.IntegerValue", "integer[]": "type.googleapis.com/base.v1.IntegerArrayValue",
	"double": "type.googleapis.com/base.v1.DoubleValue", "double[]": "type.googleapis.com/base.v1.DoubleArrayValue",
}

// shortKeys are the keys of the short value form ({"boolean": true}) by type.
var shortKeys = map[string][]string{
	"boolean": {"boolean", "bool"}, "string": {"string"}, "integer": {"integer", "int"}, "double": {"double"},
	"boolean[]": {"booleans", "boolean_array", "boolean"}, "string[]": {"strings", "string_array", "string"},
	"integer[]": {"integers", "integer_array", "integer"}, "double[]": {"doubles", "double_array", "double"},
}

// ParseValue turns a wire attribute value into the JSON-native value stored in caveat
// context (bool, string, float64, or []any of them) for an attribute of type typ. It
// accepts the canonical Any form ({"@type": ..., "data": v}), the short form
// ({"boolean": true}) and a bare JSON value.
func ParseValue(raw json.RawMessage, typ string) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, fmt.Errorf("the value is missing or not JSON")
	}
	if m, ok := v.(map[string]any); ok {
		data, err := unwrap(m, typ)
		if err != nil {
			return nil, err
		}
		v = data
	}
	return coerce(v, typ)
}

func unwrap(m map[string]any, typ string) (any, error) {
	if url, ok := m["@type"].(string); ok {
		if url != typeURLs[typ] {
			return nil, fmt.Errorf("value of type %s does not match the attribute's type %s (%s)", url, typ, typeURLs[typ])
		}
		if d, ok := m["data"]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("value of type %s has no \"data\"", url)
	}
	if d, ok := m["data"]; ok {
		return d, nil
	}
	for _, k := range shortKeys[typ] {
		if d, ok := m[k]; ok {
			return d, nil
		}
	}
	return nil, fmt.Errorf("value is neither {\"@type\": %q, \"data\": ...} nor {%q: ...}", typeURLs[typ], shortKeys[typ][0])
}

// coerce checks v against typ, normalising numbers and array wrappers ({"data": [...]}
// inside array values).
func coerce(v any, typ string) (any, error) {
	base, isList := strings.CutSuffix(typ, "[]")
	if !isList {
		return scalar(v, base)
	}
	if m, ok := v.(map[string]any); ok { // BooleanArrayValue{data: [...]} nested once more
		if d, ok := m["data"]; ok {
			v = d
		}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("expected an array of %s, got %s", base, describe(v))
	}
	out := make([]any, len(list))
	for i, e := range list {
		c, err := scalar(e, base)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func scalar(v any, base string) (any, error) {
	switch base {
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "integer":
		f, ok := number(v)
		if ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
			return f, nil
		}
	case "double":
		if f, ok := number(v); ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("expected a %s, got %s", base, describe(v))
}

// number accepts JSON numbers and numeric strings (proto3 JSON writes 64-bit integers
// as strings).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false
}

func describe(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// zeroValue is what Permify assumes for an attribute that was never written.
func zeroValue(typ string) any {
	if strings.HasSuffix(typ, "[]") {
		return []any{}
	}
	switch typ {
	case "boolean":
		return false
	case "string":
		return ""
	}
	return 0.0
}

// ValueJSON renders a stored value in the canonical Any form.
func ValueJSON(v any, typ string) map[string]any {
	if typ == "integer" {
		if f, ok := v.(float64); ok {
			v = int64(f)
		}
	}
	if base, isList := strings.CutSuffix(typ, "[]"); isList && base == "integer" {
		if list, ok := v.([]any); ok {
			ints := make([]any, len(list))
			for i, e := range list {
				if f, ok := e.(float64); ok {
					ints[i] = int64(f)
				} else {
					ints[i] = e
				}
			}
			v = ints
		}
	}
	return map[string]any{"@type": typeURLs[typ], "data": v}
}
