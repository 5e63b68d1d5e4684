package caveat

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustType(t *testing.T, s string) Type {
	t.Helper()
	ty, err := ParseType(s)
	if err != nil {
		t.Fatalf("ParseType(%q): %v", s, err)
	}
	return ty
}

func compile(t *testing.T, expr string, params ...string) *Compiled {
	t.Helper()
	var ps []Param
	for _, p := range params {
		name, typ, _ := strings.Cut(p, " ")
		ps = append(ps, Param{Name: name, Type: mustType(t, typ)})
	}
	c, diags := Compile("test", ps, expr)
	if len(diags) > 0 {
		t.Fatalf("Compile(%q): %v", expr, diags)
	}
	return c
}

func eval(t *testing.T, c *Compiled, ctx map[string]any) Result {
	t.Helper()
	conv, err := c.ConvertContext(ctx)
	if err != nil {
		t.Fatalf("ConvertContext(%v): %v", ctx, err)
	}
	res, err := c.Eval(conv)
	if err != nil {
		t.Fatalf("Eval(%v): %v", ctx, err)
	}
	return res
}

func TestParseType(t *testing.T) {
	for _, s := range []string{"int", "uint", "bool", "string", "double", "bytes", "duration", "timestamp", "any", "ipaddress", "list<int>", "map<list<string>>", "list< map<bool> >"} {
		ty := mustType(t, s)
		if again := mustType(t, ty.String()); again.String() != ty.String() {
			t.Errorf("%q prints as %q, which parses as %q", s, ty, again)
		}
	}
	for _, s := range []string{"", "integer", "list", "list<>", "list<int", "map<string, int>", "int<string>", "list<int> x"} {
		if _, err := ParseType(s); err == nil {
			t.Errorf("ParseType(%q) accepted", s)
		}
	}
}

func TestEvalDefiniteAndMissing(t *testing.T) {
	c := compile(t, "a > 5 || flag", "a int", "flag bool")
	for _, tc := range []struct {
		ctx     map[string]any
		sat     bool
		missing []string
	}{
		{map[string]any{"a": float64(6), "flag": false}, true, nil},
		{map[string]any{"a": float64(1), "flag": false}, false, nil},
		{map[string]any{"a": float64(6)}, true, nil},               // short-circuits: flag not needed
		{map[string]any{"a": float64(1)}, false, []string{"flag"}}, // depends on flag
		{map[string]any{}, false, []string{"a", "flag"}},
		{map[string]any{"flag": true}, true, nil},
		{map[string]any{"unrelated": 1.0, "a": "7"}, true, nil}, // unknown keys ignored; numeric strings accepted
	} {
		res := eval(t, c, tc.ctx)
		if !slices.Equal(res.Missing, tc.missing) || (len(tc.missing) == 0 && res.Satisfied != tc.sat) {
			t.Errorf("ctx %v: got %+v, want satisfied=%v missing=%v", tc.ctx, res, tc.sat, tc.missing)
		}
	}
}

func TestTypesConvertFromJSON(t *testing.T) {
	for _, tc := range []struct {
		expr, param string
		value       any
		want        bool
	}{
		{"t < timestamp('2030-01-01T00:00:00Z')", "t timestamp", "2029-12-31T23:59:59Z", true},
		{"d > duration('1h')", "d duration", "90m", true},
		{"b == b'hi'", "b bytes", "aGk=", true},
		{"x == 2.5", "x double", 2.5, true},
		{"u >= 0 && u < 10", "u uint", float64(3), true},
		{"'a' in l", "l list<string>", []any{"b", "a"}, true},
		{"m['k'] == 3", "m map<int>", map[string]any{"k": float64(3)}, true},
		{"ip.in_cidr('10.0.0.0/8')", "ip ipaddress", "10.1.2.3", true},
		{"ip.in_cidr('10.0.0.0/8')", "ip ipaddress", "192.168.0.1", false},
		{"ip == ipaddress('::1')", "ip ipaddress", "::1", true},
		{"s.startsWith('ab')", "s string", "abc", true},
		{"a == 1", "a any", float64(1), true},
	} {
		c := compile(t, tc.expr, tc.param)
		name, _, _ := strings.Cut(tc.param, " ")
		if res := eval(t, c, map[string]any{name: tc.value}); res.Satisfied != tc.want || len(res.Missing) > 0 {
			t.Errorf("%s with %s=%v: got %+v, want %v", tc.expr, name, tc.value, res, tc.want)
		}
	}
}

func TestConvertErrorsNameTheParameter(t *testing.T) {
	for _, tc := range []struct {
		param string
		value any
	}{
		{"n int", "many"},
		{"n int", 1.5},
		{"n uint", float64(-1)},
		{"b bool", "yes"},
		{"t timestamp", "yesterday"},
		{"d duration", 5.0},
		{"ip ipaddress", "10.0.0.300"},
		{"l list<int>", []any{1.0, "x"}},
		{"m map<bool>", []any{}},
		{"by bytes", "%%%"},
	} {
		name, typ, _ := strings.Cut(tc.param, " ")
		c := compile(t, "true", tc.param)
		_, err := c.ConvertContext(map[string]any{name: tc.value})
		if err == nil || !strings.Contains(err.Error(), "`"+name+"`") || !strings.Contains(err.Error(), typ) {
			t.Errorf("%s = %v: error %v, want one naming the parameter and its type", tc.param, tc.value, err)
		}
		if pe, ok := errors.AsType[*ParamTypeError](err); !ok || pe.Caveat != "test" || pe.Param != name {
			t.Errorf("%s = %v: error %#v, want a *ParamTypeError naming caveat test and parameter %s", tc.param, tc.value, err, name)
		}
	}
}

func TestCompileDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		params []Param
		line   int
		msg    string
	}{
		{"a +", []Param{{"a", Type{Kind: Int}}}, 1, "Syntax error"},
		{"a == 1 &&\n  missing", []Param{{"a", Type{Kind: Int}}}, 2, "undeclared reference"},
		{"a + 1", []Param{{"a", Type{Kind: Int}}}, 1, "must result in a boolean value"},
		{"a == 'x'", []Param{{"a", Type{Kind: Int}}}, 1, "no matching overload"},
		{"", nil, 1, "empty"},
	} {
		_, diags := Compile("c", tc.params, tc.expr)
		if len(diags) == 0 || diags[0].Line != tc.line || !strings.Contains(diags[0].Msg, tc.msg) {
			t.Errorf("Compile(%q) = %+v, want line %d mentioning %q", tc.expr, diags, tc.line, tc.msg)
		}
	}
}

// TestCostLimit: a caveat cheap by its static estimate is evaluated over a context
// larger than the estimate assumed while that stays within the limit, and refused,
// without being evaluated, when the context makes it too expensive.
func TestCostLimit(t *testing.T) {
	c := compile(t, "l.all(x, x + 1 >= 0)", "l list<int>")
	for _, tc := range []struct {
		items int
		ok    bool
	}{{500, true}, {50_000, true}, {2_000_000, false}} {
		big := make([]any, tc.items)
		for i := range big {
			big[i] = float64(i)
		}
		conv, err := c.ConvertContext(map[string]any{"l": big})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Eval(conv)
		switch {
		case tc.ok && (err != nil || !res.Satisfied):
			t.Errorf("Eval over %d items: %+v %v, want satisfied", tc.items, res, err)
		case !tc.ok && !errors.Is(err, ErrCostExceeded):
			t.Errorf("Eval over %d items: %v, want ErrCostExceeded", tc.items, err)
		}
	}
}

// TestExpensiveCaveatsAreRefused: nested comprehensions are refused when compiled, by
// CEL's static cost estimate, instead of costing seconds per check.
func TestExpensiveCaveatsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		params []string
		ok     bool
	}{
		{"l.exists(x, x == 3)", []string{"l list<int>"}, true},
		{"ip.in_cidr(c)", []string{"ip ipaddress", "c string"}, true},
		{"s.startsWith(p) && l.all(x, x > 0)", []string{"s string", "p string", "l list<int>"}, true},
		{"a.all(x, b.exists(y, x == y))", []string{"a list<int>", "b list<int>"}, false},
		{"l.all(x, l.all(y, l.all(z, x + y + z >= 0)))", []string{"l list<int>"}, false},
		{"m.all(k, m.all(j, m[k] == m[j]))", []string{"m map<int>"}, false},
	} {
		var params []Param
		for _, p := range tc.params {
			name, typ, _ := strings.Cut(p, " ")
			params = append(params, Param{Name: name, Type: mustType(t, typ)})
		}
		_, diags := Compile("c", params, tc.expr)
		if ok := len(diags) == 0; ok != tc.ok {
			t.Errorf("Compile(%q): %v, want accepted %v", tc.expr, diags, tc.ok)
			continue
		}
		if !tc.ok && !strings.Contains(diags[0].Msg, "too expensive") {
			t.Errorf("Compile(%q): %v, want a cost diagnostic", tc.expr, diags)
		}
	}
}
