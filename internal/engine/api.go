// Package engine owns permission evaluation over a compiled schema and a store reader:
// check, bulk check, lookup resources, lookup subjects and expand. It knows nothing of gRPC, HTTP
// or SQL; everything it does runs in-process.
package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
)

// DefaultMaxDepth is SpiceDB's default dispatch depth limit.
const DefaultMaxDepth = 50

// Membership is a check's answer.
type Membership int

const (
	// NoPermission: the subject does not have the permission.
	NoPermission Membership = iota
	// HasPermission: the subject has the permission.
	HasPermission
	// Conditional: the answer depends on caveat parameters the request did not supply.
	Conditional
)

func (m Membership) String() string {
	switch m {
	case HasPermission:
		return "HAS_PERMISSION"
	case Conditional:
		return "CONDITIONAL_PERMISSION"
	default:
		return "NO_PERMISSION"
	}
}

// Result is a check's answer; Missing lists, sorted and without duplicates, the caveat
// parameters whose absence made it Conditional.
type Result struct {
	Membership Membership
	Missing    []string
}

// CheckRequest asks whether Subject has Permission on Resource.
type CheckRequest struct {
	Resource   rel.ObjectRef
	Permission string // a relation or a permission of Resource's definition
	Subject    rel.SubjectRef
	Context    map[string]any // caveat context supplied by the request
}

// ErrMaxDepth is returned when evaluation recursed past the depth limit; the answer
// is then unknown and no result is given.
var ErrMaxDepth = errors.New("maximum depth exceeded")

// ErrTooComplex is returned, under OpenFGA's semantics, for a request that would
// evaluate more than openFGAMaxSubproblems subproblems: answers on a cycle hold for
// their evaluation path alone and are evaluated again on each, which dense cyclic
// data (every group a member of every other) makes exponential. OpenFGA's error is
// resolution too complex, as for its depth limit.
var ErrTooComplex = errors.New("resolution too complex: the request evaluates too many subproblems")

// openFGAMaxSubproblems bounds the subproblems one request evaluates under
// OpenFGA's semantics.
const openFGAMaxSubproblems = 200_000

// MissingParamsError reports, under OpenFGA's semantics, a lookup of subjects that
// met a condition without all of its parameters, which OpenFGA fails whatever the
// other paths answer; Missing is sorted and without duplicates.
type MissingParamsError struct{ Missing []string }

func (e *MissingParamsError) Error() string {
	return "failed to evaluate relationship condition: context is missing parameters: " + strings.Join(e.Missing, ", ")
}

// CaveatEvalError reports a caveat that failed to evaluate (a context value of the
// wrong type, a runtime error in the expression, a cost limit).
type CaveatEvalError struct {
	Caveat string
	Err    error
}

func (e *CaveatEvalError) Error() string {
	return fmt.Sprintf("evaluating caveat `%s`: %v", e.Caveat, e.Err)
}

func (e *CaveatEvalError) Unwrap() error { return e.Err }
