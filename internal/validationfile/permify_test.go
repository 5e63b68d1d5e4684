package validationfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const permifyGood = `schema: >-
    entity user {}

    entity organization {
        relation admin @user
        relation member @user
        attribute ip_range string[]
        permission view = check_ip(ip_range) or admin
    }

    entity repository {
        relation parent @organization
        relation owner @user
        attribute is_public boolean
        permission read = is_public or owner or parent.admin
        permission push = owner not parent.member
    }

    rule check_ip(ip_range string[]) {
        context.data.ip in ip_range
    }

relationships:
  - organization:org1#admin@user:ann
  - organization:org1#member@user:bob
  - repository:r1#parent@organization:org1
  - repository:r1#owner@user:bob
  - repository:r2#owner@user:cid

attributes:
  - repository:r3$is_public|boolean:true
  - organization:org1$ip_range|string[]:["10.0.0.1", "10.0.0.2"]

scenarios:
  - name: "basics"
    description: "relations, traversal, exclusion, attributes and rules"
    checks:
      - entity: "repository:r1"
        subject: "user:ann"
        assertions:
          read: true
          push: false
      - entity: "repository:r2"
        subject: "user:cid"
        assertions:
          push: true
      - entity: "repository:r3"
        subject: "user:zed"
        assertions:
          read: true
      - entity: "organization:org1"
        subject: "user:zed"
        context:
          data:
            ip: "10.0.0.2"
        assertions:
          view: true
      - entity: "organization:org1"
        subject: "user:zed"
        assertions:
          view: false
    entity_filters:
      - entity_type: "repository"
        subject: "user:ann"
        assertions:
          read: ["r1", "r3"]
    subject_filters:
      - subject_reference: "user"
        entity: "repository:r1"
        assertions:
          read: ["ann", "bob"]
          push: []
`

func TestPermifyFilePasses(t *testing.T) {
	if !IsPermify([]byte(permifyGood)) {
		t.Fatal("IsPermify = false for a Permify file")
	}
	if IsPermify([]byte("schema: |-\n  definition user {}\n")) {
		t.Fatal("IsPermify = true for a SpiceDB file")
	}
	if rep := runPermifySource(t, "good.yaml", permifyGood); !rep.OK() || rep.Checked != 9 {
		t.Errorf("report: checked %d, failures %v", rep.Checked, rep.Failures)
	}
}

func TestPermifyFileFailuresNameTheirLines(t *testing.T) {
	src := strings.Replace(permifyGood, "          push: true", "          push: false", 1)
	src = strings.Replace(src, `read: ["r1", "r3"]`, `read: ["r1"]`, 1)
	var got []string
	for _, fl := range runPermifySource(t, "bad.yaml", src).Failures {
		got = append(got, fl.String())
	}
	want := []string{
		`bad.yaml:46: scenario "basics": check repository:r2#push@user:cid: expected false, found true (CHECK_RESULT_ALLOWED)`,
		`bad.yaml:66: scenario "basics": entity filter repository#read@user:ann: expected [r1], found [r1, r3]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPermifyFileProblems(t *testing.T) {
	cases := []struct{ src, want string }{
		{
			strings.Replace(permifyGood, "relation owner @user\n        attribute is_public", "relation owner @usr\n        attribute is_public", 1),
			"f.yaml:13:25: schema: entity `usr` not found",
		},
		{
			strings.Replace(permifyGood, "repository:r2#owner@user:cid", "repository:r2#owner@organization:cid", 1),
			"f.yaml:28: relationship \"repository:r2#owner@organization:cid\": ERROR_CODE_VALIDATION",
		},
		{
			strings.Replace(permifyGood, "is_public|boolean:true", "is_public|boolean:maybe", 1),
			"f.yaml:31: attribute \"repository:r3$is_public|boolean:maybe\": value \"maybe\" is not valid for type boolean",
		},
		{strings.Replace(permifyGood, "push: true", "push: [1, 2]", 1), "f.yaml:46:17: assertion \"push\""},
	}
	for _, c := range cases {
		f, err := ParsePermify("f.yaml", []byte(c.src))
		if err == nil {
			_, err = RunPermify(context.Background(), f)
		}
		var pe *ProblemsError
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), c.want) {
			t.Errorf("got %v, want a problem containing %q", err, c.want)
		}
	}
}

const permifyContextual = `schema: >-
    entity user {}

    entity repository {
        relation owner @user
        attribute is_public boolean
        permission read = is_public or owner
        permission edit = owner
    }

relationships:
  - repository:r1#owner@user:ann

scenarios:
  - name: "contextual data"
    description: "tuples and attributes given with one query count for that query alone"
    checks:
      - entity: "repository:r2"
        subject: "user:bob"
        context:
          tuples:
            - "repository:r2#owner@user:bob"
          attributes: []
          data: {}
        assertions:
          edit: true
      - entity: "repository:r2"
        subject: "user:bob"
        assertions:
          edit: false
    entity_filters:
      - entity_type: "repository"
        subject: "user:cy"
        context:
          attributes:
            - "repository:r3$is_public|boolean:true"
        assertions:
          read: ["r3"]
      - entity_type: "repository"
        subject: "user:cy"
        assertions:
          read: []
    subject_filters:
      - subject_reference: "user"
        entity: "repository:r1"
        context:
          tuples:
            - "repository:r1#owner@user:dee"
        assertions:
          edit: ["ann", "dee"]
`

func runPermifySource(t *testing.T, name, src string) PermifyReport {
	t.Helper()
	f, err := ParsePermify(name, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunPermify(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestPermifyContextualTuplesAndAttributes(t *testing.T) {
	if rep := runPermifySource(t, "c.yaml", permifyContextual); !rep.OK() || rep.Checked != 5 {
		t.Errorf("checked %d, failures %v; want 5 checked, all held", rep.Checked, rep.Failures)
	}
	// Without its contextual tuple the first check fails, at its assertion's line.
	src := strings.Replace(permifyContextual, `            - "repository:r2#owner@user:bob"`, `            - "repository:r2#owner@user:eve"`, 1)
	rep := runPermifySource(t, "c.yaml", src)
	want := `c.yaml:26: scenario "contextual data": check repository:r2#edit@user:bob: expected true, found false (CHECK_RESULT_DENIED)`
	if len(rep.Failures) != 1 || rep.Failures[0].String() != want {
		t.Errorf("failures %v, want %q", rep.Failures, want)
	}
	// A contextual tuple that cannot be written fails its query at its own line.
	src = strings.Replace(permifyContextual, `            - "repository:r1#owner@user:dee"`, `            - "repository:r1#owner@repository:r2"`, 1)
	rep = runPermifySource(t, "c.yaml", src)
	if len(rep.Failures) != 1 || rep.Failures[0].Line != 48 || !strings.Contains(rep.Failures[0].Msg, `contextual tuple "repository:r1#owner@repository:r2"`) {
		t.Errorf("failures %v, want one on line 48 naming the contextual tuple", rep.Failures)
	}
}

func TestPermifyUnknownKeysAndShapes(t *testing.T) {
	for _, c := range []struct{ old, new, want string }{
		{"        assertions:\n          edit: false", "        assertion:\n          edit: false", `c.yaml:29:9: check: unknown key "assertion"`},
		{"          tuples:\n            - \"repository:r2", "          tuple:\n            - \"repository:r2", `c.yaml:21:11: context: unknown key "tuple"`},
		{"    checks:", "    check:", `c.yaml:17:5: scenario: unknown key "check"`},
		{"          attributes: []", "          attributes: {}", "c.yaml:23:23: context attributes: expected a list, found a mapping"},
	} {
		src := strings.Replace(permifyContextual, c.old, c.new, 1)
		_, err := ParsePermify("c.yaml", []byte(src))
		var pe *ProblemsError
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), c.want) {
			t.Errorf("%q: got %v, want a problem containing %q", c.new, err, c.want)
		}
	}
}

func TestLoadPermifySchemaFile(t *testing.T) {
	dir := t.TempDir()
	schemaText := "entity user {}\n\nentity doc {\n    relation owner @user\n    permission view = owner\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "schema.perm"), []byte(schemaText), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(schemaRef string) string {
		t.Helper()
		p := filepath.Join(dir, "v.yaml")
		src := "schema: " + schemaRef + "\nrelationships:\n  - doc:1#owner@user:ann\nscenarios:\n  - name: s\n    checks:\n      - entity: doc:1\n        subject: user:ann\n        assertions:\n          view: true\n"
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := LoadPermify(write("schema.perm"))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := RunPermify(context.Background(), f); err != nil || !rep.OK() || rep.Checked != 1 {
		t.Errorf("report %+v, err %v", rep, err)
	}
	for ref, want := range map[string]string{
		"https://example.com/schema.perm": "does not fetch schemas over the network",
		"../outside.perm":                 `schema file "../outside.perm"`,
	} {
		_, err := LoadPermify(write(ref))
		var pe *ProblemsError
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), want) || pe.Problems[0].Line != 1 {
			t.Errorf("schema %s: got %v, want a problem on line 1 containing %q", ref, err, want)
		}
	}
}
