package validationfile

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/engine"
)

func run(t *testing.T, src string) (Report, error) {
	t.Helper()
	f, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return Run(context.Background(), f)
}

func TestRunGoodFile(t *testing.T) {
	rep, err := run(t, goodFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Assertions) != 4 || !rep.OK() {
		t.Errorf("checked %d, failures %v; want 4 checked, all held", len(rep.Assertions), rep.Failures)
	}
}

const failingFile = `schema: |-
  definition user {}
  caveat c(x int) { x > 1 }
  definition document {
    relation viewer: user | user with c
    permission view = viewer
  }
relationships: |-
  document:1#viewer@user:alice
  document:1#viewer@user:bob[c]
assertions:
  assertTrue:
    - document:1#view@user:alice
    - document:1#view@user:bob
    - document:1#nope@user:alice
  assertFalse:
    - document:1#view@user:alice
  assertCaveated:
    - document:1#view@user:alice
    - document:1#view@user:bob
`

func TestRunReportsEveryFailure(t *testing.T) {
	rep, err := run(t, failingFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Assertions) != 6 {
		t.Errorf("checked %d assertions, want 6", len(rep.Assertions))
	}
	want := []string{
		`t.yaml:14: assertTrue "document:1#view@user:bob": expected HAS_PERMISSION, found CONDITIONAL_PERMISSION (missing context: x)`,
		`t.yaml:15: assertTrue "document:1#nope@user:alice": error: `,
		`t.yaml:17: assertFalse "document:1#view@user:alice": expected NO_PERMISSION, found HAS_PERMISSION`,
		`t.yaml:19: assertCaveated "document:1#view@user:alice": expected CONDITIONAL_PERMISSION, found HAS_PERMISSION`,
	}
	if len(rep.Failures) != len(want) {
		t.Fatalf("failures:\n%v\nwant %d", rep.Failures, len(want))
	}
	for i, w := range want {
		if got := rep.Failures[i].String(); !strings.HasPrefix(got, w) {
			t.Errorf("failure %d = %q, want prefix %q", i, got, w)
		}
	}
	if rep.Failures[1].Err == nil {
		t.Error("an unknown permission should be an error, not an answer")
	}
	if rep.OK() {
		t.Error("a report with failures is OK")
	}
}

func TestRunSchemaErrorNamesFileLine(t *testing.T) {
	src := "relationships: ''\nschema: |-\n  definition user {}\n  definition document {\n    relation viewer: usr\n  }\n"
	_, err := run(t, src)
	got := problemsOf(t, err)
	if len(got) == 0 || !strings.HasPrefix(got[0], "t.yaml:5:") || !strings.Contains(got[0], "schema: ") {
		t.Errorf("problems = %q, want the first on t.yaml line 5", got)
	}
}

func TestRunFoldedSchemaErrorNamesFileLine(t *testing.T) {
	src := "schema: >-\n  definition user {}\n\n  definition document {\n    relation viewer: user\n\n    permission view = viewr\n  }\n"
	_, err := run(t, src)
	got := problemsOf(t, err)
	if len(got) == 0 || !strings.HasPrefix(got[0], "t.yaml:7:") {
		t.Errorf("problems = %q, want the first on t.yaml line 7", got)
	}
}

func TestRunRelationshipProblems(t *testing.T) {
	src := `schema: |-
  definition user {}
  definition document {
    relation viewer: user
  }
relationships: |-
  document:1#viewer@user:alice
  document:1#viewer@document:2
  document:1#viewer@user:alice
  folder:1#viewer@user:alice
`
	_, err := run(t, src)
	got := problemsOf(t, err)
	want := []string{
		`t.yaml:8: relationship "document:1#viewer@document:2": `,
		`t.yaml:9: relationship "document:1#viewer@user:alice": duplicate of the relationship on line 7`,
		`t.yaml:10: relationship "folder:1#viewer@user:alice": `,
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], w)
		}
	}
}

func TestRunWithoutSchema(t *testing.T) {
	_, err := run(t, "relationships: ''\n")
	if got := problemsOf(t, err); len(got) != 1 || !strings.Contains(got[0], "no schema") {
		t.Errorf("problems = %q", got)
	}
}

func TestRunHonoursCancellation(t *testing.T) {
	f, err := Parse("t.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, f); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

func TestExpectationMembership(t *testing.T) {
	for e, m := range map[Expectation]engine.Membership{
		ExpectTrue: engine.HasPermission, ExpectFalse: engine.NoPermission, ExpectCaveated: engine.Conditional,
	} {
		if e.Membership() != m {
			t.Errorf("%v.Membership() = %v, want %v", e, e.Membership(), m)
		}
	}
}

// TestRunExpectedRelationErrors: an entry that cannot be expanded fails at its key's
// line with the reason (zed reports both), and the other entries are still checked.
func TestRunExpectedRelationErrors(t *testing.T) {
	rep, err := run(t, `schema: |-
  definition user {}
  definition group {
    relation member: user | group#member
  }
relationships: |-
  group:a#member@group:b#member
  group:b#member@group:a#member
  group:c#member@user:x
validation:
  group:a#member: []
  group:a#nope: []
  group:c#member:
    - "[user:x] is <group:c#member>"
`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Failures {
		got = append(got, f.String())
	}
	want := []string{
		"t.yaml:11: group:a#member: error: maximum depth exceeded",
		"t.yaml:12: group:a#nope: error: relation/permission `nope` not found under definition `group`",
	}
	if !slices.Equal(got, want) {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(rep.Relations) != 3 || !rep.Relations[2].OK() || rep.Relations[0].Err == nil {
		t.Errorf("relations = %+v", rep.Relations)
	}
	if _, err := RenderValidation(rep.Relations); err == nil {
		t.Error("RenderValidation rendered entries that could not be computed")
	}
}
