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
// ✓ has the permission, ⨉ has not, ? depends on caveat context, ∵ a step whose
// answer the trace does not give; a step answered from the cache says so instead of
// giving its own steps. Lines are zed's: "(cached)" before the duration, a caveat as
// its expression then its name, its context as indented JSON, the subject under a
// granted step without sub-steps. latch adds a relationship's expiry after the
// duration.
func writeCheckTrace(w io.Writer, t *v1.CheckDebugTrace) {
	tw := treeWriter{w: w}
	tw.step(t, "", "")
}

type treeWriter struct{ w io.Writer }

// step prints t after first (the branch leading to it) and its children after rest.
func (tw treeWriter) step(t *v1.CheckDebugTrace, first, rest string) {
	line := glyph(t.GetResult(), t.GetCaveatEvaluationInfo()) + " " + t.GetResource().GetObjectType() + ":" + t.GetResource().GetObjectId() + " " + t.GetPermission()
	if t.GetWasCachedResult() {
		line += " (cached)"
	}
	if d := t.GetDuration(); d != nil {
		line += " (" + d.AsDuration().String() + ")"
	}
	if e := t.GetOptionalExpiresAt(); e != nil {
		line += " (expires " + e.AsTime().UTC().Format("2006-01-02T15:04:05Z") + ")"
	}
	fmt.Fprintln(tw.w, first+line)

	var children []func(first, rest string)
	if c := t.GetCaveatEvaluationInfo(); c != nil {
		children = append(children, func(first, rest string) { tw.caveat(c, first, rest) })
	}
	for _, sub := range t.GetSubProblems().GetTraces() {
		children = append(children, func(first, rest string) { tw.step(sub, first, rest) })
	}
	if t.GetSubProblems() == nil && t.GetResult() == v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION {
		// A step granted without sub-steps found the subject itself there.
		s := t.GetSubject()
		subject := strings.TrimSpace(s.GetObject().GetObjectType() + ":" + s.GetObject().GetObjectId() + " " + s.GetOptionalRelation())
		children = append(children, func(first, _ string) { fmt.Fprintln(tw.w, first+subject) })
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
	fmt.Fprintf(tw.w, "%s%s %s %s\n", first, caveatGlyph(c.GetResult()), c.GetExpression(), c.GetCaveatName())
	missing := c.GetResult() == v1.CaveatEvalInfo_RESULT_MISSING_SOME_CONTEXT
	var lines []string
	if len(c.GetContext().GetFields()) > 0 {
		ctxJSON, err := json.MarshalIndent(c.GetContext().AsMap(), "", "  ")
		if err == nil {
			lines = append(lines, string(ctxJSON))
		}
	} else if !missing {
		lines = append(lines, "(no matching context found)")
	}
	if missing {
		lines = append(lines, "missing context: "+strings.Join(c.GetPartialCaveatInfo().GetMissingRequiredContext(), ", "))
	}
	printers := make([]func(first, rest string), len(lines))
	for i, l := range lines {
		// A multi-line value (indented JSON) continues under its branch, as zed prints it.
		printers[i] = func(first, rest string) {
			fmt.Fprintln(tw.w, first+strings.ReplaceAll(l, "\n", "\n"+rest))
		}
	}
	tw.children(printers, rest)
}

// glyph marks a step's answer as zed does: a conditional one by the caveat it rests
// on (✓ when that evaluated true), ∵ one the trace leaves unspecified. A conditional
// step without a caveat is ?, where zed would show ✓.
func glyph(p v1.CheckDebugTrace_Permissionship, c *v1.CaveatEvalInfo) string {
	switch p {
	case v1.CheckDebugTrace_PERMISSIONSHIP_HAS_PERMISSION:
		return "✓"
	case v1.CheckDebugTrace_PERMISSIONSHIP_CONDITIONAL_PERMISSION:
		if c == nil {
			return "?"
		}
		return caveatGlyph(c.GetResult())
	case v1.CheckDebugTrace_PERMISSIONSHIP_NO_PERMISSION:
		return "⨉"
	default:
		return "∵"
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
