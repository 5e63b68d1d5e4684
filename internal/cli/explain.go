package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// writeCheckTrace prints a check's debug trace as a tree, one step a line, in the
// form zed permission check --explain uses without its colours:
//
//	✓ document:readme view (1.2ms)
//	└── ✓ document:readme viewer (310µs)
//	    └── user:alice
//
// ✓ has the permission, ⨉ has not, ? depends on caveat context; a step answered
// from the cache says so instead of giving its own steps.
func writeCheckTrace(w io.Writer, t *v1.CheckDebugTrace) {
	tw := treeWriter{w: w}
	tw.step(t, "", "")
}

type treeWriter struct{ w io.Writer }

// step prints t after first (the branch leading to it) and its children after rest.
func (tw treeWriter) step(t *v1.CheckDebugTrace, first, rest string) {
	var notes []string
	if d := t.GetDuration().AsDuration(); d > 0 {
		notes = append(notes, d.String())
	}
	if t.GetWasCachedResult() {
		notes = append(notes, "cached")
	}
	if e := t.GetOptionalExpiresAt(); e != nil {
		notes = append(notes, "expires "+e.AsTime().UTC().Format("2006-01-02T15:04:05Z"))
	}
	line := glyph(t.GetResult(), t.GetCaveatEvaluationInfo()) + " " + t.GetResource().GetObjectType() + ":" + t.GetResource().GetObjectId() + " " + t.GetPermission()
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintln(tw.w, first+line)

	var children []func(first, rest string)
	if c := t.GetCaveatEvaluationInfo(); c != nil {
		children = append(children, func(first, rest string) { tw.caveat(c, first, rest) })
	}
	for _, sub := range t.GetSubProblems().GetTraces() {
		children = append(children, func(first, rest string) { tw.step(sub, first, rest) })
	}
	if len(t.GetSubProblems().GetTraces()) == 0 && !t.GetWasCachedResult() &&
		t.GetResult() == v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION {
		// A leaf that has the permission found the subject itself there.
		children = append(children, func(first, _ string) { fmt.Fprintln(tw.w, first+subjectFromV1(t.GetSubject()).String()) })
	}
	tw.children(children, rest)
}

// children prints each printer as a branch under the prefix rest.
func (tw treeWriter) children(printers []func(first, rest string), rest string) {
	for i, p := range printers {
		if i == len(printers)-1 {
			p(rest+"└── ", rest+"    ")
		} else {
			p(rest+"├── ", rest+"│   ")
		}
	}
}

func (tw treeWriter) caveat(c *v1.CaveatEvalInfo, first, rest string) {
	fmt.Fprintf(tw.w, "%s%s %s: %s\n", first, caveatGlyph(c.GetResult()), c.GetCaveatName(), c.GetExpression())
	var lines []string
	if len(c.GetContext().GetFields()) > 0 {
		ctxJSON, err := json.Marshal(c.GetContext().AsMap())
		if err == nil {
			lines = append(lines, "context: "+string(ctxJSON))
		}
	}
	if missing := c.GetPartialCaveatInfo().GetMissingRequiredContext(); len(missing) > 0 {
		lines = append(lines, "missing context: "+strings.Join(missing, ", "))
	}
	printers := make([]func(first, rest string), len(lines))
	for i, l := range lines {
		printers[i] = func(first, _ string) { fmt.Fprintln(tw.w, first+l) }
	}
	tw.children(printers, rest)
}

// glyph marks a step's answer; a caveat the answer rests on decides it, as in zed.
func glyph(p v1.CheckDebugTrace_Permissionship, c *v1.CaveatEvalInfo) string {
	if c != nil {
		return caveatGlyph(c.GetResult())
	}
	switch p {
	case v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION:
		return "✓"
	case v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION:
		return "?"
	case v1.CheckDebugTrace_PERMISSIONSHIP_NO_PERMISSION:
		return "⨉"
	default:
		return "-"
	}
}

func caveatGlyph(r v1.CaveatEvalInfo_Result) string {
	switch r {
	case v1.CaveatEvalInfo_RESULT_TRUE:
		return "✓"
	case v1.CaveatEvalInfo_RESULT_FALSE:
		return "⨉"
	default:
		return "?"
	}
}
