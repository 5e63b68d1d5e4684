package validationfile

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a validation file, at the place a person would fix it.
type Problem struct {
	File string
	Line int // 1-based; 0 when the problem has no single line
	Col  int // 1-based byte column; 0 when unknown
	Msg  string
}

// String renders "file:line:col: msg", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Col > 0 {
			fmt.Fprintf(&b, ":%d", p.Col)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ProblemsError is returned when a file cannot be run at all: it does not parse, its
// schema does not compile, or a relationship is malformed or not allowed by the schema.
// It lists every problem found, in file order.
type ProblemsError struct {
	Problems []Problem
}

// Error joins the problems, one per line.
func (e *ProblemsError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems while a file is read.
type problems []Problem

func (ps *problems) add(pos position, format string, args ...any) {
	*ps = append(*ps, Problem{File: pos.File, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf(format, args...)})
}

// err returns the collected problems as an error, or nil when there are none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ProblemsError{Problems: ps}
}
