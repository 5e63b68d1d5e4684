package engine

import "slices"

// state is the four-valued answer for one resource during evaluation. depthErr means the
// answer depended on a branch cut off by the depth limit: unknown, never guessed.
type state uint8

const (
	no state = iota
	has
	cond
	depthErr
)

// outcome is one resource's answer; missing is set only for cond.
type outcome struct {
	st      state
	missing []string
}

var (
	outNo  = outcome{st: no}
	outHas = outcome{st: has}
	outErr = outcome{st: depthErr}
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
	case a.st == cond && b.st == cond:
		return outcome{st: cond, missing: mergeMissing(a.missing, b.missing)}
	case a.st == cond:
		return a
	default:
		return b
	}
}

// and is intersection: no wins; an unknown branch taints anything but no.
func and(a, b outcome) outcome {
	switch {
	case a.st == no || b.st == no:
		return outNo
	case a.st == depthErr || b.st == depthErr:
		return outErr
	case a.st == cond && b.st == cond:
		return outcome{st: cond, missing: mergeMissing(a.missing, b.missing)}
	case a.st == cond:
		return a
	default:
		return b
	}
}

// not is exclusion's right side: has and no swap; cond and unknown stay.
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

func mergeMissing(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
