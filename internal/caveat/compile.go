package caveat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// maxCost bounds the work one evaluation may do, so a caveat over a large list in a
// request context cannot stall a check. It is CEL's abstract cost, roughly one unit per
// visited node or compared element, as CEL's static estimate counts it: an expression
// whose estimate is over the limit is refused when compiled (for values of up to
// assumedSize items) or before it is evaluated (for larger values). The estimate
// stands in for CEL's run-time cost tracking, which costs time quadratic in the size
// of a list a comprehension walks.
const maxCost = 1_000_000

// assumedSize is the size the static cost estimate assumes for every list, map, string
// and bytes value a caveat receives: generous for the lists a caveat context usually
// carries, and small enough that nesting comprehensions over them shows its cost.
const assumedSize = 1000

// ErrCostExceeded reports a caveat evaluation refused for the work it would do.
var ErrCostExceeded = errors.New("caveat evaluation exceeded its cost limit")

// Diagnostic is a problem found while compiling a caveat expression. Line and Col are
// 1-based and relative to the start of the expression text.
type Diagnostic struct {
	Line, Col int
	Msg       string
	// Located: CEL gave the position (a problem inside the expression); otherwise
	// the problem is with the whole expression and Line and Col are 1.
	Located bool
}

// Compiled is a type-checked caveat expression, ready to evaluate concurrently.
type Compiled struct {
	name      string
	params    []Param
	expr      string
	canonical string
	env       *cel.Env
	ast       *cel.Ast
	prog      cel.Program
}

// Result is the outcome of evaluating a caveat. When Missing is not empty the result is
// conditional on those parameters (sorted, without duplicates) and Satisfied means nothing.
type Result struct {
	Satisfied bool
	Missing   []string
}

// Compile type-checks expr against params. The expression must be of type bool.
func Compile(name string, params []Param, expr string) (*Compiled, []Diagnostic) {
	// Macro calls are tracked so that the expression can be printed back (Canonical).
	opts := []cel.EnvOption{cel.CrossTypeNumericComparisons(true), cel.EnableMacroCallTracking()}
	opts = append(opts, ipFunctions()...)
	for _, p := range params {
		opts = append(opts, cel.Variable(p.Name, celType(p.Type)))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, []Diagnostic{{Line: 1, Col: 1, Msg: err.Error()}}
	}
	if strings.TrimSpace(expr) == "" {
		return nil, []Diagnostic{{Line: 1, Col: 1, Msg: "caveat expression is empty"}}
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		var diags []Diagnostic
		for _, e := range iss.Errors() {
			loc := e.Location
			line, col := 1, 1
			if loc != nil && loc.Line() > 0 {
				line, col = loc.Line(), loc.Column()+1
			}
			located := loc != nil && loc.Line() > 0
			if strings.HasPrefix(e.Message, recursionLimitMsg) {
				line, col = deepest(expr)
				located = true
			}
			diags = append(diags, Diagnostic{Line: line, Col: col, Msg: e.Message, Located: located})
		}
		return nil, diags
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, []Diagnostic{{
			Line: 1, Col: 1,
			Msg: fmt.Sprintf("caveat expression must result in a boolean value: found `%s`", ast.OutputType()),
		}}
	}
	if est, err := env.EstimateCost(ast, sizesUpTo(assumedSize)); err == nil && est.Max > maxCost {
		return nil, []Diagnostic{{
			Line: 1, Col: 1,
			Msg: fmt.Sprintf("caveat expression is too expensive: with lists, maps and strings of %d items it may cost up to %s per evaluation, "+
				"more than the limit of %d (comprehensions nested in one another multiply their cost)", assumedSize, costString(est.Max), maxCost),
		}}
	}
	prog, err := env.Program(ast, cel.EvalOptions(cel.OptPartialEval))
	if err != nil {
		return nil, []Diagnostic{{Line: 1, Col: 1, Msg: err.Error()}}
	}
	canonical, err := cel.AstToString(ast)
	if err != nil {
		canonical = strings.TrimSpace(expr) // an expression CEL cannot print back stays as written
	}
	return &Compiled{name: name, params: params, expr: expr, canonical: canonical, env: env, ast: ast, prog: prog}, nil
}

// sizesUpTo is the static cost estimate's view of values it cannot see: every one of
// up to so many items; calls cost what CEL's defaults say.
type sizesUpTo uint64

func (n sizesUpTo) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: uint64(n)}
}

func (sizesUpTo) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// checkCost refuses an evaluation over values larger than the compile-time estimate
// assumed, when the estimate for their real size is over the limit.
func (c *Compiled) checkCost(vars map[string]any) error {
	largest := 0
	for _, v := range vars {
		largest = max(largest, largestSize(v))
	}
	if largest <= assumedSize {
		return nil
	}
	est, err := c.env.EstimateCost(c.ast, sizesUpTo(largest))
	if err != nil || est.Max > maxCost {
		return fmt.Errorf("caveat `%s` over a context value of %d items: %w", c.name, largest, ErrCostExceeded)
	}
	return nil
}

// largestSize is the size of the largest list, map, string or bytes value in a
// converted context value, nested ones included.
func largestSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	case []any:
		n := len(x)
		for _, e := range x {
			n = max(n, largestSize(e))
		}
		return n
	case map[string]any:
		n := len(x)
		for k, e := range x {
			n = max(n, len(k), largestSize(e))
		}
		return n
	}
	return 0
}

// costString writes a cost estimate readably; an unbounded one is "an unbounded amount".
func costString(c uint64) string {
	if c == math.MaxUint64 {
		return "an unbounded amount"
	}
	return strconv.FormatUint(c, 10)
}

// celType maps a parameter type to its CEL type.
func celType(t Type) *cel.Type {
	switch t.Kind {
	case Bool:
		return cel.BoolType
	case String:
		return cel.StringType
	case Int, Uint:
		return cel.IntType
	case Double:
		return cel.DoubleType
	case Bytes:
		return cel.BytesType
	case Duration:
		return cel.DurationType
	case Timestamp:
		return cel.TimestampType
	case IPAddress:
		return ipType
	case List:
		return cel.ListType(celType(elemOf(t)))
	case Map:
		return cel.MapType(cel.StringType, celType(elemOf(t)))
	}
	return cel.DynType
}

// Name returns the caveat's name.
func (c *Compiled) Name() string { return c.name }

// Params returns the caveat's parameters in declaration order.
func (c *Compiled) Params() []Param { return c.params }

// Expression returns the caveat's CEL source.
func (c *Compiled) Expression() string { return c.expr }

// Canonical is the expression as CEL prints it back, as SpiceDB returns it: one space
// around operators, parentheses where needed, lines wrapped after the first `&&` or
// `||` past column 80.
func (c *Compiled) Canonical() string { return c.canonical }

// Eval evaluates the caveat against a converted context (see ConvertContext). Parameters
// absent from ctx are unknown: if the answer depends on them, the result lists them in
// Missing; if it does not (`a || b` with a true), the result is definite.
func (c *Compiled) Eval(ctx map[string]any) (Result, error) {
	var unknown []*cel.AttributePatternType
	var absent []string
	vars := make(map[string]any, len(c.params))
	for _, p := range c.params {
		if v, ok := ctx[p.Name]; ok {
			vars[p.Name] = v
		} else {
			unknown = append(unknown, cel.AttributePattern(p.Name))
			absent = append(absent, p.Name)
		}
	}
	if err := c.checkCost(vars); err != nil {
		return Result{}, err
	}
	act, err := cel.PartialVars(vars, unknown...)
	if err != nil {
		return Result{}, fmt.Errorf("caveat `%s`: %w", c.name, err)
	}
	out, _, err := c.prog.Eval(act)
	if err != nil {
		return Result{}, fmt.Errorf("caveat `%s`: evaluating %s: %w", c.name, c.expr, err)
	}
	return c.result(out, absent)
}

func (c *Compiled) result(out ref.Val, absent []string) (Result, error) {
	switch v := out.(type) {
	case types.Bool:
		return Result{Satisfied: bool(v)}, nil
	case *types.Unknown:
		var missing []string
		for _, id := range v.IDs() {
			trails, _ := v.GetAttributeTrails(id)
			for _, tr := range trails {
				missing = append(missing, tr.Variable())
			}
		}
		if len(missing) == 0 { // an unknown without a named attribute
			missing = append(missing, absent...)
		}
		slices.Sort(missing)
		return Result{Missing: slices.Compact(missing)}, nil
	case *types.Err:
		return Result{}, fmt.Errorf("caveat `%s`: evaluating %s: %w", c.name, c.expr, v)
	}
	return Result{}, fmt.Errorf("caveat `%s`: expression produced %s, not a boolean", c.name, out.Type().TypeName())
}
