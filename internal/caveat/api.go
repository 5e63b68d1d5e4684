// Package caveat owns CEL caveats: parameter types, compiling an expression once
// against its typed parameters, converting JSON-shaped context values to those types,
// and cost-limited evaluation that reports missing parameters instead of failing.
package caveat

// Param is a typed caveat parameter.
type Param struct {
	Name string
	Type Type
}
