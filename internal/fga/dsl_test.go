package fga

import (
	"strings"
	"testing"
)

func TestCompileDSLPositionsEveryProblem(t *testing.T) {
	src := `model
  schema 1.1
type user
type doc
  relations
    define viewer: [user, team]
    define editor: writer
    define self_only: self_only
condition broken(x: int) {
  x + "a"
}
`
	_, probs := CompileDSL(src)
	want := map[string][2]int{
		`type "team" is not defined`:               {6, 12},
		`undefined relation "writer"`:              {7, 12},
		`condition broken`:                         {9, 11},
		"relation doc#self_only has no entrypoint": {8, 12},
	}
	for frag, pos := range want {
		found := false
		for _, p := range probs {
			if strings.Contains(p.Msg, frag) || strings.Contains(p.Path, strings.TrimPrefix(frag, "condition ")) {
				found = true
				if p.Line != pos[0] || p.Col != pos[1] {
					t.Errorf("%q at %d:%d, want %d:%d (%v)", frag, p.Line, p.Col, pos[0], pos[1], p)
				}
			}
		}
		if !found {
			t.Errorf("no problem %q among %v", frag, probs)
		}
	}
}

func TestParseModules(t *testing.T) {
	mod := "schema: '1.2'\ncontents:\n  - core.fga\n  - docs.fga\n"
	files := map[string]string{
		"core.fga": "module core\ntype user\ntype group\n  relations\n    define member: [user]\n",
		"docs.fga": "module docs\ntype document\n  relations\n    define viewer: [user, group#member]\nextend type group\n  relations\n    define owner: [user]\n",
	}
	pm, probs := ParseModules(mod, files)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	m, probs := Compile(pm)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if _, ok := m.Relation("group", "owner"); !ok {
		t.Error("the extension's relation group#owner is missing")
	}

	files["docs.fga"] = "module docs\ntype user\ntype document\n  relations\n    define viewer [user]\n"
	_, probs = ParseModules(mod, files)
	if len(probs) == 0 || probs[0].File != "docs.fga" || probs[0].Line != 5 {
		t.Errorf("want the syntax error at docs.fga:5, got %v", probs)
	}
	files["docs.fga"] = "module docs\ntype user\n"
	_, probs = ParseModules(mod, files)
	if len(probs) != 1 || probs[0].File != "docs.fga" || probs[0].Line != 2 || probs[0].Col != 6 || !strings.Contains(probs[0].Msg, "duplicate type definition user") {
		t.Errorf("want the duplicate type at docs.fga:2:6, got %v", probs)
	}
	_, probs = ParseModules("schema: '1.2'\ncontents:\n  - missing.fga\n", files)
	if len(probs) != 1 || probs[0].File != "fga.mod" || probs[0].Line != 3 {
		t.Errorf("want the missing file named at fga.mod:3, got %v", probs)
	}
}
