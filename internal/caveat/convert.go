package caveat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ParamTypeError reports a context value that does not fit its caveat parameter's
// type.
type ParamTypeError struct {
	Caveat, Param, Type string
	Err                 error
}

func (e *ParamTypeError) Error() string {
	return fmt.Sprintf("could not convert context parameter `%s`: for %s: %v", e.Param, e.Type, e.Err)
}

func (e *ParamTypeError) Unwrap() error { return e.Err }

// ConvertContext converts JSON-shaped context values (float64, string, bool, []any,
// map[string]any, nil — what encoding/json and structpb produce) to the types of c's
// parameters: whole numbers to int64, RFC 3339 strings to time.Time, Go duration strings
// to time.Duration, base64 strings to []byte, address strings to IP. Keys that are not
// parameters are kept, as SpiceDB ignores them. Already converted values pass unchanged,
// so converting twice is harmless; when nothing needs converting ctx itself is returned.
func (c *Compiled) ConvertContext(ctx map[string]any) (map[string]any, error) {
	var out map[string]any
	for _, p := range c.params {
		v, ok := ctx[p.Name]
		if !ok {
			continue
		}
		conv, changed, err := convert(p.Type, v)
		if err != nil {
			return nil, &ParamTypeError{Caveat: c.name, Param: p.Name, Type: p.Type.String(), Err: err}
		}
		if !changed {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(ctx))
			for k, v := range ctx {
				out[k] = v
			}
		}
		out[p.Name] = conv
	}
	if out == nil {
		return ctx, nil
	}
	return out, nil
}

// convert converts v to t and reports whether the result differs from v.
func convert(t Type, v any) (any, bool, error) {
	switch t.Kind {
	case Any:
		return v, false, nil
	case Bool:
		return require[bool](v, "a bool")
	case String:
		return require[string](v, "a string")
	case Int:
		return toInt(v, math.MinInt64)
	case Uint:
		return toInt(v, 0)
	case Double:
		return toDouble(v)
	case Bytes:
		return toBytes(v)
	case Duration:
		return toDuration(v)
	case Timestamp:
		return toTimestamp(v)
	case IPAddress:
		return toIP(v)
	case List:
		return toList(elemOf(t), v)
	case Map:
		return toMap(elemOf(t), v)
	}
	return nil, false, fmt.Errorf("unsupported parameter type %s", t)
}

func elemOf(t Type) Type {
	if t.Elem == nil {
		return Type{Kind: Any}
	}
	return *t.Elem
}

func require[T any](v any, what string) (any, bool, error) {
	if _, ok := v.(T); !ok {
		return nil, false, fmt.Errorf("%s value is required, but found %s", what, found(v))
	}
	return v, false, nil
}

// toInt converts to int64, accepting whole-valued float64 (JSON numbers) and numeric
// strings as SpiceDB does. Uint parameters are int64 too, with min 0: SpiceDB types them
// as CEL int so that `param > 5` type-checks.
func toInt(v any, min int64) (any, bool, error) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return nil, false, fmt.Errorf("%d is too large", x)
		}
		n = int64(x)
	case float64:
		i, err := wholeNumber(x)
		if err != nil {
			return nil, false, err
		}
		n = i
	case string, json.Number:
		i, err := parseWhole(fmt.Sprint(x))
		if err != nil {
			return nil, false, err
		}
		n = i
	default:
		return nil, false, fmt.Errorf("a whole number is required, found %s", describe(v))
	}
	if n < min {
		return nil, false, fmt.Errorf("a non-negative whole number is required, found %d", n)
	}
	_, same := v.(int64)
	return n, !same, nil
}

// wholeNumber accepts float64 values that are integers within int64's range.
func wholeNumber(f float64) (int64, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("a whole number is required, found %v", f)
	}
	if f < -(1<<63) || f >= 1<<63 {
		return 0, fmt.Errorf("%v is out of the 64-bit integer range", f)
	}
	return int64(f), nil
}

func parseWhole(s string) (int64, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("a whole number is required, found string %q", s)
	}
	return wholeNumber(f)
}

func toDouble(v any) (any, bool, error) {
	switch x := v.(type) {
	case float64:
		return x, false, nil
	case int64:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case uint64:
		return float64(x), true, nil
	case float32:
		return float64(x), true, nil
	case string, json.Number:
		f, err := strconv.ParseFloat(fmt.Sprint(x), 64)
		if err != nil {
			return nil, false, fmt.Errorf("a number is required, found string %q", x)
		}
		return f, true, nil
	}
	return nil, false, fmt.Errorf("a number is required, found %s", describe(v))
}

func toBytes(v any) (any, bool, error) {
	switch x := v.(type) {
	case []byte:
		return x, false, nil
	case string:
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return nil, false, fmt.Errorf("a base64 string is required, found %q: %v", clip(x), err)
		}
		return b, true, nil
	}
	return nil, false, fmt.Errorf("a base64 string is required, found %s", describe(v))
}

func toDuration(v any) (any, bool, error) {
	switch x := v.(type) {
	case time.Duration:
		return x, false, nil
	case string:
		d, err := time.ParseDuration(x)
		if err != nil {
			return nil, false, fmt.Errorf("a duration like \"1h30m\" or \"10s\" is required, found %q", clip(x))
		}
		return d, true, nil
	}
	return nil, false, fmt.Errorf("a duration string like \"1h30m\" is required, found %s", describe(v))
}

func toTimestamp(v any) (any, bool, error) {
	switch x := v.(type) {
	case time.Time:
		return x, false, nil
	case string:
		t, err := time.Parse(time.RFC3339, x)
		if err != nil {
			return nil, false, fmt.Errorf("could not parse RFC 3339 formatted timestamp string `%s`: %w", clip(x), err)
		}
		return t, true, nil
	}
	return nil, false, fmt.Errorf("timestamps requires a RFC 3339 formatted timestamp string, found: %s", found(v))
}

func toIP(v any) (any, bool, error) {
	switch x := v.(type) {
	case IP:
		return x, false, nil
	case string:
		ip, err := ParseIPAddress(x)
		if err != nil {
			return nil, false, err
		}
		return ip, true, nil
	}
	return nil, false, fmt.Errorf("an IP address string is required, found %s", describe(v))
}

// toList converts every element, copying the list only when an element changes.
func toList(elem Type, v any) (any, bool, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, false, fmt.Errorf("a list is required, found %s", describe(v))
	}
	var out []any
	for i, item := range list {
		conv, changed, err := convert(elem, item)
		if err != nil {
			return nil, false, fmt.Errorf("item %d: %w", i, err)
		}
		if changed && out == nil {
			out = append(make([]any, 0, len(list)), list[:i]...)
		}
		if out != nil {
			out = append(out, conv)
		}
	}
	if out == nil {
		return list, false, nil
	}
	return out, true, nil
}

// toMap converts every value, copying the map only when a value changes.
func toMap(elem Type, v any) (any, bool, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("a map with string keys is required, found %s", describe(v))
	}
	var out map[string]any
	for k, item := range m {
		conv, changed, err := convert(elem, item)
		if err != nil {
			return nil, false, fmt.Errorf("key %q: %w", k, err)
		}
		if changed {
			if out == nil {
				out = make(map[string]any, len(m))
			}
			out[k] = conv
		}
	}
	if out == nil {
		return m, false, nil
	}
	for k, item := range m {
		if _, done := out[k]; !done {
			out[k] = item
		}
	}
	return out, true, nil
}

// describe names a JSON-shaped value's kind for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	case string:
		return fmt.Sprintf("string %q", clip(x))
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// found names a JSON-shaped value as SpiceDB's messages do: its Go type and value.
func found(v any) string {
	if s, ok := v.(string); ok {
		v = clip(s)
	}
	return clip(fmt.Sprintf("%T `%v`", v, v))
}

func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
