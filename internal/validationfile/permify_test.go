package validationfile

import (
	"context"
	"errors"
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
	f, err := ParsePermify("good.yaml", []byte(permifyGood))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunPermify(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 9 {
		t.Errorf("report: checked %d, failures %v", rep.Checked, rep.Failures)
	}
}

func TestPermifyFileFailuresNameTheirLines(t *testing.T) {
	src := strings.Replace(permifyGood, "          push: true", "          push: false", 1)
	src = strings.Replace(src, `read: ["r1", "r3"]`, `read: ["r1"]`, 1)
	f, err := ParsePermify("bad.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunPermify(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fl := range rep.Failures {
		got = append(got, fl.String())
	}
	want := []string{
		`bad.yaml:46: scenario "basics": check repository:r2#push@user:cid: expected false, got CHECK_RESULT_ALLOWED`,
		`bad.yaml:66: scenario "basics": entity filter repository#read@user:ann: expected [r1], got [r1 r3]`,
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
			"f.yaml:28: relationship \"repository:r2#owner@organization:cid\": relation \"owner\" of entity \"repository\" does not allow subject organization:cid",
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
