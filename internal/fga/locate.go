package fga

import (
	"regexp"
	"strconv"
	"strings"
)

// CompileDSL parses and compiles a model in OpenFGA's modeling language. Every
// problem has its line and column: a syntax error where the parser met it, a model
// problem at the name of the type, relation or condition it concerns (and its Path).
func CompileDSL(src string) (*Model, []Problem) {
	pm, probs := ParseDSL(src)
	if len(probs) > 0 {
		return nil, probs
	}
	m, probs := Compile(pm)
	lines := strings.Split(src, "\n")
	for i := range probs {
		probs[i].Line, probs[i].Col = locate(lines, probs[i].Path)
	}
	return m, probs
}

var (
	typePath      = regexp.MustCompile(`^type_definitions\[(\d+)\](?:\.(?:metadata\.)?relations\.([^.]+))?`)
	conditionPath = regexp.MustCompile(`^conditions\.([^.]+)`)
)

// locate returns the position in DSL source of what a problem's path names: the name
// of the relation's `define`, of the type, of the condition, or the `schema` line;
// 1:1 when the source has no such line.
func locate(lines []string, path string) (line, col int) {
	if m := typePath.FindStringSubmatch(path); m != nil {
		n, _ := strconv.Atoi(m[1])
		start, end := typeBlock(lines, n)
		if start < 0 {
			return 1, 1
		}
		if m[2] != "" {
			for i := start + 1; i < end; i++ {
				if c := declared(lines[i], "define", m[2], ":"); c > 0 {
					return i + 1, c
				}
			}
		}
		return start + 1, declared(lines[start], "type", typeNameOf(lines[start]), "")
	}
	if m := conditionPath.FindStringSubmatch(path); m != nil {
		for i, l := range lines {
			if c := declared(l, "condition", m[1], "("); c > 0 {
				return i + 1, c
			}
		}
	}
	if strings.HasPrefix(path, "schema_version") {
		for i, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "schema" {
				return i + 1, strings.Index(l, "schema") + 1
			}
		}
	}
	return 1, 1
}

// typeBlock returns the line index of the n-th `type` declaration (the model's type
// definitions are in source order) and of the line its block ends before.
func typeBlock(lines []string, n int) (start, end int) {
	start = -1
	seen := 0
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "type" {
			continue
		}
		switch {
		case seen == n:
			start = i
		case seen == n+1:
			return start, i
		}
		seen++
	}
	return start, len(lines)
}

func typeNameOf(line string) string {
	if f := strings.Fields(line); len(f) >= 2 {
		return f[1]
	}
	return ""
}

// declared returns the 1-based column of name in a line declaring it with keyword
// (`define name:`, `condition name(`), or 0 when the line does not.
func declared(line, keyword, name, after string) int {
	rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), keyword)
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return 0
	}
	rest = strings.TrimLeft(rest, " \t")
	tail, ok := strings.CutPrefix(rest, name)
	if !ok || !strings.HasPrefix(strings.TrimLeft(tail, " \t"), after) || after == "" && tail != "" && tail[0] != ' ' && tail[0] != '\t' {
		return 0
	}
	return len(line) - len(rest) + 1
}
