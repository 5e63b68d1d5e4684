package validationfile

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/rel"
)

// ExpectedRelation is one entry of SpiceDB's `validation` section: every subject that
// the expansion of Permission on Resource reaches, and through which relations.
type ExpectedRelation struct {
	Key        string // as written: "document:1#view"
	Resource   rel.ObjectRef
	Permission string
	Line, Col  int
	Subjects   []ExpectedSubject
}

// ExpectedSubject is one line of an entry, `[user:tom] is <document:1#viewer>`.
type ExpectedSubject struct {
	Text      string
	Line, Col int
	Subject   SubjectText
	// Resources are the relations written in `<...>`, in the order written.
	Resources []string
}

// validation parses the `validation` section: a mapping of `type:id#permission` to a
// list (possibly empty) of expected subjects.
func (p *parser) validation(v *yaml.Node) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		p.probs.add(p.pos(v), "validation: expected a mapping of \"type:id#permission\" to lists of expected subjects, found %s", kindName(v))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, list := v.Content[i], v.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			p.probs.add(p.pos(k), "validation: %q appears twice (first on line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if er, ok := p.expectedRelation(k, list); ok {
			p.f.Validation = append(p.f.Validation, er)
		}
	}
}

func (p *parser) expectedRelation(k, list *yaml.Node) (ExpectedRelation, bool) {
	er := ExpectedRelation{Key: k.Value, Line: k.Line, Col: k.Column}
	obj, permission, ok := strings.Cut(k.Value, "#")
	var err error
	if er.Resource, err = rel.ParseObject(obj); !ok || err != nil {
		p.probs.add(p.pos(k), "validation: %q: expected \"type:id#permission\"", k.Value)
		return er, false
	}
	if err := rel.ValidateRelationName(permission); err != nil {
		p.probs.add(p.pos(k), "validation: %q: %v", k.Value, err)
		return er, false
	}
	er.Permission = permission
	if isNull(list) {
		return er, true
	}
	if list.Kind != yaml.SequenceNode {
		p.probs.add(p.pos(list), "validation: %s: expected a list of subjects like \"[user:tom] is <document:1#viewer>\", found %s", k.Value, kindName(list))
		return er, false
	}
	good := true
	for _, item := range list.Content {
		if item.Kind != yaml.ScalarNode {
			p.probs.add(p.pos(item), "validation: %s: expected a subject like \"[user:tom] is <document:1#viewer>\", found %s", k.Value, kindName(item))
			good = false
			continue
		}
		es, err := parseExpectedSubject(item.Value)
		if err != nil {
			p.probs.add(p.pos(item), "validation: %s: %q: %v", k.Value, item.Value, err)
			good = false
			continue
		}
		es.Line, es.Col = item.Line, item.Column
		er.Subjects = append(er.Subjects, es)
	}
	return er, good
}

var resourcePattern = regexp.MustCompile(`<([^>]+)>`)

// parseExpectedSubject parses `[subject] is <type:id#relation>/<...>`, where subject is
// `type:id[#relation]`, optionally `[...]` (caveated), and for a wildcard optionally
// ` - {excluded, ...}`.
func parseExpectedSubject(text string) (ExpectedSubject, error) {
	es := ExpectedSubject{Text: text}
	s := strings.TrimSpace(text)
	end := closingBracket(s)
	if !strings.HasPrefix(s, "[") || end < 0 {
		return es, fmt.Errorf("expected \"[subject] is <type:id#relation>\"")
	}
	var err error
	if es.Subject, err = parseSubjectText(s[1:end]); err != nil {
		return es, err
	}
	// zed reads every <...> after the subject and ignores the text around them
	// (normally ` is ` and `/`); so does latch, so that the files it accepts agree.
	for _, m := range resourcePattern.FindAllStringSubmatch(s[end+1:], -1) {
		if err := checkResourceRelation(m[1]); err != nil {
			return es, err
		}
		es.Resources = append(es.Resources, m[1])
	}
	return es, nil
}

// closingBracket returns the index of the `]` closing the `[` at s[0], or -1.
func closingBracket(s string) int {
	depth := 0
	for i := range len(s) {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func parseSubjectText(s string) (SubjectText, error) {
	head, excluded, hasEx := strings.Cut(s, " - ")
	st, err := parseCaveatedSubject(head)
	if err != nil || !hasEx {
		return st, err
	}
	inner, ok := strings.CutPrefix(strings.TrimSpace(excluded), "{")
	inner, ok2 := strings.CutSuffix(inner, "}")
	if !ok || !ok2 {
		return st, fmt.Errorf("expected excluded subjects written as - {type:id, ...}")
	}
	for part := range strings.SplitSeq(inner, ",") {
		ex, err := parseCaveatedSubject(part)
		if err != nil {
			return st, err
		}
		st.Excluded = append(st.Excluded, ex)
	}
	return st, nil
}

// parseCaveatedSubject parses `type:id[#relation]` with an optional `[...]` suffix.
func parseCaveatedSubject(s string) (SubjectText, error) {
	s = strings.TrimSpace(s)
	name, caveated := strings.CutSuffix(s, "[...]")
	sub, err := rel.ParseSubject(name)
	if err != nil {
		return SubjectText{}, err
	}
	return SubjectText{Subject: sub.String(), Caveated: caveated}, nil
}

// checkResourceRelation checks `type:id#relation`, a relation a subject was found in.
func checkResourceRelation(s string) error {
	sub, err := rel.ParseSubject(s)
	if err == nil && (sub.Relation == "" || sub.Object.ID == rel.Wildcard) {
		err = fmt.Errorf("relation %q: expected type:id#relation", s)
	}
	return err
}

// compareRelation lists what differs between an entry and the subjects found for it,
// the way zed does: each expected subject must be found with the same exclusions, the
// same caveat marker and the same relations; every found subject must be expected.
func compareRelation(file string, er ExpectedRelation, found []FoundSubject) []Failure {
	byName := make(map[string]FoundSubject, len(found))
	for _, f := range found {
		byName[f.Subject] = f
	}
	var out []Failure
	listed := map[string]bool{}
	for _, es := range er.Subjects {
		listed[es.Subject.Subject] = true
		f, ok := byName[es.Subject.Subject]
		want := subjectLine(es.Subject, es.Resources)
		switch {
		case !ok:
			out = append(out, Failure{
				File: file, Line: es.Line, Col: es.Col, What: er.Key,
				Msg: fmt.Sprintf("expected %s, found no subject %s", want, es.Subject.Subject),
			})
		case !sameSubject(es, f):
			out = append(out, Failure{
				File: file, Line: es.Line, Col: es.Col, What: er.Key,
				Msg: fmt.Sprintf("expected %s, found %s", want, f),
			})
		}
	}
	for _, f := range found {
		if !listed[f.Subject] {
			out = append(out, Failure{
				File: file, Line: er.Line, Col: er.Col, What: er.Key,
				Msg: fmt.Sprintf("expected no subject %s, found %s", f.Subject, f),
			})
		}
	}
	return out
}

func sameSubject(es ExpectedSubject, f FoundSubject) bool {
	want := slices.Clone(es.Resources)
	slices.Sort(want)
	return es.Subject.Caveated == f.Caveated &&
		slices.Equal(sortedStrings(es.Subject.Excluded), sortedStrings(f.Excluded)) &&
		slices.Equal(want, f.Resources)
}

func sortedStrings(ss []SubjectText) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.String()
	}
	slices.Sort(out)
	return out
}
