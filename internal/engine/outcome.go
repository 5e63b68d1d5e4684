package engine

import (
	"cmp"
	"slices"
)

// state is the five-valued answer for one resource during evaluation. depthErr means the
// answer depended on a branch cut off by the depth limit, evalErr on a caveat that failed
// to evaluate: unknown, never guessed.
type state uint8

const (
	no state = iota
	has
	cond
	depthErr
	evalErr
	// cyc is no because a branch met its own subproblem again on its evaluation path
	// (OpenFGA's semantics only): no for this path, so never remembered or cached.
	cyc
)

// outcome is one resource's answer; missing is set only for cond, err only for evalErr.
//
// The operators are Kleene's three-valued logic with the unknowns ranked: a union
// that one operand grants is granted and an intersection that one operand denies is
// denied whatever the others are, errors included; otherwise a depth error outranks a
// caveat error, which outranks a conditional answer, and of two caveat errors the
// lesser (by caveat name, then message) stands. Every operator is commutative and
// associative, so the order in which branches are evaluated, cached, batched or
// dispatched cannot change what comes out.
type outcome struct {
	st state
	// d holds what cond and evalErr carry, apart, so that an outcome is two words: a
	// lookup's maps hold one per object.
	d *outcomeDetail
}

type outcomeDetail struct {
	missing []string
	err     *CaveatEvalError
}

// condOn is the conditional outcome missing the parameters missing (none: the context
// decides nothing yet).
func condOn(missing []string) outcome {
	if missing == nil {
		return outcome{st: cond}
	}
	return outcome{st: cond, d: &outcomeDetail{missing: missing}}
}

// missing is a conditional outcome's missing parameters.
func (o outcome) missing() []string {
	if o.d == nil {
		return nil
	}
	return o.d.missing
}

// err is a failed caveat's error.
func (o outcome) err() *CaveatEvalError {
	if o.d == nil {
		return nil
	}
	return o.d.err
}

var (
	outNo  = outcome{st: no}
	outHas = outcome{st: has}
	outErr = outcome{st: depthErr}
	outCyc = outcome{st: cyc}
)

// results maps resource ids to their outcomes. An absent id means no.
type results map[string]outcome

func (r results) get(id string) outcome {
	if o, ok := r[id]; ok {
		return o
	}
	return outNo
}

// put stores o, dropping no so that absence keeps meaning no.
func (r results) put(id string, o outcome) {
	if o.st == no {
		delete(r, id)
		return
	}
	r[id] = o
}

// or is union: has wins; an unknown branch taints anything but has; cond merges missing.
func or(a, b outcome) outcome {
	switch {
	case a.st == has || b.st == has:
		return outHas
	case a.st == depthErr || b.st == depthErr:
		return outErr
	case a.st == evalErr || b.st == evalErr:
		return lesserErr(a, b)
	case a.st == cond && b.st == cond:
		return condOn(mergeMissing(a.missing(), b.missing()))
	case a.st == cond:
		return a
	case a.st == cyc && b.st == no:
		return a
	default:
		return b
	}
}

// and is intersection: no wins; an unknown branch taints anything but no. A cycle
// is no for its path, which wins over the unknowns as no does (OpenFGA's rule).
func and(a, b outcome) outcome {
	switch {
	case a.st == no || b.st == no:
		return outNo
	case a.st == cyc || b.st == cyc:
		return outCyc
	case a.st == depthErr || b.st == depthErr:
		return outErr
	case a.st == evalErr || b.st == evalErr:
		return lesserErr(a, b)
	case a.st == cond && b.st == cond:
		return condOn(mergeMissing(a.missing(), b.missing()))
	case a.st == cond:
		return a
	default:
		return b
	}
}

// not is exclusion's right side: has and no swap; cond, unknown and cyc stay (a
// subtracted cycle denies, as in OpenFGA).
func not(a outcome) outcome {
	switch a.st {
	case has:
		return outNo
	case no:
		return outHas
	default:
		return a
	}
}

// caveatErr is the outcome of a caveat that failed to evaluate.
func caveatErr(name string, err error) outcome {
	return outcome{st: evalErr, d: &outcomeDetail{err: &CaveatEvalError{Caveat: name, Err: err}}}
}

// lesserErr returns the caveat error of a and b (at least one is one) that sorts first
// by caveat name and then message, so that which of several failing caveats a request
// reports does not depend on the order they were met in.
func lesserErr(a, b outcome) outcome {
	switch {
	case a.st != evalErr:
		return b
	case b.st != evalErr:
		return a
	}
	if c := cmp.Or(cmp.Compare(a.err().Caveat, b.err().Caveat), cmp.Compare(a.err().Error(), b.err().Error())); c > 0 {
		return b
	}
	return a
}

func mergeMissing(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
